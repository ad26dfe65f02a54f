"""Toy data whose structure is known in advance: a grammar corpus for word vectors and a string-reversal task.

Chapters 2-5 train small models in seconds on a CPU, so they need data that is
small, generated on the fly (nothing is stored in ``data/``) and whose answer is
known: the student can then check that a model *recovered* the structure
instead of trusting it.

The grammar corpus
------------------
:func:`grammar_corpus` writes short, English-like sentences (lower case,
whitespace-tokenised) from four families of templates. Each content word is
built from two hidden factors, and the templates make each factor visible only
through the words around it:

``people``
    :data:`PERSON_PAIRS` -- eight (male, female) pairs such as (king, queen),
    (man, woman), (boy, girl). A person word = *pair* factor + *gender* factor.
    The pair factor shows in the pair's own objects (king/queen: palace, throne,
    crown); the gender factor in the pronouns (he/his vs she/her). Nothing else
    distinguishes king from queen, so ``king - man + woman`` should land on
    ``queen``.
``countries``
    :data:`COUNTRIES` -- eight (country, capital, language) triples. A place =
    *country identity* (its language, the other member of the triple) + *kind*
    (country words: nation, border, government; city words: city, streets,
    mayor, station). So ``paris - france + japan`` should land on ``tokyo``.
``verbs``
    :data:`VERBS` -- ten (present, past, object phrase) triples. A verb form =
    *verb identity* (its object: walk ... to the park) + *tense* (every day,
    usually, often vs yesterday, last night, already). So ``walked - walk + go``
    should land on ``went``.
``things``
    :data:`THINGS` -- fruits and small animals described by adjectives (sweet,
    green, furry, ...), with the adjective probabilities given in the table:
    the chapter on distributional vectors counts them, as in the lecture's
    banana/puppy/fruit example.

``japanese`` (only on request: not in the default mix)
    The same three relations in Japanese, written with spaces between words
    (分かち書き) so that the same tools read it: :data:`JA_PERSON_PAIRS`
    (王/女王 …, gender through 彼/彼女), :data:`JA_COUNTRIES` (フランス/パリ/
    フランス語 …) and :data:`JA_VERBS` (歩く/歩いた …, tense through 毎日 vs
    昨日). Inflected verb forms are kept as one token (歩いた), whereas a
    MeCab-style morphological analyser would split them (歩い + た). Ask for it
    with ``grammar_corpus(n, families=("japanese",))``; the default corpus,
    which the later chapters use, is unchanged.

:func:`analogy_questions` lists every analogy the grammar implies (a : b :: c : d
with a, b from one pair and c, d from another), so accuracy can be measured;
``analogy_questions(lang="ja")`` gives the Japanese ones.

The reversal task
-----------------
:func:`reversal_pairs` draws random strings over a small alphabet and pairs each
with its reversal. The input length is under the caller's control, which is
what the seq2seq and attention chapters need to show how accuracy falls with
length when the whole input must pass through one fixed-length vector.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "PERSON_PAIRS",
    "COUNTRIES",
    "VERBS",
    "THINGS",
    "FAMILY_WEIGHTS",
    "EXTRA_FAMILY_WEIGHTS",
    "JA_PERSON_PAIRS",
    "JA_COUNTRIES",
    "JA_VERBS",
    "grammar_corpus",
    "SentenceCheck",
    "check_sentence",
    "Analogy",
    "analogy_questions",
    "questions_from_pairs",
    "RELATIONS",
    "TEMPLATES",
    "ReversalTask",
    "reversal_pairs",
]

#: (male, female, objects that belong to the pair). The objects carry the pair factor.
PERSON_PAIRS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("king", "queen", ("palace", "throne", "crown")),
    ("prince", "princess", ("castle", "horse", "sword")),
    ("man", "woman", ("office", "car", "job")),
    ("boy", "girl", ("school", "ball", "toy")),
    ("father", "mother", ("house", "garden", "family")),
    ("son", "daughter", ("room", "bike", "homework")),
    ("uncle", "aunt", ("farm", "cow", "tractor")),
    ("husband", "wife", ("wedding", "ring", "marriage")),
)
#: Words that carry the gender factor (subject pronoun, possessive).
GENDER_WORDS = {"male": ("he", "his"), "female": ("she", "her")}

#: (country, capital, language). The language carries the identity factor.
COUNTRIES: tuple[tuple[str, str, str], ...] = (
    ("france", "paris", "french"),
    ("japan", "tokyo", "japanese"),
    ("italy", "rome", "italian"),
    ("germany", "berlin", "german"),
    ("spain", "madrid", "spanish"),
    ("china", "beijing", "chinese"),
    ("russia", "moscow", "russian"),
    ("greece", "athens", "greek"),
)

#: (present, past, object phrase). The object phrase carries the identity factor.
VERBS: tuple[tuple[str, str, str], ...] = (
    ("walk", "walked", "to the park"),
    ("go", "went", "to the market"),
    ("eat", "ate", "some bread"),
    ("drink", "drank", "some tea"),
    ("see", "saw", "a movie"),
    ("write", "wrote", "a letter"),
    ("run", "ran", "a race"),
    ("sing", "sang", "a song"),
    ("buy", "bought", "some food"),
    ("take", "took", "the train"),
)

#: noun -> {adjective: probability}. Fruits and small animals; "fruit" is the general word.
THINGS: dict[str, dict[str, float]] = {
    "banana": {"sweet": 0.55, "green": 0.25, "yellow": 0.20},
    "apple": {"sweet": 0.45, "green": 0.30, "fresh": 0.25},
    "grape": {"sweet": 0.50, "green": 0.30, "sour": 0.20},
    "lemon": {"sour": 0.55, "yellow": 0.35, "fresh": 0.10},
    "fruit": {"sweet": 0.55, "green": 0.25, "fresh": 0.20},
    "puppy": {"furry": 0.60, "cute": 0.25, "sweet": 0.15},
    "kitten": {"furry": 0.55, "cute": 0.30, "soft": 0.15},
    "rabbit": {"furry": 0.50, "soft": 0.30, "cute": 0.20},
}

#: How often each family of templates is used (the default mix).
FAMILY_WEIGHTS: dict[str, float] = {"people": 0.35, "countries": 0.25, "verbs": 0.25, "things": 0.15}
#: Families that are used only when asked for by name, with their weight in a mix.
EXTRA_FAMILY_WEIGHTS: dict[str, float] = {"japanese": 0.25}

# -- the Japanese family (分かち書き: one space between words) -------------------

#: (male, female, objects of the pair), as :data:`PERSON_PAIRS`.
JA_PERSON_PAIRS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("王", "女王", ("宮殿", "王座", "王冠")),
    ("王子", "王女", ("城", "馬", "剣")),
    ("男", "女", ("会社", "車", "仕事")),
    ("少年", "少女", ("学校", "ボール", "おもちゃ")),
    ("父", "母", ("家", "庭", "家族")),
    ("息子", "娘", ("部屋", "自転車", "宿題")),
    ("おじ", "おば", ("農場", "牛", "畑")),
    ("夫", "妻", ("結婚式", "指輪", "新居")),
)
#: Words that carry the gender factor in the Japanese family (subject pronoun; possessive = pronoun + の).
JA_GENDER_WORDS = {"male": "彼", "female": "彼女"}
#: (country, capital, language), as :data:`COUNTRIES`.
JA_COUNTRIES: tuple[tuple[str, str, str], ...] = (
    ("フランス", "パリ", "フランス語"),
    ("日本", "東京", "日本語"),
    ("イタリア", "ローマ", "イタリア語"),
    ("ドイツ", "ベルリン", "ドイツ語"),
    ("スペイン", "マドリード", "スペイン語"),
    ("中国", "北京", "中国語"),
    ("ロシア", "モスクワ", "ロシア語"),
    ("ギリシャ", "アテネ", "ギリシャ語"),
)
#: (present, past, object phrase), as :data:`VERBS`; each form is one token.
JA_VERBS: tuple[tuple[str, str, str], ...] = (
    ("歩く", "歩いた", "公園 まで"),
    ("行く", "行った", "市場 へ"),
    ("食べる", "食べた", "パン を"),
    ("飲む", "飲んだ", "お茶 を"),
    ("見る", "見た", "映画 を"),
    ("書く", "書いた", "手紙 を"),
    ("走る", "走った", "校庭 を"),
    ("歌う", "歌った", "歌 を"),
    ("買う", "買った", "食べ物 を"),
    ("乗る", "乗った", "電車 に"),
)
_JA_SUBFAMILY_WEIGHTS = {"people": 0.4, "countries": 0.3, "verbs": 0.3}

_PEOPLE_TEMPLATES = (
    "the {w} showed {his} {obj} to us",
    "{he} is a {w} with a {obj}",
    "the {w} loves {his} {obj}",
    "the {w} and {his} {obj} are here",
)
_COUNTRY_TEMPLATES = (
    "{country} is a large nation with a long border",
    "the government of {country} is strong",
    "people in {country} speak {lang}",
    "the country {country} speaks {lang}",
    "{capital} is a big city with busy streets",
    "the mayor of {capital} speaks {lang}",
    "people in {capital} speak {lang}",
    "the city {capital} has a station",
    "the capital of {country} is {capital}",
)
_PRESENT_TEMPLATES = (
    "every day {subj} {v} {obj}",
    "{subj} usually {v} {obj}",
    "{subj} often {v} {obj}",
)
_PAST_TEMPLATES = (
    "yesterday {subj} {v} {obj}",
    "last night {subj} {v} {obj}",
    "{subj} already {v} {obj}",
)
_SUBJECTS = ("i", "we", "you", "they")

#: The English sentence templates by family, for reading (the chapters print them): ``{subj}`` is one of
#: i/we/you/they, ``{v}`` the verb form, ``{obj}`` its object phrase, ``{w}`` a person word, ``{his}``/``{he}``
#: the pronouns of its gender, ``{country}``/``{capital}``/``{lang}`` a row of :data:`COUNTRIES`.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "people": _PEOPLE_TEMPLATES,
    "countries": _COUNTRY_TEMPLATES,
    "present": _PRESENT_TEMPLATES,
    "past": _PAST_TEMPLATES,
}
_JA_PEOPLE_TEMPLATES = (
    "{w} は {his} {obj} を 見せ て くれ た",
    "{he} は {obj} を 持つ {w} だ",
    "{w} は {his} {obj} を 愛し て いる",
    "{w} と {his} {obj} が ここ に ある",
)
_JA_COUNTRY_TEMPLATES = (
    "{country} は 長い 国境 を 持つ 大きな 国 だ",
    "{country} の 政府 は 強い",
    "{country} の 人々 は {lang} を 話す",
    "{country} という 国 で は {lang} を 話す",
    "{capital} は 通り が にぎやか な 大きな 都市 だ",
    "{capital} の 市長 は {lang} を 話す",
    "{capital} の 人々 は {lang} を 話す",
    "{capital} という 都市 に は 駅 が ある",
    "{country} の 首都 は {capital} だ",
)
_JA_PRESENT_TEMPLATES = ("{subj} は 毎日 {obj} {v}", "{subj} は ふだん {obj} {v}", "{subj} は よく {obj} {v}")
_JA_PAST_TEMPLATES = ("{subj} は 昨日 {obj} {v}", "{subj} は 昨夜 {obj} {v}", "{subj} は もう {obj} {v}")
_JA_SUBJECTS = ("私", "私たち", "あなた", "彼ら")
_THING_TEMPLATES = (
    "the {noun} is {adj}",
    "i like the {adj} {noun}",
    "this {noun} looks {adj}",
)


def _check_int(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def _people(rng: random.Random) -> str:
    male, female, objects = rng.choice(PERSON_PAIRS)
    gender = rng.choice(("male", "female"))
    he, his = GENDER_WORDS[gender]
    w = male if gender == "male" else female
    return rng.choice(_PEOPLE_TEMPLATES).format(w=w, he=he, his=his, obj=rng.choice(objects))


def _countries(rng: random.Random) -> str:
    country, capital, lang = rng.choice(COUNTRIES)
    return rng.choice(_COUNTRY_TEMPLATES).format(country=country, capital=capital, lang=lang)


def _verbs(rng: random.Random) -> str:
    present, past, obj = rng.choice(VERBS)
    if rng.random() < 0.5:
        return rng.choice(_PRESENT_TEMPLATES).format(subj=rng.choice(_SUBJECTS), v=present, obj=obj)
    return rng.choice(_PAST_TEMPLATES).format(subj=rng.choice(_SUBJECTS), v=past, obj=obj)


def _things(rng: random.Random) -> str:
    noun = rng.choice(sorted(THINGS))
    adjs, probs = zip(*THINGS[noun].items())
    adj = rng.choices(adjs, weights=probs)[0]
    return rng.choice(_THING_TEMPLATES).format(noun=noun, adj=adj)


def _japanese(rng: random.Random) -> str:
    kinds, weights = zip(*_JA_SUBFAMILY_WEIGHTS.items())
    kind = rng.choices(kinds, weights=weights)[0]
    if kind == "people":
        male, female, objects = rng.choice(JA_PERSON_PAIRS)
        gender = rng.choice(("male", "female"))
        he = JA_GENDER_WORDS[gender]
        w = male if gender == "male" else female
        return rng.choice(_JA_PEOPLE_TEMPLATES).format(w=w, he=he, his=f"{he} の", obj=rng.choice(objects))
    if kind == "countries":
        country, capital, lang = rng.choice(JA_COUNTRIES)
        return rng.choice(_JA_COUNTRY_TEMPLATES).format(country=country, capital=capital, lang=lang)
    present, past, obj = rng.choice(JA_VERBS)
    if rng.random() < 0.5:
        return rng.choice(_JA_PRESENT_TEMPLATES).format(subj=rng.choice(_JA_SUBJECTS), v=present, obj=obj)
    return rng.choice(_JA_PAST_TEMPLATES).format(subj=rng.choice(_JA_SUBJECTS), v=past, obj=obj)


_FAMILIES = {"people": _people, "countries": _countries, "verbs": _verbs, "things": _things, "japanese": _japanese}
_ALL_WEIGHTS = {**FAMILY_WEIGHTS, **EXTRA_FAMILY_WEIGHTS}


def grammar_corpus(n_sentences: int = 20000, *, seed: int = 0, families: tuple[str, ...] | None = None) -> list[list[str]]:
    """Generate the toy corpus described in the module docstring.

    Parameters
    ----------
    n_sentences : int, default 20000
        Number of sentences.
    seed : int, default 0
        The same ``(n_sentences, seed, families)`` always gives the same corpus.
    families : tuple of str, optional
        Families to mix, from ``("people", "countries", "verbs", "things",
        "japanese")`` (default: the four English families, mixed with
        :data:`FAMILY_WEIGHTS`; ``"japanese"`` is used only when named, with the
        weight in :data:`EXTRA_FAMILY_WEIGHTS`).

    Returns
    -------
    list of list of str
        One list of lower-case tokens per sentence.

    Raises
    ------
    ValueError
        ``n_sentences`` is not a positive integer, or a family name is unknown.

    Examples
    --------
    >>> grammar_corpus(2, seed=0)[0]
    ['they', 'often', 'run', 'a', 'race']
    """
    n_sentences = _check_int("n_sentences", n_sentences, 1)
    names = tuple(families) if families is not None else tuple(FAMILY_WEIGHTS)
    unknown = [f for f in names if f not in _FAMILIES]
    if unknown or not names:
        raise ValueError(f"unknown families {unknown or names!r}; choose from {tuple(_ALL_WEIGHTS)}.")
    weights = [_ALL_WEIGHTS[f] for f in names]
    rng = random.Random(seed)
    picks = rng.choices(names, weights=weights, k=n_sentences)
    return [_FAMILIES[f](rng).split() for f in picks]


@dataclass(frozen=True)
class SentenceCheck:
    """Whether a sentence belongs to the grammar of :func:`grammar_corpus`.

    Attributes
    ----------
    family : str or None
        ``"people"``, ``"countries"``, ``"verbs"`` or ``"things"`` when the
        sentence has the shape of one of that family's templates, else None.
    form_ok : bool
        The sentence matches a template and every slot holds a word of the
        right class (a person word where a person goes, a past form where the
        template is in the past, ...).
    agrees : bool
        ``form_ok`` and the slots also agree: the pronoun has the person's
        gender and the object is that person's; country, capital and language
        are from one row of :data:`COUNTRIES`; the object phrase is the verb's;
        the adjective is one the noun takes. Exactly the sentences
        :func:`grammar_corpus` can produce.
    """

    family: str | None
    form_ok: bool
    agrees: bool


def _compile(templates: tuple[str, ...]) -> list[tuple[str, "re.Pattern[str]"]]:
    out = []
    for t in templates:
        parts = re.split(r"(\{\w+\})", t)
        rx = "".join(f"(?P<{p[1:-1]}>.+?)" if p.startswith("{") else re.escape(p) for p in parts)
        out.append((t, re.compile(rx + "$")))
    return out


_PATTERNS = {
    "people": _compile(_PEOPLE_TEMPLATES),
    "countries": _compile(_COUNTRY_TEMPLATES),
    "present": _compile(_PRESENT_TEMPLATES),
    "past": _compile(_PAST_TEMPLATES),
    "things": _compile(_THING_TEMPLATES),
}


def _slots_ok(kind: str, g: dict[str, str]) -> tuple[bool, bool]:
    """(form_ok, agrees) for the slot values ``g`` of a template of ``kind``."""
    if kind == "people":
        pair = {m: (objs, "male") for m, _, objs in PERSON_PAIRS} | {f: (objs, "female") for _, f, objs in PERSON_PAIRS}
        objects = {o for *_, objs in PERSON_PAIRS for o in objs}
        pronouns = {"he": "male", "she": "female"}
        possessives = {"his": "male", "her": "female"}
        form = g["w"] in pair and g["obj"] in objects and g.get("he", "he") in pronouns and g.get("his", "his") in possessives
        if not form:
            return False, False
        objs, gender = pair[g["w"]]
        agree = g["obj"] in objs and pronouns.get(g.get("he", ""), gender) == gender and possessives.get(g.get("his", ""), gender) == gender
        return True, agree
    if kind == "countries":
        rows = {key: {r[i] for r in COUNTRIES} for i, key in enumerate(("country", "capital", "lang"))}
        if not all(g[k] in rows[k] for k in g):
            return False, False
        owners = [{i for i, r in enumerate(COUNTRIES) if r[("country", "capital", "lang").index(k)] == v} for k, v in g.items()]
        return True, len(set.intersection(*owners)) == 1
    if kind in ("present", "past"):
        col = 0 if kind == "present" else 1
        verbs = {r[col]: r[2] for r in VERBS}
        objects = {r[2] for r in VERBS}
        form = g["subj"] in _SUBJECTS and g["v"] in verbs and g["obj"] in objects
        return form, form and verbs[g["v"]] == g["obj"]
    # things
    adjs = {a for d in THINGS.values() for a in d}
    form = g["noun"] in THINGS and g["adj"] in adjs
    return form, form and THINGS[g["noun"]].get(g["adj"], 0.0) > 0


def check_sentence(tokens: Sequence[str] | str) -> SentenceCheck:
    """Check a sentence (tokens or a space-separated string) against the grammar.

    Used to measure what a language model trained on :func:`grammar_corpus`
    has learned: the share of its samples with a correct *form* and the share
    that also *agree*.

    Examples
    --------
    >>> check_sentence("the king loves his crown")
    SentenceCheck(family='people', form_ok=True, agrees=True)
    >>> check_sentence("the king loves her crown")
    SentenceCheck(family='people', form_ok=True, agrees=False)
    """
    text = tokens if isinstance(tokens, str) else " ".join(tokens)
    text = " ".join(text.split())
    best: SentenceCheck | None = None
    for kind, patterns in _PATTERNS.items():
        family = "verbs" if kind in ("present", "past") else kind
        for _, rx in patterns:
            m = rx.match(text)
            if m is None:
                continue
            form, agree = _slots_ok(kind, m.groupdict())
            cand = SentenceCheck(family, form, agree)
            if agree:
                return cand
            if best is None or (form and not best.form_ok):
                best = cand
    return best if best is not None else SentenceCheck(None, False, False)


@dataclass(frozen=True)
class Analogy:
    """One question ``a : b :: c : d`` (``d`` is the expected answer) and the relation it tests."""

    a: str
    b: str
    c: str
    d: str
    relation: str


#: Relations the grammar encodes, with their Japanese names for tables.
RELATIONS = {"gender": "性別", "capital": "国と首都", "past": "過去形"}


def questions_from_pairs(pairs: Sequence[tuple[str, str]], relation: str) -> list[Analogy]:
    """All analogies ``a : b :: c : d`` from two different rows ``(a, b)`` and ``(c, d)`` of ``pairs``.

    ``n`` pairs give ``n * (n - 1)`` questions (both orders of every two rows).
    """
    return [Analogy(a, b, c, d, relation) for i, (a, b) in enumerate(pairs) for j, (c, d) in enumerate(pairs) if i != j]


def analogy_questions(relation: str | None = None, *, lang: str = "en") -> list[Analogy]:
    """Every analogy the grammar implies, e.g. ``man : woman :: king : queen``.

    Parameters
    ----------
    relation : {"gender", "capital", "past"}, optional
        Only this relation (default: all three). ``gender``: male -> female for
        two different person pairs; ``capital``: country -> capital;
        ``past``: present -> past tense.
    lang : {"en", "ja"}, default "en"
        The English families, or the Japanese family (王 : 女王 :: 父 : 母 ...).

    Returns
    -------
    list of Analogy
        All ordered pairs of distinct rows: 56 + 56 + 90 questions in total
        (the same numbers in Japanese).
    """
    if lang not in ("en", "ja"):
        raise ValueError(f"lang must be 'en' or 'ja'; got {lang!r}.")
    people, countries, verbs = (PERSON_PAIRS, COUNTRIES, VERBS) if lang == "en" else (JA_PERSON_PAIRS, JA_COUNTRIES, JA_VERBS)
    rows: dict[str, list[tuple[str, str]]] = {
        "gender": [(m, f) for m, f, _ in people],
        "capital": [(c, cap) for c, cap, _ in countries],
        "past": [(p, q) for p, q, _ in verbs],
    }
    if relation is not None and relation not in rows:
        raise ValueError(f"unknown relation {relation!r}; choose from {tuple(rows)} or None for all.")
    out: list[Analogy] = []
    for rel in [relation] if relation else list(rows):
        out += questions_from_pairs(rows[rel], rel)
    return out


# ---------------------------------------------------------------------------
# string reversal
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReversalTask:
    """Pairs ``(source, target)`` where ``target`` is ``source`` reversed.

    Attributes
    ----------
    sources, targets : tuple of str
    alphabet : str
        The characters the strings are drawn from.
    """

    sources: tuple[str, ...]
    targets: tuple[str, ...]
    alphabet: str

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def lengths(self) -> np.ndarray:
        """Length of each source string, ``(N,)``."""
        return np.array([len(s) for s in self.sources], dtype=np.int64)


def reversal_pairs(
    n: int,
    *,
    min_len: int = 5,
    max_len: int = 40,
    alphabet: str = "abcdefghij",
    seed: int = 0,
    lengths: "np.ndarray | list[int] | None" = None,
) -> ReversalTask:
    """Random strings and their reversals, with lengths uniform on ``[min_len, max_len]``.

    Parameters
    ----------
    n : int
        Number of pairs (ignored when ``lengths`` is given).
    min_len, max_len : int, default 5, 40
        Inclusive range of source lengths.
    alphabet : str, default "abcdefghij"
        Distinct characters to draw from (at least 2).
    seed : int, default 0
    lengths : sequence of int, optional
        Exact length of each string instead of uniform sampling (e.g. the same
        number of test strings per length).

    Returns
    -------
    ReversalTask

    Raises
    ------
    ValueError
        Bad sizes, a length range with ``min_len > max_len``, or an alphabet
        with repeated or fewer than two characters.
    """
    if len(alphabet) < 2 or len(set(alphabet)) != len(alphabet):
        raise ValueError(f"alphabet must have at least two distinct characters and no repeats; got {alphabet!r}.")
    rng = np.random.default_rng(seed)
    if lengths is None:
        n = _check_int("n", n, 1)
        min_len = _check_int("min_len", min_len, 1)
        max_len = _check_int("max_len", max_len, 1)
        if min_len > max_len:
            raise ValueError(f"min_len ({min_len}) must be <= max_len ({max_len}).")
        lens = rng.integers(min_len, max_len + 1, size=n)
    else:
        lens = np.asarray(lengths, dtype=np.int64)
        if lens.ndim != 1 or lens.size == 0 or (lens < 1).any():
            raise ValueError("lengths must be a non-empty 1-D sequence of integers >= 1.")
    chars = np.array(list(alphabet))
    sources = tuple("".join(chars[rng.integers(0, len(chars), size=int(k))]) for k in lens)
    return ReversalTask(sources=sources, targets=tuple(s[::-1] for s in sources), alphabet=alphabet)
