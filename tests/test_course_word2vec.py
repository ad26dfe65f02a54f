"""Counts, PPMI, SGNS/CBOW and analogies, each against a naive independent computation."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch

from mixlib.course import corpus
from mixlib.course import word2vec as w2v

TINY = [["a", "b", "c", "a"], ["b", "c"], ["d"], ["a", "d", "b", "c", "a"]]


def test_build_vocab_orders_by_count_then_alphabet():
    v = w2v.build_vocab(TINY)
    c = Counter(w for s in TINY for w in s)
    assert list(v.counts) == [c[w] for w in v.words]
    assert v.words == ("a", "b", "c", "d")  # a:4, b:3, c:3 (b before c), d:2
    assert w2v.build_vocab(TINY, min_count=3).words == ("a", "b", "c")
    with pytest.raises(KeyError, match="'zzz' is not in the vocabulary"):
        v.index("zzz")
    with pytest.raises(ValueError, match="min_count"):
        w2v.build_vocab(TINY, min_count=0)


def _naive_cooc(sents, vocab, window):
    C = np.zeros((len(vocab), len(vocab)))
    for s in sents:
        for i, w in enumerate(s):
            for j, c in enumerate(s):
                if i != j and abs(i - j) <= window:
                    C[vocab.index(w), vocab.index(c)] += 1
    return C


@pytest.mark.parametrize("window", [1, 2, 3])
def test_cooccurrence_matches_naive_double_loop(window):
    sents = corpus.grammar_corpus(200, seed=1)
    v = w2v.build_vocab(sents)
    C = w2v.cooccurrence_matrix(sents, v, window=window)
    np.testing.assert_array_equal(C, _naive_cooc(sents, v, window))
    np.testing.assert_array_equal(C, C.T)


def test_ppmi_matches_cell_by_cell_formula():
    rng = np.random.default_rng(0)
    N = rng.poisson(1.0, size=(7, 5)).astype(float)
    N[0, 0] = 0
    for alpha, shift in [(1.0, 0.0), (0.75, 0.0), (1.0, math.log(5))]:
        P = w2v.ppmi(N, alpha=alpha, shift=shift)
        total = N.sum()
        ctx = N.sum(0) ** alpha
        for i in range(N.shape[0]):
            for j in range(N.shape[1]):
                if N[i, j] == 0:
                    assert P[i, j] == 0
                    continue
                pmi = math.log((N[i, j] / total) / ((N[i].sum() / total) * (ctx[j] / ctx.sum())))
                assert P[i, j] == pytest.approx(max(pmi - shift, 0.0), abs=1e-12)
    with pytest.raises(ValueError, match="non-negative"):
        w2v.ppmi(-N)


def test_skipgram_pairs_match_naive_enumeration():
    v = w2v.build_vocab(TINY)
    ids = w2v.encode_sentences(TINY, v)
    for window in (1, 2):
        got = Counter(map(tuple, w2v.skipgram_pairs(ids, window=window).tolist()))
        want = Counter()
        for s in ids:
            for i in range(len(s)):
                for j in range(max(0, i - window), min(len(s), i + window + 1)):
                    if i != j:
                        want[(int(s[i]), int(s[j]))] += 1
        assert got == want


def test_cbow_examples_match_naive_windows():
    v = w2v.build_vocab(TINY)
    ids = w2v.encode_sentences(TINY, v)
    pad = len(v)
    ctx, center = w2v.cbow_examples(ids, window=2, pad=pad)
    want = []
    for s in ids:
        if len(s) < 2:
            continue  # a one-word sentence has no context
        for i in range(len(s)):
            row = [int(s[i + o]) if 0 <= i + o < len(s) else pad for o in (-2, -1, 1, 2)]
            want.append((row, int(s[i])))
    assert [(list(r), int(c)) for r, c in zip(ctx.tolist(), center.tolist())] == want


def test_noise_distribution():
    p = w2v.noise_distribution(np.array([1, 8, 27]), power=1 / 3)
    np.testing.assert_allclose(p, np.array([1, 2, 3]) / 6)
    with pytest.raises(ValueError):
        w2v.noise_distribution(np.zeros(3))


def _sig(x):
    return 1 / (1 + np.exp(-x))


def test_sgns_loss_and_gradient_match_hand_derivation():
    torch.manual_seed(0)
    m = w2v.SkipGramNS(6, 4).double()
    with torch.no_grad():
        m.out.weight.normal_()
        m.inp.weight.normal_()
    center, context = torch.tensor([1, 2]), torch.tensor([3, 0])
    neg = torch.tensor([[4, 5, 0], [1, 1, 3]])
    loss = m(center, context, neg)
    loss.backward()
    V_in, U = m.inp.weight.detach().numpy(), m.out.weight.detach().numpy()
    want_loss, grad_in = 0.0, np.zeros_like(V_in)
    for b in range(2):
        v, u = V_in[center[b]], U[context[b]]
        want_loss += -np.log(_sig(u @ v)) - sum(np.log(_sig(-U[n] @ v)) for n in neg[b].tolist())
        # d/dv: -(1 - sigma(u.v)) u + sum_n sigma(u_n.v) u_n
        grad_in[center[b]] += (-(1 - _sig(u @ v)) * u + sum(_sig(U[n] @ v) * U[n] for n in neg[b].tolist())) / 2
    assert loss.item() == pytest.approx(want_loss / 2, rel=1e-12)
    np.testing.assert_allclose(m.inp.weight.grad.numpy(), grad_in, rtol=1e-10, atol=1e-12)


def test_cbow_averages_context_and_never_trains_the_padding_row():
    torch.manual_seed(0)
    m = w2v.CBOWNS(5, 3).double()
    with torch.no_grad():
        m.out.weight.normal_()
        m.inp.weight[:5].normal_()
    ctx = torch.tensor([[0, 1, 5, 5], [2, 3, 4, 0]])
    center, neg = torch.tensor([2, 1]), torch.tensor([[3], [0]])
    loss = m(ctx, center, neg)
    loss.backward()
    V_in, U = m.inp.weight.detach().numpy(), m.out.weight.detach().numpy()
    h = [V_in[[0, 1]].mean(0), V_in[[2, 3, 4, 0]].mean(0)]
    want = np.mean([-np.log(_sig(U[c] @ hb)) - np.log(_sig(-U[n[0]] @ hb)) for hb, c, n in zip(h, center.tolist(), neg.tolist())])
    assert loss.item() == pytest.approx(want, rel=1e-12)
    assert torch.all(m.inp.weight.grad[5] == 0) and torch.all(m.inp.weight[5] == 0)
    assert m.word_vectors().shape == (5, 3)


@pytest.mark.parametrize("kind", ["sgns", "cbow"])
def test_training_starts_at_log2_decreases_and_is_deterministic(kind):
    sents = corpus.grammar_corpus(1500, seed=0)
    kw = dict(kind=kind, dim=16, window=2, negatives=4, epochs=2, batch_size=256, lr=0.03, seed=5)
    r = w2v.train_word2vec(sents, **kw)
    # output vectors start at zero, so every logit is 0 and the first loss is (1 + K) log 2
    assert r.losses[0] == pytest.approx(5 * math.log(2), rel=1e-6)
    assert r.losses[-5:].mean() < 0.7 * r.losses[0]
    assert r.epoch_losses[-1] < r.epoch_losses[0]
    assert r.vectors.matrix.shape == (len(w2v.build_vocab(sents)), 16)
    r2 = w2v.train_word2vec(sents, **kw)
    np.testing.assert_array_equal(r.vectors.matrix, r2.vectors.matrix)


def test_train_word2vec_rejects_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        w2v.train_word2vec(TINY, kind="glove")
    with pytest.raises(ValueError, match="dim"):
        w2v.train_word2vec(TINY, dim=0)
    with pytest.raises(ValueError, match="window"):
        w2v.train_word2vec(TINY, window=0)


def test_torch_threads_restores_setting():
    before = torch.get_num_threads()
    with w2v.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        with w2v.torch_threads(0):
            pass


# -- WordVectors -----------------------------------------------------------


@pytest.fixture
def random_vectors():
    rng = np.random.default_rng(0)
    words = tuple(f"w{i}" for i in range(40))
    return w2v.WordVectors(words, rng.normal(size=(40, 8)))


def test_nearest_matches_brute_force(random_vectors):
    wv = random_vectors
    X = wv.matrix.astype(np.float64)
    q = 7
    cos = [(X[q] @ X[j]) / (np.linalg.norm(X[q]) * np.linalg.norm(X[j])) for j in range(len(wv))]
    order = [j for j in np.argsort(cos)[::-1] if j != q][:5]
    got = wv.nearest("w7", 5)
    assert [w for w, _ in got] == [wv.words[j] for j in order]
    np.testing.assert_allclose([s for _, s in got], [cos[j] for j in order], rtol=1e-5)
    assert wv.nearest("w7", 1, exclude_self=False)[0][0] == "w7"


def test_analogy_matches_brute_force_3cosadd(random_vectors):
    wv = random_vectors
    X = wv.matrix.astype(np.float64)
    cos = (X / np.linalg.norm(X, axis=1, keepdims=True)) @ (X / np.linalg.norm(X, axis=1, keepdims=True)).T
    for a, b, c in [(0, 1, 2), (5, 9, 30), (11, 3, 17)]:
        # Levy & Goldberg's form: cos(d, b) - cos(d, a) + cos(d, c), query words excluded
        score = {d: cos[d, b] - cos[d, a] + cos[d, c] for d in range(len(wv)) if d not in (a, b, c)}
        want = sorted(score, key=lambda d: -score[d])[:4]
        got = wv.analogy(wv.words[a], wv.words[b], wv.words[c], k=4)
        assert [w for w, _ in got] == [wv.words[d] for d in want]


def test_analogy_excludes_query_words():
    # b - a + c is closest to b itself here: only the exclusion prevents "king" from answering
    words = ("man", "king", "woman", "queen", "other")
    M = np.array([[1, 0, 0], [0, 1, 0], [0.9, 0.1, 0.2], [0.2, 0.9, 0.4], [-1, 0, 0]], dtype=float)
    wv = w2v.WordVectors(words, M)
    assert wv.analogy("man", "king", "woman", exclude_query=False)[0][0] in {"king", "woman"}
    top = wv.analogy("man", "king", "woman", k=len(words))
    assert [w for w, _ in top][0] == "queen"
    assert not {"man", "king", "woman"} & {w for w, _ in top}


def test_evaluate_and_subset(random_vectors):
    q = [corpus.Analogy("w0", "w1", "w2", "w3", "x"), corpus.Analogy("w0", "w1", "w2", "nope", "x")]
    df = random_vectors.evaluate(q)
    assert len(df) == 1 and df.loc[0, "predicted"] == random_vectors.analogy("w0", "w1", "w2")[0][0]
    sub = random_vectors.subset(["w3", "w1"])
    np.testing.assert_array_equal(sub.matrix, random_vectors.matrix[[3, 1]])
    with pytest.raises(ValueError, match="unique"):
        w2v.WordVectors(("a", "a"), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="matrix must be"):
        w2v.WordVectors(("a",), np.zeros((2, 2)))


def test_sgns_on_the_grammar_corpus_recovers_the_analogies():
    sents = corpus.grammar_corpus(5000, seed=0)
    r = w2v.train_word2vec(sents, kind="sgns", dim=30, window=3, epochs=3, batch_size=1024, lr=0.01, seed=0)
    acc = r.vectors.evaluate(corpus.analogy_questions()).groupby("relation")["correct"].mean()
    # chance is about 1 / 160; the grammar makes every relation a parallel offset
    assert acc["gender"] > 0.8 and acc["past"] > 0.8 and acc["capital"] > 0.3, acc.to_dict()


def test_sgns_on_the_japanese_family_recovers_the_analogies():
    sents = corpus.grammar_corpus(3000, seed=0, families=("japanese",))
    # particles are words of their own, so related words lie further apart than in English: window 5
    r = w2v.train_word2vec(sents, kind="sgns", dim=30, window=5, epochs=3, batch_size=1024, lr=0.01, seed=0)
    ev = r.vectors.evaluate(corpus.analogy_questions(lang="ja"))
    assert len(ev) == 202
    acc = ev.groupby("relation")["correct"].mean()
    base = r.vectors.evaluate(corpus.analogy_questions(lang="ja"), method="nearest_c").groupby("relation")["correct"].mean()
    # chance is about 1 / 80; the offset must add to what the neighbourhood of c gives
    assert acc["gender"] > base["gender"] + 0.4 and acc["capital"] > base["capital"] + 0.15, (acc.to_dict(), base.to_dict())
    assert (acc >= base).all(), (acc.to_dict(), base.to_dict())


def test_evaluate_matches_question_by_question_analogy_and_brute_force_rank(random_vectors):
    wv = random_vectors
    rng = np.random.default_rng(1)
    qs = [corpus.Analogy(*(wv.words[i] for i in rng.choice(len(wv), 4, replace=False)), "r") for _ in range(60)]
    X = wv.matrix.astype(np.float64)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    for excl in (True, False):
        ev = wv.evaluate(qs, exclude_query=excl, block=7)  # several blocks
        assert list(ev["predicted"]) == [wv.analogy(q.a, q.b, q.c, exclude_query=excl)[0][0] for q in qs]
        for q, rank in zip(qs, ev["rank"]):
            ia, ib, ic, id_ = (wv.index(w) for w in (q.a, q.b, q.c, q.d))
            score = Xn @ (Xn[ib] - Xn[ia] + Xn[ic])
            cand = [j for j in range(len(wv)) if not (excl and j in (ia, ib, ic))]
            assert rank == 1 + sum(score[j] > score[id_] + 1e-9 for j in cand)
        assert (ev["correct"] == (ev["rank"] == 1)).all()
    base = wv.evaluate(qs, method="nearest_c")
    want = [wv._rank(wv.vector(q.c), 1, (q.a, q.b, q.c))[0][0] for q in qs]
    assert list(base["predicted"]) == want
    with pytest.raises(ValueError, match="method"):
        wv.evaluate(qs, method="3cosmul")
    assert wv.evaluate([corpus.Analogy("w0", "w1", "w2", "nope", "x")]).empty


def test_load_analogy_set_reads_pairs_and_rejects_bad_files(tmp_path):
    good = tmp_path / "pairs.tsv"
    good.write_text("relation\ta\tb\nx\tp\tq\nx\tr\ts\nx\tt\tu\ny\tm\tn\ny\to\tv\n", encoding="utf-8")
    qs = w2v.load_analogy_set(str(good))
    assert Counter(q.relation for q in qs) == {"x": 6, "y": 2}
    assert corpus.Analogy("p", "q", "t", "u", "x") in qs
    assert len(w2v.load_analogy_set(str(good), relations=["y"])) == 2
    with pytest.raises(ValueError, match="no relation"):
        w2v.load_analogy_set(str(good), relations=["z"])
    for body, match in [
        ("rel\ta\tb\nx\tp\tq\n", "header"),
        ("relation\ta\tb\nx\tp\n", "three non-empty"),
        ("relation\ta\tb\nx\tp\tp\n", "must differ"),
        ("relation\ta\tb\nx\tp\tq\nx\tp\tq\n", "listed twice"),
    ]:
        bad = tmp_path / "bad.tsv"
        bad.write_text(body, encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            w2v.load_analogy_set(str(bad))
    with pytest.raises(FileNotFoundError):
        w2v.load_analogy_set("no_such_file.tsv")


def test_accuracy_by_relation_resamples_pairs_as_a_naive_loop_does():
    pairs = [(f"a{i}", f"b{i}") for i in range(6)]
    qs = corpus.questions_from_pairs(pairs, "r")
    rng = np.random.default_rng(3)
    correct = rng.random(len(qs)) < 0.5
    ev = pd.DataFrame({"a": [q.a for q in qs], "b": [q.b for q in qs], "c": [q.c for q in qs], "d": [q.d for q in qs],
                       "predicted": "", "correct": correct, "relation": "r", "rank": 1})
    got = w2v.accuracy_by_relation(ev, n_boot=300, seed=9).iloc[0]
    assert got["accuracy"] == pytest.approx(correct.mean())
    assert (got["questions"], got["pairs"]) == (30, 6)
    # naive: draw the same pair counts, then weigh every question by count(i) * count(j)
    draw = np.random.default_rng(9).multinomial(6, np.full(6, 1 / 6), size=300)
    boot = []
    for counts in draw:
        num = den = 0.0
        for q, ok in zip(qs, correct):
            w = counts[int(q.a[1:])] * counts[int(q.c[1:])]
            num, den = num + w * ok, den + w
        if den > 0:
            boot.append(num / den)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    assert (got["low"], got["high"]) == pytest.approx((lo, hi))
    assert got["low"] <= got["accuracy"] <= got["high"]
    allright = ev.assign(correct=True)
    assert tuple(w2v.accuracy_by_relation(allright, n_boot=50).iloc[0][["accuracy", "low", "high"]]) == (1.0, 1.0, 1.0)


def test_offset_vs_baseline_pairs_the_two_methods_and_resamples_pairs(monkeypatch):
    pairs = [(f"a{i}", f"b{i}") for i in range(5)]
    qs = corpus.questions_from_pairs(pairs, "r")
    rng = np.random.default_rng(4)
    ok_add, ok_base = rng.random(len(qs)) < 0.7, rng.random(len(qs)) < 0.3
    frame = pd.DataFrame({"a": [q.a for q in qs], "b": [q.b for q in qs], "c": [q.c for q in qs], "d": [q.d for q in qs],
                          "predicted": "", "relation": "r", "rank": 1})

    class Fake:  # a space whose two methods give the answers drawn above
        def evaluate(self, questions, method="3cosadd"):
            return frame.assign(correct=ok_add if method == "3cosadd" else ok_base)

    got = w2v.offset_vs_baseline(Fake(), qs, n_boot=300, seed=9).iloc[0]
    assert (got["accuracy"], got["baseline"]) == pytest.approx((ok_add.mean(), ok_base.mean()))
    assert got["difference"] == pytest.approx(ok_add.mean() - ok_base.mean())
    # naive: the same pair counts, each question weighted by count(i) * count(j), of the paired difference
    draw = np.random.default_rng(9).multinomial(5, np.full(5, 1 / 5), size=300)
    boot = []
    for counts in draw:
        w = np.array([counts[int(q.a[1:])] * counts[int(q.c[1:])] for q in qs], dtype=float)
        if w.sum() > 0:
            boot.append((w * (ok_add.astype(float) - ok_base)).sum() / w.sum())
    assert (got["low"], got["high"]) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])))
    ok_base[:] = ok_add  # the baseline answers exactly as 3CosAdd: no difference, no width
    same = w2v.offset_vs_baseline(Fake(), qs, n_boot=50).iloc[0]
    assert (same["difference"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="n_boot"):
        w2v.offset_vs_baseline(Fake(), qs, n_boot=0)


def test_from_encoder_keeps_whole_words_with_their_rows(packaged_enc):
    wv = w2v.WordVectors.from_encoder(packaged_enc)
    E = packaged_enc.word_embeddings().numpy()
    toks = packaged_enc.tokenizer.convert_ids_to_tokens(wv.rows.tolist())
    assert list(toks) == list(wv.words)
    assert all(w.isalpha() and w.islower() and w.isascii() for w in wv.words)
    assert "##s" not in wv and "[CLS]" not in wv and "king" in wv
    np.testing.assert_array_equal(wv.matrix, E[wv.rows])


def test_packaged_model_offset_beats_the_nearest_c_baseline_on_the_book_set(packaged_enc):
    wv = w2v.WordVectors.from_encoder(packaged_enc)
    qs = w2v.load_analogy_set()
    acc = wv.evaluate(qs).groupby("relation")["correct"].mean()
    base = wv.evaluate(qs, method="nearest_c").groupby("relation")["correct"].mean()
    assert set(acc.index) == {"capital", "gender", "past"}
    assert (acc > base).all(), (acc.to_dict(), base.to_dict())


def test_accuracy_cells_puts_each_accuracy_and_its_interval_under_its_relation():
    acc = pd.DataFrame({"relation": ["b", "a", "b", "a"], "questions": [56, 90, 56, 90], "pairs": [8, 10, 8, 10],
                        "accuracy": [0.95, 1.0, 0.5, 0.02], "low": [0.8312, 1.0, 0.27, 0.0], "high": [1.0, 1.0, 0.8012, 0.0901],
                        "方法": ["x", "x", "y", "y"]})
    got = w2v.accuracy_cells(acc, ["方法"], {"a": "過去形", "b": "性別", "c": "無い関係"})
    assert list(got.columns) == ["過去形（90 問・10 組）", "性別（56 問・8 組）"]  # the relations' order, absent ones left out
    assert got.loc["x", "性別（56 問・8 組）"] == "0.95（0.83〜1.00）"
    assert got.loc["y", "性別（56 問・8 組）"] == "0.50（0.27〜0.81）"  # rounded outward
    assert got.loc["y", "過去形（90 問・10 組）"] == "0.02（0.00〜0.10）"
    with pytest.raises(ValueError, match="different numbers of questions"):
        w2v.accuracy_cells(acc.assign(questions=[56, 90, 55, 90]), ["方法"], {"a": "過去形", "b": "性別"})
