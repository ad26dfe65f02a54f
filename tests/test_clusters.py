"""Vocabulary clusters (mixlib.clusters): types, determinism, cache, per-cluster psi."""

from __future__ import annotations

import collections
import time

import numpy as np
import pandas as pd
import pytest

import mixlib
from mixlib import cache
from mixlib.cache import CacheWarning
from mixlib.clusters import TYPES, find_cluster, token_type

K = 12
FAST = dict(max_iter=15)  # a few Lloyd iterations are enough for what is tested here


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXLIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tiny_clusters(tiny_enc):
    return mixlib.cluster_vocab(tiny_enc, k=K, seed=0, cache=False, **FAST)


@pytest.fixture(scope="module")
def tiny_stretch(tiny_enc):
    return mixlib.norm_stretch(tiny_enc)


# -- token types ----------------------------------------------------------------

CASES = {
    "the": "Words", "january": "Words", "1st": "Words", "1990s": "Words", "三": "Words", "é": "Words",
    "##ing": "Subwords", "##9": "Subwords", "##°": "Subwords", "##s": "Subwords",
    "1990": "Numbers", "7": "Numbers", "²": "Numbers", "½": "Numbers",
    "!": "Symbols", ".": "Symbols", "$": "Symbols", "©": "Symbols", "°": "Symbols", "##": "Symbols", "#": "Symbols",
    "[PAD]": "Special", "[unused0]": "Special", "[unused993]": "Special",
    "[CLS]": "Tags", "[SEP]": "Tags", "[MASK]": "Tags", "[UNK]": "Tags",
}


@pytest.mark.parametrize("token,expected", sorted(CASES.items()))
def test_type_rules(token, expected, tiny_enc):
    assert token_type(token) == expected
    assert token_type(token, tiny_enc.tokenizer) == expected


def test_types_of_whole_vocabulary(tiny_clusters, tiny_enc):
    toks = tiny_enc.tokenizer.convert_ids_to_tokens(list(range(tiny_enc.vocab_size)))
    types = tiny_clusters.token_types
    n_sub = sum(t.startswith("##") and len(t) > 2 for t in toks)
    assert (types == "Subwords").sum() == n_sub
    n_unused = sum(t.startswith("[unused") for t in toks)
    assert (types == "Special").sum() == n_unused + 1  # + [PAD]
    assert sorted(np.array(toks)[types == "Tags"]) == ["[CLS]", "[MASK]", "[SEP]", "[UNK]"]
    assert all(t.isdigit() for t in np.array(toks)[types == "Numbers"] if t.isascii())
    assert set(types) <= set(TYPES)


# -- k-means ----------------------------------------------------------------------


def test_clusters_are_consistent(tiny_clusters, tiny_enc):
    c = tiny_clusters
    V, D = tiny_enc.vocab_size, tiny_enc.d_model
    assert c.labels.shape == (V,) and c.centroids.shape == (K, D) and c.sizes.sum() == V
    E = tiny_enc.word_embeddings().numpy().astype(np.float64)
    # every token sits in the cluster of its nearest centroid (independent E-step)
    d2 = (E**2).sum(1)[:, None] - 2 * E @ c.centroids.T.astype(np.float64) + (c.centroids.astype(np.float64) ** 2).sum(1)
    nearest = d2.argmin(1)
    ok = (nearest == c.labels) | np.isclose(d2[np.arange(V), c.labels], d2.min(1), rtol=1e-5)
    assert ok.all()
    np.testing.assert_allclose(c.distances, np.linalg.norm(E - c.centroids[c.labels], axis=1), rtol=1e-5)
    np.testing.assert_allclose(c.norms, np.linalg.norm(E, axis=1), rtol=1e-5)
    # majority type per cluster, counted naively
    for k in range(K):
        counts = collections.Counter(c.token_types[c.labels == k])
        best = max(counts.values())
        assert c.cluster_types[k] == next(t for t in TYPES if counts.get(t, 0) == best)
    # members are nearest-first
    m = c.members(3)
    assert set(m) == set(np.flatnonzero(c.labels == 3)) and np.all(np.diff(c.distances[m]) >= 0)


