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
