"""Toy corpora: determinism and the structure the chapters rely on."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mixlib.course import corpus


@pytest.fixture(scope="module")
def sents():
    return corpus.grammar_corpus(6000, seed=3)


def test_grammar_corpus_is_deterministic_and_seed_dependent():
    a = corpus.grammar_corpus(300, seed=7)
    b = corpus.grammar_corpus(300, seed=7)
    c = corpus.grammar_corpus(300, seed=8)
    assert a == b
    assert a != c
    assert len(a) == 300 and all(isinstance(w, str) and w for s in a for w in s)


def test_family_mix_follows_weights(sents):
    persons = {w for m, f, _ in corpus.PERSON_PAIRS for w in (m, f)}
    places = {w for c, cap, _ in corpus.COUNTRIES for w in (c, cap)}
    verbs = {w for p, q, _ in corpus.VERBS for w in (p, q)}
    nouns = set(corpus.THINGS)
    counts = Counter()
    for s in sents:
        tags = [name for name, vocab in (("people", persons), ("countries", places), ("verbs", verbs), ("things", nouns)) if vocab & set(s)]
        assert len(tags) == 1, f"sentence belongs to {tags}: {s}"
        counts[tags[0]] += 1
    for fam, w in corpus.FAMILY_WEIGHTS.items():
        assert abs(counts[fam] / len(sents) - w) < 0.03, (fam, counts[fam] / len(sents), w)


def test_people_gender_and_pair_objects_agree(sents):
    male = {m: objs for m, _, objs in corpus.PERSON_PAIRS}
    female = {f: objs for _, f, objs in corpus.PERSON_PAIRS}
    all_objs = {o for *_, objs in corpus.PERSON_PAIRS for o in objs}
    seen = 0
    for s in sents:
        person = [w for w in s if w in male or w in female]
        if not person:
            continue
        seen += 1
        (w,) = person
        he, his = corpus.GENDER_WORDS["male" if w in male else "female"]
        other = corpus.GENDER_WORDS["female" if w in male else "male"]
        assert set(s) & {he, his}, s
        assert not set(s) & set(other), s
        objs = [x for x in s if x in all_objs]
        assert len(objs) == 1 and objs[0] in (male.get(w) or female[w]), s
    assert seen > 1000


def test_countries_mention_only_their_own_capital_and_language(sents):
    owner = {}
    for i, (c, cap, lang) in enumerate(corpus.COUNTRIES):
        owner.update({c: i, cap: i, lang: i})
    for s in sents:
        ids = {owner[w] for w in s if w in owner}
        assert len(ids) <= 1, s


def test_tense_markers_match_verb_forms(sents):
    present = {p for p, _, _ in corpus.VERBS}
    past = {q for _, q, _ in corpus.VERBS}
    present_markers = {"every", "usually", "often"}
    past_markers = {"yesterday", "last", "already"}
    n_present = n_past = 0
    for s in sents:
        ws = set(s)
        if ws & present:
            assert ws & present_markers and not ws & past_markers, s
            n_present += 1
        if ws & past:
            assert ws & past_markers and not ws & present_markers, s
            n_past += 1
    assert n_present > 500 and n_past > 500


def test_things_adjective_frequencies_match_the_table():
    s = corpus.grammar_corpus(20000, seed=0, families=("things",))
    adjs = {a for d in corpus.THINGS.values() for a in d}
    by_noun: dict[str, Counter] = {n: Counter() for n in corpus.THINGS}
    for sent in s:
        (noun,) = [w for w in sent if w in corpus.THINGS]
        (adj,) = [w for w in sent if w in adjs]
        by_noun[noun][adj] += 1
    for noun, probs in corpus.THINGS.items():
        total = sum(by_noun[noun].values())
        assert total > 1500
        assert set(by_noun[noun]) <= set(probs)
        for adj, p in probs.items():
            assert abs(by_noun[noun][adj] / total - p) < 0.05, (noun, adj)


def test_grammar_corpus_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_sentences"):
        corpus.grammar_corpus(0)
    with pytest.raises(ValueError, match="unknown families"):
        corpus.grammar_corpus(10, families=("animals",))
    with pytest.raises(ValueError, match="lang"):
        corpus.analogy_questions(lang="fr")


def test_analogy_questions_cover_all_pairs_and_words_exist(sents):
    q = corpus.analogy_questions()
    by_rel = Counter(x.relation for x in q)
    assert by_rel == {"gender": 8 * 7, "capital": 8 * 7, "past": 10 * 9}
    vocab = {w for s in sents for w in s}
    assert all({x.a, x.b, x.c, x.d} <= vocab for x in q)
    assert all(len({x.a, x.b, x.c, x.d}) == 4 for x in q)
    assert corpus.analogy_questions("capital")[0].relation == "capital"
    with pytest.raises(ValueError, match="unknown relation"):
        corpus.analogy_questions("plural")


def test_reversal_pairs():
    t = corpus.reversal_pairs(500, min_len=3, max_len=9, alphabet="xyz", seed=1)
    assert len(t) == 500
    assert all(tg == s[::-1] for s, tg in zip(t.sources, t.targets))
    assert t.lengths.min() >= 3 and t.lengths.max() <= 9
    assert set(np.unique(t.lengths)) == set(range(3, 10))
    assert set("".join(t.sources)) == set("xyz")
    assert corpus.reversal_pairs(500, min_len=3, max_len=9, alphabet="xyz", seed=1) == t
    fixed = corpus.reversal_pairs(0, lengths=[4, 4, 7], seed=2)
    assert list(fixed.lengths) == [4, 4, 7]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n=10, alphabet="a"), "alphabet"),
        (dict(n=10, alphabet="aab"), "alphabet"),
        (dict(n=10, min_len=5, max_len=4), "min_len"),
        (dict(n=0), "n must"),
        (dict(n=1, lengths=[0]), "lengths"),
    ],
)
def test_reversal_pairs_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        corpus.reversal_pairs(**kwargs)


def test_check_sentence_accepts_the_corpus_and_rejects_broken_agreement():
    for s in corpus.grammar_corpus(2000, seed=11):
        assert corpus.check_sentence(s).agrees, s
    cases = {
        "the king loves her crown": ("people", True, False),
        "the king loves his sword": ("people", True, False),
        "people in paris speak japanese": ("countries", True, False),
        "yesterday we walk to the park": ("verbs", False, False),
        "yesterday we walked some tea": ("verbs", True, False),
        "the banana is furry": ("things", True, False),
        "king the loves his crown": (None, False, False),
    }
    for text, (family, form, agrees) in cases.items():
        got = corpus.check_sentence(text)
        assert (got.family, got.form_ok, got.agrees) == (family, form, agrees), text


# -- the Japanese family --------------------------------------------------------------


@pytest.fixture(scope="module")
def ja_sents():
    return corpus.grammar_corpus(4000, seed=5, families=("japanese",))


def _ja_words():
    people = {w for m, f, _ in corpus.JA_PERSON_PAIRS for w in (m, f)}
    places = {w for row in corpus.JA_COUNTRIES for w in row}
    verbs = {w for p, q, _ in corpus.JA_VERBS for w in (p, q)}
    return people, places, verbs


def test_default_corpus_is_english_only_and_japanese_only_on_request(sents):
    people, places, verbs = _ja_words()
    ja = people | places | verbs
    assert not any(ja & set(s) for s in sents), "the default mix must not contain the Japanese family"
    mixed = corpus.grammar_corpus(3000, seed=1, families=("people", "japanese"))
    n_ja = sum(bool(ja & set(s)) for s in mixed)
    # weights 0.35 : 0.25 -> 5/12 of the sentences are Japanese
    assert abs(n_ja / len(mixed) - 0.25 / 0.60) < 0.04
    assert corpus.grammar_corpus(50, seed=2, families=("japanese",)) == corpus.grammar_corpus(50, seed=2, families=("japanese",))


def test_japanese_sentences_are_space_separated_words_and_agree(ja_sents):
    people, places, verbs = _ja_words()
    pair_objs = {w: objs for m, f, objs in corpus.JA_PERSON_PAIRS for w in (m, f)}
    male = {m for m, _, _ in corpus.JA_PERSON_PAIRS}
    owner = {w: i for i, row in enumerate(corpus.JA_COUNTRIES) for w in row}
    present = {p: obj for p, _, obj in corpus.JA_VERBS}
    past = {q: obj for _, q, obj in corpus.JA_VERBS}
    counts = Counter()
    for s in ja_sents:
        assert all(w and " " not in w for w in s)
        assert not any(ch.isascii() and ch.isalpha() for w in s for ch in w), s  # no Latin letters
        ws = set(s)
        kinds = [k for k, vocab in (("people", people), ("countries", places), ("verbs", verbs)) if ws & vocab]
        assert len(kinds) == 1, s
        counts[kinds[0]] += 1
        if kinds[0] == "people":
            (w,) = [x for x in s if x in people]
            pron = "彼" if w in male else "彼女"
            assert pron in ws and ({"彼", "彼女"} - {pron}).isdisjoint(ws), s
            assert [x for x in s if x in {o for objs in pair_objs.values() for o in objs}] in ([o] for o in pair_objs[w]), s
        elif kinds[0] == "countries":
            assert len({owner[x] for x in s if x in owner}) == 1, s
        else:
            (v,) = [x for x in s if x in verbs]
            text = " ".join(s)
            obj = present.get(v) or past[v]
            assert f" {obj} {v}" in f" {text}", s
            if v in present:
                assert ws & {"毎日", "ふだん", "よく"} and not ws & {"昨日", "昨夜", "もう"}, s
            else:
                assert ws & {"昨日", "昨夜", "もう"} and not ws & {"毎日", "ふだん", "よく"}, s
    assert min(counts.values()) > 800, counts


def test_japanese_analogy_questions(ja_sents):
    q = corpus.analogy_questions(lang="ja")
    assert Counter(x.relation for x in q) == {"gender": 56, "capital": 56, "past": 90}
    vocab = {w for s in ja_sents for w in s}
    assert all({x.a, x.b, x.c, x.d} <= vocab for x in q)
    assert corpus.Analogy("王", "女王", "父", "母", "gender") in q
    assert corpus.Analogy("歩く", "歩いた", "行く", "行った", "past") in q


def test_questions_from_pairs_enumerates_ordered_pairs_of_rows():
    pairs = [("a", "b"), ("c", "d"), ("e", "f")]
    q = corpus.questions_from_pairs(pairs, "r")
    assert len(q) == 6
    assert {(x.a, x.c) for x in q} == {(r1[0], r2[0]) for r1 in pairs for r2 in pairs if r1 != r2}
    assert all((x.a, x.b) in pairs and (x.c, x.d) in pairs and x.relation == "r" for x in q)


def test_grammar_corpus_docstring_example_runs():
    import doctest

    (test,) = doctest.DocTestFinder().find(corpus.grammar_corpus, "grammar_corpus", globs={"grammar_corpus": corpus.grammar_corpus})
    result = doctest.DocTestRunner().run(test)
    assert result.attempted >= 1 and result.failed == 0


def test_templates_are_the_ones_the_corpus_is_written_from():
    import re

    def pattern(template):
        parts = re.split(r"\{\w+\}", template)
        return re.compile("^" + r"(.+?)".join(map(re.escape, parts)) + "$")

    fam = {"people": "people", "countries": "countries", "verbs": ("present", "past")}
    for family, keys in fam.items():
        keys = keys if isinstance(keys, tuple) else (keys,)
        patterns = [pattern(t) for k in keys for t in corpus.TEMPLATES[k]]
        used = set()
        for s in corpus.grammar_corpus(400, seed=1, families=(family,)):
            hits = [i for i, p in enumerate(patterns) if p.match(" ".join(s))]
            assert hits, f"{' '.join(s)!r} matches no template of {family}"
            used.update(hits)
        assert used == set(range(len(patterns)))  # every template is used