def test_deterministic(tiny_enc, tiny_clusters):
    again = mixlib.cluster_vocab(tiny_enc, k=K, seed=0, cache=False, **FAST)
    np.testing.assert_array_equal(again.labels, tiny_clusters.labels)
    np.testing.assert_array_equal(again.centroids, tiny_clusters.centroids)


def test_bad_k(tiny_enc):
    V = tiny_enc.vocab_size
    with pytest.raises(ValueError, match=f"1..{V}"):
        mixlib.cluster_vocab(tiny_enc, k=V + 1, cache=False)
    with pytest.raises(ValueError, match="out of range"):
        mixlib.cluster_vocab(tiny_enc, k=0, cache=False)
    with pytest.raises(ValueError, match="integer"):
        mixlib.cluster_vocab(tiny_enc, k=2.5, cache=False)
    with pytest.raises(ValueError, match="seed"):
        mixlib.cluster_vocab(tiny_enc, k=3, seed="0", cache=False)
    with pytest.raises(ValueError, match="max_iter"):
        mixlib.cluster_vocab(tiny_enc, k=3, max_iter=0, cache=False)
    with pytest.raises(ValueError, match="threads"):
        mixlib.cluster_vocab(tiny_enc, k=3, threads=0, cache=False)


def test_find_cluster(tiny_clusters):
    c = tiny_clusters
    for tok_id in (0, 1996, 2254, 29000):
        assert find_cluster(c, c.tokens[tok_id]) == c.labels[tok_id]
    assert c.find("january") == c.labels[c.tokens.index("january")]
    with pytest.raises(KeyError, match="not in the vocabulary"):
        find_cluster(c, "notaword_xyz")
    t = c.table([find_cluster(c, "january")], n=4)
    assert list(t.columns) == ["cluster", "type", "size", "tokens"] and "," in t["tokens"][0]
    with pytest.raises(ValueError, match="out of range"):
        c.samples(K)


# -- cache ----------------------------------------------------------------------------


def test_cache_round_trip(tiny_enc, isolated_cache):
    first = mixlib.cluster_vocab(tiny_enc, k=5, seed=1, **FAST)
    assert not first.from_cache
    files = list(isolated_cache.glob("clusters-*.npz"))
    assert len(files) == 1
    t0 = time.perf_counter()
    second = mixlib.cluster_vocab(tiny_enc, k=5, seed=1, **FAST)
    elapsed = time.perf_counter() - t0
    assert second.from_cache
    np.testing.assert_array_equal(second.labels, first.labels)
    np.testing.assert_array_equal(second.centroids, first.centroids)
    assert second.inertia == first.inertia and second.n_iter == first.n_iter
    np.testing.assert_array_equal(second.cluster_types, first.cluster_types)
    print(f"cached reload: {elapsed:.3f} s")  # the < 1 s target is measured in benchmarks/bench_clusters.py
    # another seed or k is another file, not a stale hit
    other = mixlib.cluster_vocab(tiny_enc, k=5, seed=2, **FAST)
    assert not other.from_cache and len(list(isolated_cache.glob("clusters-*.npz"))) == 2


def _only_file(d):
    files = list(d.glob("clusters-*.npz"))
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize("damage", ["truncate", "garble", "foreign", "wrong_shape"])
def test_corrupted_cache_is_recomputed(damage, tiny_enc, isolated_cache):
    first = mixlib.cluster_vocab(tiny_enc, k=4, seed=0, **FAST)
    path = _only_file(isolated_cache)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 3])
    elif damage == "garble":
        path.write_bytes(data[:100] + bytes(b ^ 0x5A for b in data[100:400]) + data[400:])
    elif damage == "foreign":
        with open(path, "wb") as f:
            np.savez(f, labels=np.zeros(10, dtype=np.int64), centroids=np.zeros((4, 3), np.float32))
    else:  # a well-formed mixlib file with the right key but arrays of the wrong shape
        key = None
        with np.load(path, allow_pickle=False) as npz:
            key = __import__("json").loads(str(npz["__key__"]))
        cache.write_arrays("clusters", key, {"labels": np.zeros(7, np.int64), "centroids": np.zeros((4, 2), np.float32),
                                             "inertia": np.float64(0), "n_iter": np.int64(1), "seconds": np.float64(0)})
    with pytest.warns(CacheWarning, match="unusable"):
        again = mixlib.cluster_vocab(tiny_enc, k=4, seed=0, **FAST)
    assert not again.from_cache
    np.testing.assert_array_equal(again.labels, first.labels)
    # and the file was repaired: the next call loads it
    assert mixlib.cluster_vocab(tiny_enc, k=4, seed=0, **FAST).from_cache


def test_changed_weights_do_not_hit_cache(isolated_cache):
    from conftest import make_random_encoder

    a = make_random_encoder(layers=1, heads=2, d=16, seed=5)
    b = make_random_encoder(layers=1, heads=2, d=16, seed=6)
    assert a.name == b.name  # same name, other weights: only the embedding hash tells them apart
    mixlib.cluster_vocab(a, k=3, **FAST)
    assert not mixlib.cluster_vocab(b, k=3, **FAST).from_cache
    assert mixlib.cluster_vocab(a, k=3, **FAST).from_cache


# -- tables ----------------------------------------------------------------------------


def test_cluster_summary(tiny_clusters):
    c = tiny_clusters
    df = mixlib.cluster_summary(c)
    assert list(df["type"]) == [*TYPES, "Total"]
    body = df[df["type"] != "Total"]
    assert body["n_clusters"].sum() == c.k and body["n_tokens"].sum() == len(c.labels)
    tok_type = c.cluster_types[c.labels]
    ref = pd.DataFrame({"t": tok_type, "norm": c.norms, "dist": c.distances}).groupby("t").mean()
    for t, row in ref.iterrows():
        got = df.set_index("type").loc[t]
        assert got["mean_norm"] == pytest.approx(row["norm"], rel=1e-5)
        assert got["mean_dist"] == pytest.approx(row["dist"], rel=1e-5)
    total = df.set_index("type").loc["Total"]
    assert total["tokens_per_cluster"] == pytest.approx(len(c.labels) / c.k)
    assert total["mean_norm"] == pytest.approx(float(c.norms.mean()), rel=1e-5)


def test_recluster(tiny_clusters):
    up = mixlib.recluster_centroids(tiny_clusters, k=3, seed=0)
    assert up.labels.shape == (K,) and set(up.labels) <= {0, 1, 2}
    assert up.table["n_clusters"].sum() == K and up.table["n_tokens"].sum() == len(tiny_clusters.labels)
    assert (up.table[list(TYPES)].sum(axis=1) == up.table["n_clusters"]).all()
    for u in range(3):
        assert up.table.loc[u, "n_clusters"] == (up.labels == u).sum()
    with pytest.raises(ValueError, match="1..12"):
        mixlib.recluster_centroids(tiny_clusters, k=K + 1)


# -- per-cluster psi ---------------------------------------------------------------------------


def test_cluster_stretch_vs_loop(tiny_stretch, tiny_clusters):
    cs = mixlib.cluster_stretch(tiny_stretch, tiny_clusters)
    L, H, V = tiny_stretch.shape
    assert cs.shape == (L, H, K) and cs.dtype == np.float32
    for l in range(L):
        for h in range(H):
            for k in range(K):
                vals = tiny_stretch.psi_qkv[l, h, tiny_clusters.labels == k].astype(np.float64)
                assert cs[l, h, k] == pytest.approx(np.nanmean(vals), rel=1e-5)
    cq = mixlib.cluster_stretch(tiny_stretch, tiny_clusters, which="q")
    assert cq[1, 2, 3] == pytest.approx(np.nanmean(tiny_stretch.psi_q[1, 2, tiny_clusters.labels == 3]), rel=1e-5)


def test_cluster_stretch_bad_input(tiny_enc, tiny_clusters):
    part = mixlib.norm_stretch(tiny_enc, tiny_enc.word_embeddings()[:100])
    with pytest.raises(ValueError, match="same model"):
        mixlib.cluster_stretch(part, tiny_clusters)


def test_top_clusters_and_type_map(tiny_stretch, tiny_clusters):
    cs = mixlib.cluster_stretch(tiny_stretch, tiny_clusters)
    L, H, _ = cs.shape
    df = mixlib.top_clusters(cs, tiny_clusters, layer=1, head=3, n=4)
    assert list(df.columns) == ["cluster", "type", "size", "tokens", "psi"]
    ref = np.argsort(-cs[1, 3], kind="stable")[:4]
    np.testing.assert_array_equal(df["cluster"].to_numpy(), ref)
    np.testing.assert_allclose(df["psi"].to_numpy(), cs[1, 3, ref])
    assert list(df["type"]) == [tiny_clusters.cluster_types[c] for c in ref]
    assert df["tokens"][0].split(", ")[0] == tiny_clusters.samples(ref[0], 1)[0]
    tm = mixlib.type_map(cs, tiny_clusters, top=3)
    assert tm.shape == (L, H)
    for l in range(L):
        for h in range(H):
            order = np.argsort(-cs[l, h], kind="stable")[:3]
            assert tm.loc[l, h] == tuple(tiny_clusters.cluster_types[order])
    for bad in (dict(layer=L, head=0), dict(layer=0, head=H), dict(layer=-1, head=0)):
        with pytest.raises(ValueError, match="out of range"):
            mixlib.top_clusters(cs, tiny_clusters, **bad)
    with pytest.raises(ValueError, match="shape"):
        mixlib.top_clusters(cs[:, :, :3], tiny_clusters, 0, 0)
    with pytest.raises(ValueError, match="top"):
        mixlib.type_map(cs, tiny_clusters, top=0)


def test_packaged_model_small_k(packaged_enc, isolated_cache):
    c = mixlib.cluster_vocab(packaged_enc, k=8, seed=0, max_iter=10)
    assert c.model == packaged_enc.name and c.labels.shape == (packaged_enc.vocab_size,)
    assert sorted(np.array(c.tokens)[c.token_types == "Tags"]) == ["[CLS]", "[MASK]", "[SEP]", "[UNK]"]
    assert (c.token_types == "Special").sum() == 995  # [PAD] + [unused0..993], as in the paper's Table 3
    s = mixlib.cluster_summary(c)
    assert s.set_index("type").loc["Total", "n_tokens"] == packaged_enc.vocab_size
    assert mixlib.cluster_vocab(packaged_enc, k=8, seed=0, max_iter=10).from_cache


# -- null baselines and stability -----------------------------------------------------------------


def test_cluster_permutation_null_vs_loop(tiny_stretch, tiny_clusters):
    psi = tiny_stretch.psi_qkv
    ok = np.isfinite(psi).all(axis=(0, 1))
    psi = np.where(ok, psi, 1.0).astype(np.float32)  # the tiny model has a zero [PAD] row
    nul = mixlib.cluster_permutation_null(psi, tiny_clusters, n_perm=20, seed=3)
    L, H, V = psi.shape
    # observed curve = cluster_stretch sorted
    cs = mixlib.cluster_stretch(psi, tiny_clusters)
    np.testing.assert_allclose(nul.curve, -np.sort(-cs, axis=2), rtol=1e-5)
    # replay the documented permutation scheme with plain loops
    rng = np.random.default_rng(3)
    sizes = tiny_clusters.sizes
    peaks = []
    for _ in range(20):
        perm = rng.permutation(V)
        start, means = 0, []
        for c in range(tiny_clusters.k):
            means.append(psi[:, :, perm[start : start + sizes[c]]].astype(np.float64).mean(axis=2))
            start += sizes[c]
        curve = -np.sort(-np.stack(means, axis=2), axis=2)
        peaks.append(curve[..., 0] / np.median(curve, axis=2))
    np.testing.assert_allclose(nul.null["peak_ratio"], np.stack(peaks), rtol=1e-6)
    obs = cs.max(axis=2) / np.median(cs, axis=2)
    np.testing.assert_allclose(nul.observed["peak_ratio"], obs, rtol=1e-5)
    np.testing.assert_allclose(nul.percentile["peak_ratio"], 100 * (np.stack(peaks) < obs).mean(axis=0), atol=1e-9)
    assert nul.null_low.shape == (L, H, tiny_clusters.k) and (nul.null_low <= nul.null_high + 1e-12).all()
    s = nul.summary()
    assert list(s.index) == list(range(L)) and ("tail_cv", "percentile") in s.columns
    with pytest.raises(ValueError, match="NaN"):
        mixlib.cluster_permutation_null(tiny_stretch, tiny_clusters)
    with pytest.raises(ValueError, match="n_perm"):
        mixlib.cluster_permutation_null(psi, tiny_clusters, n_perm=0)


def test_permutation_null_sees_planted_clusters(tiny_clusters):
    """psi that is high exactly in one cluster stands out; psi unrelated to the clusters does not."""
    rng = np.random.default_rng(0)
    V = len(tiny_clusters.labels)
    noise = rng.normal(1.0, 0.1, size=(1, 2, V))
    planted = noise.copy()
    planted[0, 0, tiny_clusters.labels == int(np.argmax(tiny_clusters.sizes))] += 1.0
    nul = mixlib.cluster_permutation_null(planted, tiny_clusters, n_perm=50, seed=0)
    assert nul.percentile["peak_ratio"][0, 0] == 100.0  # the planted head
    assert nul.percentile["peak_ratio"][0, 1] < 100.0 or nul.observed["peak_ratio"][0, 1] < 1.05


def test_feature_null_vs_loop_and_planted():
    rng = np.random.default_rng(0)
    L, H, V = 2, 3, 500
    psi = rng.normal(1.0, 0.2, size=(L, H, V))
    ids = list(range(20))
    psi[1, 2, ids] += 0.5  # head (1, 2) selects the set
    fn = mixlib.feature_null(psi, ids, n_draws=60, seed=5)
    np.testing.assert_allclose(mixlib.feature_scores(psi, ids), psi[:, :, ids].mean(axis=2))
    assert fn.best_head == (1, 2) and fn.best == pytest.approx(psi[1, 2, ids].mean())
    r = np.random.default_rng(5)
    ref = [psi[:, :, r.choice(np.arange(V), size=20, replace=False)].mean(axis=2).max() for _ in range(60)]
    np.testing.assert_allclose(fn.null_best, ref)
    assert fn.percentile == 100.0 and fn.passes() and fn.p_value == pytest.approx(1 / 61)
    # a set nobody selects does not pass
    fn0 = mixlib.feature_null(psi, list(range(100, 120)), n_draws=60, seed=5)
    assert not fn0.passes() and fn0.p_value > 0.05
    # lift: best minus the null's median; for the same per-token lift it does not grow with the set's size, while
    # the distance in units of the null's spread does
    assert fn.lift() == pytest.approx(fn.best - np.median(fn.null_best)) and fn.lift() > 0.3
    psi2 = rng.normal(1.0, 0.2, size=(2, 3, 9000))
    lifts, zs = [], []
    for size in (20, 2000):
        planted = psi2.copy()
        planted[0, 1, :size] += 0.3  # the same lift per token, for a small and a large set
        f = mixlib.feature_null(planted, list(range(size)), n_draws=60, seed=1)
        lifts.append(f.lift())
        zs.append(f.lift() / (np.percentile(f.null_best, 95) - np.median(f.null_best)))
    assert abs(lifts[0] - lifts[1]) < 0.05 and all(0.2 < x < 0.31 for x in lifts), lifts  # random sets hold planted tokens too
    assert zs[1] > 5 * zs[0], zs
    # relative scores: mean over the set / the head's median, unchanged by a per-head scale
    scale = rng.uniform(0.5, 3.0, size=(L, H, 1))
    rel = mixlib.feature_scores(psi, ids, relative=True)
    np.testing.assert_allclose(rel, psi[:, :, ids].mean(axis=2) / np.median(psi, axis=2))
    np.testing.assert_allclose(mixlib.feature_scores(psi * scale, ids, relative=True), rel)
    fr, fr_scaled = (mixlib.feature_null(p, ids, n_draws=30, seed=2, relative=True) for p in (psi, psi * scale))
    np.testing.assert_allclose(fr.null_best, fr_scaled.null_best) and fr.best == pytest.approx(fr_scaled.best)
    r2 = np.random.default_rng(2)
    med = np.median(psi, axis=2)
    ref2 = [(psi[:, :, r2.choice(np.arange(V), size=20, replace=False)].mean(axis=2) / med).max() for _ in range(30)]
    np.testing.assert_allclose(fr.null_best, ref2)
    # a pool restricts the draws
    fnp = mixlib.feature_null(psi, ids, n_draws=10, seed=1, pool=range(300, 500))
    assert fnp.null_best.shape == (10,)
    with pytest.raises(ValueError, match="fewer"):
        mixlib.feature_null(psi, ids, pool=range(10))
    with pytest.raises(ValueError, match="0..499"):
        mixlib.feature_scores(psi, [V])
    with pytest.raises(ValueError, match="non-empty"):
        mixlib.feature_scores(psi, [])


def test_cluster_stability(tiny_enc, tiny_clusters):
    from sklearn.metrics import adjusted_rand_score

    other = mixlib.cluster_vocab(tiny_enc, k=K, seed=1, cache=False, **FAST)
    rnd = mixlib.cluster_vocab(tiny_enc, k=K, seed=2, cache=False, init="random", max_iter=5)
    st = mixlib.cluster_stability([tiny_clusters, other, rnd], anchors=["the", "[CLS]"])
    assert list(st.ari.index) == ["seed 0", "seed 1", "seed 2"]
    assert st.ari.loc["seed 0", "seed 1"] == pytest.approx(adjusted_rand_score(tiny_clusters.labels, other.labels))
    np.testing.assert_allclose(np.diag(st.ari), 1.0)
    np.testing.assert_allclose(st.ari.to_numpy(), st.ari.to_numpy().T)
    assert (st.type_counts.sum(axis=1) == K).all() and (st.token_counts.sum(axis=1) == tiny_enc.vocab_size).all()
    assert st.type_counts.loc["seed 1", "Words"] == int((other.cluster_types == "Words").sum())
    a = set(tiny_clusters.members(tiny_clusters.find("the")).tolist())
    b = set(other.members(other.find("the")).tolist())
    assert st.anchors.loc["the", "seed 1"] == pytest.approx(len(a & b) / len(a | b))
    same = mixlib.cluster_stability([tiny_clusters, tiny_clusters], names=["a", "b"], anchors=["the"])
    assert same.ari.loc["a", "b"] == 1.0 and same.anchors.loc["the", "b"] == 1.0
    with pytest.raises(ValueError, match="at least two"):
        mixlib.cluster_stability([tiny_clusters])
    with pytest.raises(ValueError, match="distinct"):
        mixlib.cluster_stability([tiny_clusters, other], names=["x", "x"])
    with pytest.raises(ValueError, match="init"):
        mixlib.cluster_vocab(tiny_enc, k=K, init="kmeans")


def test_random_init_has_its_own_cache_key(tiny_enc, isolated_cache):
    a = mixlib.cluster_vocab(tiny_enc, k=K, seed=0, max_iter=3)
    b = mixlib.cluster_vocab(tiny_enc, k=K, seed=0, max_iter=3, init="random")
    assert not a.from_cache and not b.from_cache  # a different key, not the k-means++ result
    assert mixlib.cluster_vocab(tiny_enc, k=K, seed=0, max_iter=3, init="random").from_cache
    assert len(list(isolated_cache.glob("clusters-*.npz"))) == 2


def test_best_head_support_vs_loop_and_ties():
    """Shares of bootstrap wins equal a loop over the same resamples through feature_scores; near ties split the wins."""
    rng = np.random.default_rng(3)
    psi = rng.gamma(2.0, 1.0, size=(2, 3, 200))
    ids = list(range(40))
    psi[1, 2, ids] += 3.0  # a clear winner
    share = mixlib.best_head_support(psi, ids, n_boot=200, seed=5, relative=True)
    counts = np.random.default_rng(5).multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=200)
    loop = np.zeros((2, 3))
    for c in counts:
        s = mixlib.feature_scores(psi, np.repeat(ids, c), relative=True)
        loop[np.unravel_index(np.argmax(s), s.shape)] += 1 / 200
    np.testing.assert_allclose(share, loop)
    assert share.sum() == pytest.approx(1.0) and share[1, 2] > 0.95

    tie = psi.copy()
    tie[0, 0, ids] = tie[1, 2, ids] + rng.normal(0, 0.3, len(ids))  # as strong on average, different tokens
    tie[0, 0, 40:] = tie[1, 2, 40:]
    split = mixlib.best_head_support(tie, ids, n_boot=400, seed=0)
    assert 0.1 < split[0, 0] < 0.9 and split[0, 0] + split[1, 2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_boot"):
        mixlib.best_head_support(psi, ids, n_boot=0)
    with pytest.raises(ValueError, match="token ids"):
        mixlib.best_head_support(psi, [500])


def test_feature_sets_hold_what_their_names_say(packaged_enc):
    tok = packaged_enc.tokenizer
    sets = mixlib.feature_sets(tok)
    assert list(sets) == ["年・月", "年だけ", "月だけ", "機能語", "動詞の活用形"]
    words = {name: tok.convert_ids_to_tokens(ids) for name, ids in sets.items()}
    assert words["月だけ"] == list(mixlib.clusters.MONTHS)  # all twelve are whole words of the uncased vocabulary
    assert words["年だけ"] and all(w.isdigit() and 1000 <= int(w) <= 2099 for w in words["年だけ"])
    assert words["年だけ"] == sorted(words["年だけ"]) and "1999" in words["年だけ"] and "999" not in words["年だけ"]
    assert sets["年・月"] == sets["年だけ"] + sets["月だけ"]
    assert set(words["機能語"]) == set(mixlib.clusters.FUNCTION_WORDS)
    assert {"taught", "chosen", "winning"} <= set(words["動詞の活用形"])
    assert all(len(set(ids)) == len(ids) for ids in sets.values())


def test_feature_null_candidates_and_head_label():
    from mixlib.clusters import head_label

    rng = np.random.default_rng(0)
    L, H, V = 2, 3, 500
    psi = rng.normal(1.0, 0.2, size=(L, H, V))
    ids = list(range(20))
    psi[1, 2, ids] += 0.5
    fn = mixlib.feature_null(psi, ids, n_draws=60, seed=5)
    wins = np.array([[0.0, 0.02, 0.0], [0.1, 0.0, 0.88]])  # (1, 2) wins most, (1, 0) sometimes, (0, 1) rarely
    # the set passes: (1, 0) wins often enough but its own score stays below the null's 95% point
    assert fn.scores[1, 0] < np.percentile(fn.null_best, 95)
    assert fn.candidates(wins) == [(1, 2)]
    q95 = np.percentile(fn.null_best, 95)
    assert fn.candidates(wins, min_wins=0.01) == [c for c in [(1, 2), (1, 0), (0, 1)] if fn.scores[c] >= q95]
    # a set that does not pass keeps every head that wins often enough, most wins first
    fn0 = mixlib.feature_null(psi, list(range(100, 120)), n_draws=60, seed=5)
    assert not fn0.passes() and fn0.candidates(wins) == [(1, 2), (1, 0)]
    with pytest.raises(ValueError, match="wins has shape"):
        fn.candidates(wins[:1])
    assert head_label([(1, 2), (1, 0)], [3, 7]) == "L7-H2/H0"
    assert head_label([(1, 2), (0, 1)], [3, 7]) == "L7-H2 / L3-H1"
    assert head_label([], [3, 7]) == "-"


class _Vocab:
    """A tokenizer as trained_pool reads one: its tokens by id, its vocabulary size and its special tokens."""

    cls_token, sep_token, mask_token, unk_token, pad_token = "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]"

    def __init__(self, tokens):
        self.tokens, self.vocab_size = list(tokens), len(tokens)

    def convert_ids_to_tokens(self, ids):
        return [self.tokens[i] for i in ids]


class BertJapaneseTokenizer(_Vocab):  # the class name is how mixlib tells a Japanese tokenizer
    pass


def test_trained_pool_leaves_out_padding_and_reserved_placeholders(packaged_enc):
    from mixlib.clusters import trained_pool

    en = _Vocab(["[PAD]", "[unused0]", "[unused12]", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "the", "##ing", "1990", "!", "[unused"])
    assert trained_pool(en).tolist() == [3, 4, 5, 6, 7, 8, 9, 10, 11]  # tags stay: the model sees them in every input
    ja = BertJapaneseTokenizer(["[PAD]", "<unused0>", "[unused3]", "[CLS]", "日本", "ます", "##的", "、", "<unused>"])
    assert trained_pool(ja).tolist() == [3, 4, 5, 6, 7, 8]  # the Tohoku form <unusedN> is a placeholder too
    pool = trained_pool(packaged_enc.tokenizer)  # the real vocabulary: [PAD] and [unused0] ... [unused993] go
    toks = packaged_enc.tokenizer.convert_ids_to_tokens(pool.tolist())
    assert len(pool) == packaged_enc.vocab_size - 995 and not any(t == "[PAD]" or t.startswith("[unused") for t in toks)
