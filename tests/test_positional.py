"""Word vs. position embeddings (mixlib.positional) against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mixlib
from mixlib.positional import principal_angles

from conftest import make_random_encoder


@pytest.fixture(scope="module")
def small_enc():
    return make_random_encoder(layers=2, heads=2, d=16, seed=11)


@pytest.fixture(scope="module")
def small_pos(small_enc):
    return mixlib.positional_orthogonality(small_enc, n_components=3, top_k=4, bins=50, n_top=7, chunk=5000)


def test_cosine_statistics_vs_full_matrix(small_enc, small_pos):
    W = small_enc.word_embeddings().numpy().astype(np.float64)  # (V, D)
    P = small_enc.position_embeddings().numpy().astype(np.float64)  # (P, D)
    wn, pn = np.linalg.norm(W, axis=1), np.linalg.norm(P, axis=1)
    ok = wn > 0  # the random model's [PAD] row is zero
    C = (W[ok] / wn[ok, None]) @ (P / pn[:, None]).T  # (V', P) all at once, float64
    assert small_pos.n_pairs == C.size
    assert small_pos.mean_cos == pytest.approx(C.mean(), abs=1e-6)
    assert small_pos.mean_abs_cos == pytest.approx(np.abs(C).mean(), rel=1e-5)
    assert small_pos.std_cos == pytest.approx(C.std(), rel=1e-5)
    hist, edges = np.histogram(C, bins=50, range=(-1, 1))
    np.testing.assert_allclose(small_pos.bin_edges, edges)
    assert small_pos.hist.sum() == C.size
    assert np.abs(small_pos.hist - hist).sum() <= 1e-5 * C.size  # float32 vs float64 rounding at bin edges only
    # the largest |cos| pairs
    ids = np.flatnonzero(ok)
    A = np.abs(C).ravel()
    flat = np.argpartition(-A, 6)[:7]
    flat = flat[np.argsort(-A[flat])]
    r, c = np.unravel_index(flat, C.shape)
    got = small_pos.top_pairs
    assert list(got.columns) == ["token_id", "token", "position", "cos"] and len(got) == 7
    np.testing.assert_allclose(got["cos"].to_numpy(), C[r, c], atol=1e-6)
    assert set(zip(got["token_id"], got["position"])) == set(zip(ids[r], c))
    assert list(got["token"]) == small_enc.tokenizer.convert_ids_to_tokens(got["token_id"].tolist())
    # [CLS] x position 0
    cls = small_enc.tokenizer.cls_token_id
    assert small_pos.cls_pos0_cos == pytest.approx(W[cls] @ P[0] / (wn[cls] * pn[0]), abs=1e-9)


def test_chunking_does_not_change_result(small_enc, small_pos):
    other = mixlib.positional_orthogonality(small_enc, n_components=3, top_k=4, bins=50, n_top=7, chunk=777)
    assert other.n_pairs == small_pos.n_pairs
    assert np.abs(other.hist - small_pos.hist).sum() <= 1e-6 * other.n_pairs
    assert other.mean_abs_cos == pytest.approx(small_pos.mean_abs_cos, rel=1e-6)
    np.testing.assert_allclose(other.top_pairs["cos"], small_pos.top_pairs["cos"], atol=1e-6)


def test_pca_coordinates_vs_svd(small_enc, small_pos):
    W = small_enc.word_embeddings().numpy().astype(np.float64)
    P = small_enc.position_embeddings().numpy().astype(np.float64)
    X = np.vstack([W, P])
    mu = X.mean(0)
    _, S, Vt = np.linalg.svd(X - mu, full_matrices=False)
    ref_w = (W - mu) @ Vt[:3].T
    ref_p = (P - mu) @ Vt[:3].T
    signs = np.sign((small_pos.word_coords * ref_w).sum(0))  # components are defined up to sign
    np.testing.assert_allclose(small_pos.word_coords, ref_w * signs, atol=1e-4)
    np.testing.assert_allclose(small_pos.pos_coords, ref_p * signs, atol=1e-4)
    np.testing.assert_allclose(small_pos.explained_variance_ratio, (S**2 / (S**2).sum())[:3], rtol=1e-6)


def test_principal_angles_vs_svd(small_enc, small_pos):
    def top_dirs(A, k):
        _, _, Vt = np.linalg.svd(A - A.mean(0), full_matrices=False)
        return Vt[:k].T  # (D, k) orthonormal

    Qw = top_dirs(small_enc.word_embeddings().numpy().astype(np.float64), 4)
    Qp = top_dirs(small_enc.position_embeddings().numpy().astype(np.float64), 4)
    sv = np.linalg.svd(Qw.T @ Qp, compute_uv=False)  # cosines of the principal angles
    ref = np.sort(np.degrees(np.arccos(np.clip(sv, -1, 1))))
    assert small_pos.top_k == 4 and small_pos.angles_deg.shape == (4,)
    np.testing.assert_allclose(small_pos.angles_deg, ref, atol=1e-4)
    assert np.all(np.diff(small_pos.angles_deg) >= 0)
    assert small_pos.random_angles_deg.shape == (4,) and np.all(small_pos.random_angles_deg <= 90)


def test_principal_angles_known_case():
    th = math.radians(30)
    A = np.eye(5)[:, :2]  # span(e1, e2)
    B = np.stack([np.eye(5)[0], math.cos(th) * np.eye(5)[1] + math.sin(th) * np.eye(5)[2]], axis=1)
    np.testing.assert_allclose(principal_angles(A, B), [0.0, 30.0], atol=1e-9)
    np.testing.assert_allclose(principal_angles(A, np.eye(5)[:, 3:]), [90.0, 90.0], atol=1e-9)


def test_random_mean_abs_cos_reference(small_pos):
    rng = np.random.default_rng(0)
    D = small_pos.d_model
    a, b = rng.standard_normal((2, 200_000, D))
    mc = np.mean(np.abs((a * b).sum(1)) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))
    assert small_pos.random_mean_abs_cos == pytest.approx(mc, rel=0.01)
    assert small_pos.random_mean_abs_cos == mixlib.positional.random_abs_cos(D)


def test_random_abs_cos_exact_and_its_approximation():
    from mixlib.positional import random_abs_cos

    assert random_abs_cos(2) == pytest.approx(2 / np.pi)  # E|cos θ| for a uniform angle on the circle
    assert random_abs_cos(3) == pytest.approx(0.5)  # |cos| is uniform on [0, 1] on the sphere
    for d in (32, 384):
        assert random_abs_cos(d) / np.sqrt(2 / (np.pi * d)) - 1 == pytest.approx(1 / (4 * d), rel=0.05)
    for bad in (1, 0, 3.5, True):
        with pytest.raises(ValueError, match="d must be an integer"):
            random_abs_cos(bad)


def test_positional_bad_input(small_enc):
    for kw in (dict(n_components=0), dict(top_k=0), dict(top_k=10_000), dict(bins=0), dict(chunk=0), dict(n_top=-1)):
        with pytest.raises(ValueError, match="out of range"):
            mixlib.positional_orthogonality(small_enc, **kw)


def test_packaged_cls_and_positions(packaged_enc):
    p = mixlib.positional_orthogonality(packaged_enc, n_components=2, top_k=5, n_top=3)
    W, P = packaged_enc.word_embeddings().double(), packaged_enc.position_embeddings().double()
    assert p.word_coords.shape == (packaged_enc.vocab_size, 2) and p.pos_coords.shape == (P.shape[0], 2)
    cls = packaged_enc.tokenizer.cls_token_id
    assert p.cls_pos0_cos == pytest.approx(float(torch.nn.functional.cosine_similarity(W[cls], P[0], dim=0)), abs=1e-9)
    assert p.n_pairs == W.shape[0] * P.shape[0]
    assert 0 <= p.angles_deg.min() and p.angles_deg.max() <= 90


# -- attention from positions alone ------------------------------------------------------------


def naive_position_attention(enc, layer, n, layernorm, bias):
    X = enc.embedding_module("position_embeddings").weight.detach().double()[enc.family.position_offset :][:n]
    if layernorm:
        ln = enc.embedding_module("embedding_norm")
        X = torch.nn.functional.layer_norm(X, (X.shape[1],), ln.weight.double(), ln.bias.double(), ln.eps)
    q, k = enc.module(layer, "query"), enc.module(layer, "key")
    dh = enc.d_head
    out = np.empty((enc.n_heads, n, n))
    for h in range(enc.n_heads):
        sl = slice(h * dh, (h + 1) * dh)
        Q = X @ q.weight.double()[sl].T
        K = X @ k.weight.double()[sl].T
        if bias:
            Q, K = Q + q.bias.double()[sl], K + k.bias.double()[sl]
        S = (Q @ K.T / math.sqrt(dh)).numpy()
        S = np.exp(S - S.max(1, keepdims=True))
        out[h] = S / S.sum(1, keepdims=True)
    return out


@pytest.mark.parametrize("layernorm,bias", [(False, False), (True, False), (True, True), (False, True)])
def test_position_attention_vs_loop(tiny_enc, layernorm, bias):
    A = mixlib.position_attention(tiny_enc, layer=1, n=20, layernorm=layernorm, bias=bias)
    assert A.shape == (tiny_enc.n_heads, 20, 20) and A.dtype == np.float32
    np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(A, naive_position_attention(tiny_enc, 1, 20, layernorm, bias), atol=2e-6)


def test_position_attention_options_matter_and_bad_input(tiny_enc):
    a = mixlib.position_attention(tiny_enc, 0, 8)
    b = mixlib.position_attention(tiny_enc, 0, 8, layernorm=True)
    c = mixlib.position_attention(tiny_enc, 0, 8, bias=True)
    assert not np.allclose(a, b) and not np.allclose(a, c)
    with pytest.raises(ValueError, match="out of range"):
        mixlib.position_attention(tiny_enc, layer=tiny_enc.n_layers)
    with pytest.raises(ValueError, match="out of range"):
        mixlib.position_attention(tiny_enc, 0, n=tiny_enc.max_positions + 1)
    with pytest.raises(ValueError, match="out of range"):
        mixlib.position_attention(tiny_enc, 0, n=0)


# -- centred overlap against random subspaces (issue 9, C1) ------------------------------------


def _toy_sets(seed=0, V=400, P=60, D=24, offset=3.0):
    """Words and positions that share a mean direction (offset) but otherwise live in different coordinates."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal(D)
    m /= np.linalg.norm(m)
    W = rng.standard_normal((V, D)) * np.r_[np.full(D // 2, 2.0), np.full(D - D // 2, 0.3)] + offset * m
    Pm = rng.standard_normal((P, D)) * np.r_[np.full(D // 2, 0.3), np.full(D - D // 2, 1.5)] + offset * m
    return W, Pm


def _direct_cos(A, B):
    An = A / np.linalg.norm(A, axis=1, keepdims=True)
    Bn = B / np.linalg.norm(B, axis=1, keepdims=True)
    return An @ Bn.T


def test_centred_overlap_vs_direct_computation():
    from mixlib.positional import centred_overlap

    W, Pm = _toy_sets()
    ov = centred_overlap(W, Pm, ks=(1, 3, 8), n_draws=50, n_rotations=20, n_sample=100, seed=3, model="toy")
    C = _direct_cos(W, Pm)
    Cc = _direct_cos(W - W.mean(0), Pm - Pm.mean(0))
    assert ov.mean_cos_raw == pytest.approx(C.mean(), abs=1e-6)
    assert ov.mean_abs_cos_raw == pytest.approx(np.abs(C).mean(), rel=1e-5)
    assert ov.mean_cos_centred == pytest.approx(Cc.mean(), abs=1e-6)
    assert ov.mean_abs_cos_centred == pytest.approx(np.abs(Cc).mean(), rel=1e-5)
    # the shared offset inflates the raw cosines; centring removes it
    assert ov.mean_abs_cos_raw > 2 * ov.mean_abs_cos_centred
    mw, mp = W.mean(0), Pm.mean(0)
    assert ov.mean_alignment == pytest.approx(mw @ mp / np.linalg.norm(mw) / np.linalg.norm(mp), abs=1e-12)
    assert ov.mean_share_of_norm[1] == pytest.approx(mp @ mp / (Pm**2).sum(1).mean(), rel=1e-12)
    # the sample statistic is the same |cos| over the sampled words
    assert ov.sample_mean_abs_cos == pytest.approx(np.abs(Cc[ov.sample_ids]).mean(), rel=1e-5)
    # shares: PCA of the centred words (sklearn), variance of the centred positions projected onto it
    from sklearn.decomposition import PCA

    Pc = Pm - mp
    for i, k in enumerate(ov.ks):
        U = PCA(n_components=k, svd_solver="full").fit(W).components_.T  # (D, k)
        assert ov.share_centred[i] == pytest.approx(((Pc @ U) ** 2).sum() / (Pc**2).sum(), rel=1e-8)
        _, _, Vt = np.linalg.svd(W, full_matrices=False)  # uncentred directions
        assert ov.share_raw[i] == pytest.approx(((Pm @ Vt[:k].T) ** 2).sum() / (Pm**2).sum(), rel=1e-8)
        Up = PCA(n_components=k, svd_solver="full").fit(Pm).components_.T
        assert ov.min_angle_centred[i] == pytest.approx(principal_angles(U, Up)[0], abs=1e-6)
    assert ov.null_share_centred.shape == (50, 3) and ov.null_mean_abs_cos.shape == (20,) and ov.n_draws == 50
    # positions live in the coordinates the words use least: below every random subspace at k = 1
    assert ov.share_centred[0] < ov.null_share_centred[:, 0].min()
    # the raw top direction is the shared mean: far above random
    assert ov.share_raw[0] > ov.null_share_raw[:, 0].max()
    tab = ov.share_table()
    assert list(tab.index) == [1, 3, 8] and tab.loc[1, "percentile_centred"] == 0.0
    np.testing.assert_allclose(tab["null_min_angle_q975"], np.quantile(ov.null_min_angle, 0.975, axis=0))  # the ceiling's
    np.testing.assert_allclose(tab[["null_raw_q025", "null_raw_q975"]].T, np.quantile(ov.null_share_raw, [0.025, 0.975], axis=0))
    assert ov.cos_table()["percentile"] == pytest.approx(100 * np.mean(ov.null_mean_abs_cos < ov.sample_mean_abs_cos))


def test_centred_overlap_null_expectations():
    """Random-subspace share has mean k/D; rotation keeps the |cos| of isotropic data at its usual size."""
    from mixlib.positional import centred_overlap

    rng = np.random.default_rng(1)
    W, Pm = rng.standard_normal((300, 16)), rng.standard_normal((80, 16))
    ov = centred_overlap(W, Pm, ks=(2, 6), n_draws=2000, n_rotations=30, n_sample=300, seed=0)
    np.testing.assert_allclose(ov.null_share_centred.mean(0), [2 / 16, 6 / 16], atol=0.01)
    np.testing.assert_allclose(ov.null_share_raw.mean(0), [2 / 16, 6 / 16], atol=0.01)
    # isotropic data: the observed |cos| is typical of its null
    assert 1 < ov.cos_table()["percentile"] < 99
    assert np.all((ov.null_min_angle >= 0) & (ov.null_min_angle <= 90))


def test_centred_overlap_encoder_and_bad_input(small_enc):
    from mixlib.positional import centred_overlap

    W = small_enc.word_embeddings().numpy()
    Pm = small_enc.position_embeddings().numpy()
    a = centred_overlap(small_enc, None, ks=(2,), n_draws=5, n_rotations=3, n_sample=50, seed=4)
    b = centred_overlap(W, Pm, ks=(2,), n_draws=5, n_rotations=3, n_sample=50, seed=4)
    assert a.model == small_enc.name
    np.testing.assert_allclose(a.null_share_centred, b.null_share_centred)
    assert a.mean_abs_cos_centred == b.mean_abs_cos_centred
    with pytest.raises(ValueError, match="same D"):
        centred_overlap(W, Pm[:, :5])
    with pytest.raises(ValueError, match="out of range"):
        centred_overlap(W, Pm, ks=(0,))
    with pytest.raises(ValueError, match="out of range"):
        centred_overlap(W, Pm, ks=(W.shape[1] + 1,))
    with pytest.raises(ValueError, match="NaN"):
        centred_overlap(np.full_like(W, np.nan), Pm)
    with pytest.raises(ValueError, match="position embeddings"):
        centred_overlap(W, None)
    with pytest.raises(ValueError, match="out of range"):
        centred_overlap(W, Pm, n_draws=0)


def test_random_orthonormal_and_percentile():
    from mixlib.positional import percentile_of, random_orthonormal

    rng = np.random.default_rng(0)
    Q = random_orthonormal(12, 5, rng)
    np.testing.assert_allclose(Q.T @ Q, np.eye(5), atol=1e-12)
    # Haar: each coordinate of a random unit column has mean square 1/D
    sq = np.mean([random_orthonormal(12, 1, rng)[:, 0] ** 2 for _ in range(3000)], axis=0)
    np.testing.assert_allclose(sq, 1 / 12, atol=0.01)
    assert percentile_of(5.0, np.arange(10)) == pytest.approx(55.0)  # 5 below, 1 tie
    assert percentile_of(-1.0, np.arange(10)) == 0.0 and percentile_of(99, np.arange(10)) == 100.0
    with pytest.raises(ValueError, match="empty"):
        percentile_of(1.0, [])


# -- real input and position-only attention at its scale (issue 9, C2) ---------------------------


def test_real_input_vs_model_embeddings(tiny_enc):
    from mixlib.positional import real_input

    ids = np.array([2000, 3000, 1037, 7592])
    for k, seg in ((0, 0), (5, 1)):
        got = real_input(tiny_enc, ids, k, segment=seg)
        x = torch.full((len(ids), k + 1), 1996, dtype=torch.long)
        x[:, k] = torch.from_numpy(ids)
        with torch.no_grad():  # the model's own embedding layer (eval mode: no dropout)
            ref = tiny_enc.model.embeddings(input_ids=x, token_type_ids=torch.full_like(x, seg))[:, k]
        np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="out of range"):
        real_input(tiny_enc, ids, tiny_enc.max_positions)
    with pytest.raises(ValueError, match="out of range"):
        real_input(tiny_enc, ids, 0, segment=2)
    with pytest.raises(ValueError, match="ids must lie"):
        real_input(tiny_enc, [tiny_enc.vocab_size], 0)


def test_input_std_and_position_std_vs_numpy(tiny_enc):
    from mixlib.positional import input_std, position_std

    ids = np.arange(1000, 1300)
    E = tiny_enc.word_embeddings().numpy().astype(np.float64)[ids]
    Pm = tiny_enc.position_embeddings().numpy().astype(np.float64)
    s = tiny_enc.embedding_module("token_type_embeddings").weight.detach().numpy().astype(np.float64)[1]
    eps = tiny_enc.embedding_module("embedding_norm").eps
    ref = [np.sqrt((E + Pm[k] + s).var(axis=1) + eps).mean() for k in range(7)]
    np.testing.assert_allclose(input_std(tiny_enc, 7, ids, segment=1), ref, rtol=1e-6)
    np.testing.assert_allclose(position_std(tiny_enc, 7), np.sqrt(Pm[:7].var(axis=1) + eps), rtol=1e-6)


def test_position_attention_input_std(tiny_enc):
    from mixlib.positional import position_std

    n = 12
    # the position's own std reproduces LN(p) exactly
    a = mixlib.position_attention(tiny_enc, 0, n, layernorm=True, input_std=position_std(tiny_enc, n))
    np.testing.assert_allclose(a, mixlib.position_attention(tiny_enc, 0, n, layernorm=True), atol=2e-6)
    # any other divisor: centre, divide, gain and bias, then the usual softmax (float64 by hand)
    std = np.linspace(0.5, 2.0, n)
    got = mixlib.position_attention(tiny_enc, 0, n, layernorm=True, input_std=std, bias=True)
    X = tiny_enc.position_embeddings().double()[:n]
    ln = tiny_enc.embedding_module("embedding_norm")
    X = (X - X.mean(1, keepdim=True)) / torch.from_numpy(std)[:, None] * ln.weight.double() + ln.bias.double()
    q, k = tiny_enc.module(0, "query"), tiny_enc.module(0, "key")
    dh = tiny_enc.d_head
    for h in range(tiny_enc.n_heads):
        sl = slice(h * dh, (h + 1) * dh)
        S = ((X @ q.weight.double()[sl].T + q.bias.double()[sl]) @ (X @ k.weight.double()[sl].T + k.bias.double()[sl]).T
             / math.sqrt(dh)).detach()
        np.testing.assert_allclose(got[h], torch.softmax(S, -1).numpy(), atol=2e-6)
    with pytest.raises(ValueError, match="layernorm=True"):
        mixlib.position_attention(tiny_enc, 0, n, input_std=std)
    with pytest.raises(ValueError, match="positive finite"):
        mixlib.position_attention(tiny_enc, 0, n, layernorm=True, input_std=-std)
    with pytest.raises(ValueError, match="shape"):
        mixlib.position_attention(tiny_enc, 0, n, layernorm=True, input_std=std[:3])


def test_token_attention_vs_hand_forward(tiny_enc):
    from mixlib.positional import token_attention

    n, B = 9, 5
    got = token_attention(tiny_enc, layer=0, n=n, n_seqs=B, seed=7, batch=2)
    assert got.shape == (tiny_enc.n_heads, n, n)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
    special = set(tiny_enc.tokenizer.all_special_ids)
    pool = np.array([i for i in range(tiny_enc.vocab_size) if i not in special])
    ids = torch.from_numpy(np.random.default_rng(7).choice(pool, size=(B, n)))
    with torch.no_grad():  # layer 0's attention by hand from the embedding output (no output_attentions)
        X = tiny_enc.model.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids)).double()  # (B, n, D)
        q, k = tiny_enc.module(0, "query"), tiny_enc.module(0, "key")
        dh, H = tiny_enc.d_head, tiny_enc.n_heads
        Q = (X @ q.weight.double().T + q.bias.double()).view(B, n, H, dh).transpose(1, 2)
        K = (X @ k.weight.double().T + k.bias.double()).view(B, n, H, dh).transpose(1, 2)
        ref = torch.softmax(Q @ K.transpose(-1, -2) / math.sqrt(dh), -1).mean(0).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)
    with pytest.raises(ValueError, match="out of range"):
        token_attention(tiny_enc, n=0)


def test_map_correlation_vs_corrcoef():
    from mixlib.positional import map_correlation

    rng = np.random.default_rng(0)
    H, n = 3, 10
    B = rng.random((H, n, n))
    B /= B.sum(-1, keepdims=True)
    eye = np.tile(np.eye(n, k=-1) + 1e-3, (H, 1, 1))
    A = np.stack([B[1], eye[0] / eye[0].sum(-1, keepdims=True), B[2] + 0.01 * rng.random((n, n))])
    df = map_correlation(A, B, n_perm=300, seed=1)
    for h in range(H):
        assert df.loc[h, "r"] == pytest.approx(np.corrcoef(A[h].ravel(), B[h].ravel())[0, 1], abs=1e-12)
        assert df.loc[h, "tv"] == pytest.approx(0.5 * np.abs(A[h] - B[h]).sum(1).mean(), abs=1e-12)
    assert df.loc[0, "best_match"] == 1  # head 0 of A is head 1 of B
    assert df.loc[2, "best_match"] == 2 and bool(df.loc[2, "survives"]) and df.loc[2, "p_value"] == pytest.approx(1 / 301)
    assert abs(df.loc[1, "null_mean"]) < 0.1  # random rows/columns: no alignment on average
    for h in range(H):  # the margin: own r minus the best correlation with another head of B (np.corrcoef)
        other = max(np.corrcoef(A[h].ravel(), B[k].ravel())[0, 1] for k in range(H) if k != h)
        assert df.loc[h, "margin"] == pytest.approx(df.loc[h, "r"] - other, abs=1e-12)
        assert np.corrcoef(A[h].ravel(), B[df.loc[h, "runner_up"]].ravel())[0, 1] == pytest.approx(other, abs=1e-12)
    assert df.loc[0, "margin"] < 0 < df.loc[2, "margin"]  # head 0 matches another head; head 2 its own
    assert np.all((df["p_value"] > 0) & (df["p_value"] <= 1))
    with pytest.raises(ValueError, match="shape"):
        map_correlation(A, B[:, :5, :5])


def test_own_sieve_every_label():
    import pandas as pd

    from mixlib.positional import SIEVE_LABELS, own_sieve

    def frame(best, margin, survives=True):
        return pd.DataFrame({"survives": survives, "best_match": best, "margin": margin}, index=pd.RangeIndex(7, name="head"))

    #            head:  0     1     2     3     4     5     6
    full = frame([0, 1, 2, 3, 4, 5, 6], [0.20, 0.08, 0.01, 0.20, 0.20, 0.20, 0.04], [True] * 5 + [False, True])
    a = frame([0, 1, 2, 3, 9, 5, 6], [0.06, 0.04, 0.02, 0.20, 0.20, 0.20, 0.08])
    b = frame([0, 1, 2, 7, 4, 5, 6], [0.05, 0.30, 0.03, 0.20, 0.20, 0.20, 0.03])
    got = own_sieve(full, a, b, margin=0.05)
    # 0: ahead by >= 0.05 in both halves; 1: in the whole set and one half only; 2: nowhere; 3, 4: another head wins
    # in one half; 5: fails the null; 6: ahead in one half only (the cold read's case: not "small in every average")
    assert list(got) == ["distinct", "unsure", "indistinct", "not_own", "not_own", "not_own", "unsure"]
    assert set(got) <= set(SIEVE_LABELS) and got.index.equals(full.index)
    assert own_sieve(full, a, b, margin=0.04)[1] == "distinct"  # the margin is the rule's one knob
    with pytest.raises(ValueError, match="margin must be in"):
        own_sieve(full, a, b, margin=0)
    with pytest.raises(ValueError, match="compare the same maps"):
        own_sieve(full, a.iloc[:3], b)
    with pytest.raises(ValueError, match="map_correlation"):
        own_sieve(full, a.drop(columns="margin"), b)


def test_offset_groups_is_a_partition_and_each_group_its_definition():
    from mixlib.positional import OFFSET_GROUPS, offset_groups

    rng = np.random.default_rng(0)
    for _ in range(200):  # random profiles: every head lands in exactly one group, the one its flags name
        H = 12
        flat_tok = rng.random(H) < 0.3
        settled = ~flat_tok & (rng.random(H) < 0.7)
        flat_pos = rng.random(H) < 0.3
        peak_pos, peak_tok = rng.integers(-2, 3, H), rng.integers(-2, 3, H)
        heads = sorted(rng.choice(H, size=rng.integers(0, H + 1), replace=False).tolist())
        got = offset_groups(heads, settled=settled, flat_pos=flat_pos, flat_tok=flat_tok, peak_pos=peak_pos, peak_tok=peak_tok)
        assert set(got) == set(OFFSET_GROUPS)
        assert sorted(h for g in got.values() for h in g) == heads  # each head once
        for h in got["same"]:
            assert settled[h] and not flat_pos[h] and peak_pos[h] == peak_tok[h]
        for h in got["other"]:
            assert settled[h] and not flat_pos[h] and peak_pos[h] != peak_tok[h]
        assert all(settled[h] and flat_pos[h] for h in got["posflat"])
        assert all(flat_tok[h] for h in got["flat"])
        assert all(not settled[h] and not flat_tok[h] for h in got["unsettled"])
    with pytest.raises(ValueError, match="both settled and flat"):
        offset_groups([0], settled=[True], flat_pos=[False], flat_tok=[True], peak_pos=[1], peak_tok=[1])


# -- psi on words alone vs. on the real input (issue 9, C3) ----------------------------------------


def test_psi_rank_agreement_vs_naive(tiny_enc):
    from scipy.stats import spearmanr

    from mixlib.positional import psi_rank_agreement, real_input

    ids = np.arange(2000, 2150)
    df = psi_rank_agreement(tiny_enc, ids, [0, 3], layer=1, n_boot=100, seed=0)
    assert list(df.columns) == ["position", "head", "rho", "ci_lo", "ci_hi"] and len(df) == 2 * tiny_enc.n_heads
    D, dh = tiny_enc.d_model, tiny_enc.d_head

    def psi_naive(X):  # psi_q * psi_k * psi_v by the paper's formula, one head at a time
        X = torch.as_tensor(X).double()
        out = np.ones((tiny_enc.n_heads, X.shape[0]))
        for role in ("query", "key", "value"):
            Wr = tiny_enc.module(1, role).weight.double()
            for h in range(tiny_enc.n_heads):
                Y = X @ Wr[h * dh : (h + 1) * dh].T
                out[h] *= ((Y.norm(dim=1) / math.sqrt(dh)) / (X.norm(dim=1) / math.sqrt(D))).detach().numpy()
        return out

    pw = psi_naive(tiny_enc.word_embeddings()[ids])
    for k in (0, 3):
        pr = psi_naive(real_input(tiny_enc, ids, k))
        for h in range(tiny_enc.n_heads):
            row = df[(df.position == k) & (df["head"] == h)].iloc[0]
            assert row.rho == pytest.approx(spearmanr(pw[h], pr[h]).statistic, abs=1e-4)
            assert row.ci_lo <= row.rho + 0.02 and row.rho - 0.02 <= row.ci_hi and row.ci_lo < row.ci_hi
    none = psi_rank_agreement(tiny_enc, ids, [0], n_boot=0)
    assert none["ci_lo"].isna().all()
    with pytest.raises(ValueError, match="positions is empty"):
        psi_rank_agreement(tiny_enc, ids, [])
    with pytest.raises(ValueError, match="at least 3"):
        psi_rank_agreement(tiny_enc, ids[:2], [0])


def test_boot_spearman_vs_explicit_resamples():
    """The multiplicity trick equals scipy's Spearman on the explicitly resampled (tied) data."""
    from scipy.stats import spearmanr

    from mixlib.positional import _boot_spearman

    rng = np.random.default_rng(5)
    x = rng.standard_normal(60)
    y = x + rng.standard_normal(60)
    draws = rng.integers(0, 60, size=(25, 60))
    counts = np.zeros((25, 60), dtype=np.int64)
    np.add.at(counts, (np.arange(25)[:, None], draws), 1)
    got = _boot_spearman(x, y, counts)
    ref = [spearmanr(x[d], y[d]).statistic for d in draws]
    np.testing.assert_allclose(got, ref, atol=1e-12)


def test_new_functions_exported_lazily():
    from mixlib import positional

    for name in ("centred_overlap", "Overlap", "token_attention", "map_correlation", "psi_rank_agreement"):
        assert getattr(mixlib, name) is getattr(positional, name)
        assert name in positional.__all__


def test_k_verdicts_read_the_share_table():
    from mixlib.positional import centred_overlap

    W, Pm = _toy_sets()
    ov = centred_overlap(W, Pm, ks=(1, 3, 8), n_draws=50, n_rotations=20, n_sample=100, seed=3, model="toy")
    kv, tab = ov.k_verdicts(), ov.share_table()
    for k in ov.ks:  # each k by hand, from the table's own columns
        assert (k in kv["below"]) == (tab.loc[k, "share_centred"] < tab.loc[k, "null_q025"])
        assert (k in kv["above"]) == (tab.loc[k, "share_centred"] > tab.loc[k, "null_q975"])
        assert (k in kv["above_raw"]) == (tab.loc[k, "percentile_raw"] >= 97.5)
        pa = tab.loc[k, "percentile_min_angle"]
        assert [k in kv[n] for n in ("angle_wider", "angle_typical", "angle_narrower")].count(True) == 1
        assert (k in kv["angle_wider"]) == (pa >= 97.5)
    assert kv["below"][:1] == [1] and 1 in kv["above_raw"]  # the toy sets: positions avoid the words' top direction,
    assert kv["reversed"] == [k for k in kv["above_raw"] if k in kv["below"]] and 1 in kv["reversed"]  # raw: the shared mean
    q975 = np.quantile(ov.null_min_angle, 0.975, axis=0)
    for k, q in zip(ov.ks, q975):  # untestable: not wider, not narrower, and random subspaces already near 90 degrees
        assert (k in kv["angle_ceiling"]) == (k in kv["angle_typical"] and q >= 89.0)
        assert (k in ov.k_verdicts(ceiling=90.0)["angle_ceiling"]) == (k in kv["angle_typical"])  # 90: every typical k
    assert ov.k_verdicts(ceiling=0.0)["angle_ceiling"] == [k for k, q in zip(ov.ks, q975) if k in kv["angle_typical"] and q >= 90]


def test_one_sided_centring_vs_direct_cosines():
    from mixlib.positional import one_sided_centring

    W, Pm = _toy_sets()
    got = one_sided_centring(W, Pm, n_words=10_000, seed=1)  # more than V: every word, in some order
    wc, pc = W - W.mean(0), Pm - Pm.mean(0)
    C, Cc = _direct_cos(W, Pm), _direct_cos(wc, pc)
    assert got["n_words"] == len(W)
    assert got["none"] == pytest.approx(np.abs(C).mean(), rel=1e-9)
    assert got["pos"] == pytest.approx(np.abs(_direct_cos(W, pc)).mean(), rel=1e-9)
    assert got["word"] == pytest.approx(np.abs(_direct_cos(wc, Pm)).mean(), rel=1e-9)
    assert got["both"] == pytest.approx(np.abs(Cc).mean(), rel=1e-9)
    assert got["lowers_pct"] == pytest.approx(100 * (C > Cc).mean())
    # the third term, pair by pair: (w - wbar).pbar / (|w| |p|)
    t3 = np.array([[(W[i] - W.mean(0)) @ Pm.mean(0) / (math.dist(W[i], 0 * W[i]) * math.dist(Pm[j], 0 * Pm[j]))
                    for j in range(len(Pm))] for i in range(len(W))])
    assert got["t3_raises_pct"] == pytest.approx(100 * (np.abs(C) > np.abs(C - t3)).mean())
    # both sets carry the shared offset: centring either one lowers the mean |cos|, both lowers it most
    assert got["none"] > max(got["pos"], got["word"]) and got["both"] < got["none"] / 2
    small = one_sided_centring(W, Pm, n_words=50, seed=1)
    assert small["n_words"] == 50 and small == one_sided_centring(W, Pm, n_words=50, seed=1)
    with pytest.raises(ValueError, match="same D"):
        one_sided_centring(W, Pm[:, :5])
    with pytest.raises(ValueError, match="n_words"):
        one_sided_centring(W, Pm, n_words=0)
    with pytest.raises(ValueError, match="NaN"):
        one_sided_centring(np.full_like(W, np.nan), Pm)


def test_cls_spread_by_hand():
    from mixlib.positional import cls_spread

    W = np.eye(4)[[0, 1, 2]]  # [CLS] = word 0, [SEP] = word 2
    ang = np.radians([0, 5, 80, 50, 30])  # position k at this angle from [CLS], in the plane of words 0 and 1
    P = np.c_[np.cos(ang), np.sin(ang), [0, 0, 0.3, 0, 0], np.zeros(5)]
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    got = cls_spread(W, P, 0, 2, near=0.1, early=4)
    cc = P[:, 0]
    assert got["pos0"] == pytest.approx(1.0) and got["near"] == [1]  # cos 5° = 0.996 is within 0.1 of 1, cos 30° is not
    assert got["second"] == 1 and got["c2"] == pytest.approx(cc[1])
    assert got["early_lo"] == pytest.approx(cc[1:4].min()) and got["early_hi"] == pytest.approx(cc[1:4].max())
    assert got["sep_pos"] == 2 and got["sep_c"] == pytest.approx(P[2, 2])
    assert cls_spread(W, P, 0, 2, near=0.2, early=4)["near"] == [1, 4]  # cos 30° = 0.866
    with pytest.raises(ValueError, match="cls_id"):
        cls_spread(W, P, 3, 2)
    with pytest.raises(ValueError, match="early"):
        cls_spread(W, P, 0, 2, early=9)


def test_cross_term_ratio_vs_expanding_the_square(tiny_enc):
    from mixlib.positional import cross_term_ratio

    rng = np.random.default_rng(0)
    e, p = rng.standard_normal((7, tiny_enc.d_model)), rng.standard_normal((3, tiny_enc.d_model))
    got = cross_term_ratio(tiny_enc, e, p, layer=1, component="key")
    Wk = tiny_enc.model.encoder.layer[1].attention.self.key.weight.detach().double().numpy()  # (H * d', D)
    dh = tiny_enc.d_head
    for h in range(tiny_enc.n_heads):
        M = Wk[h * dh:(h + 1) * dh]
        vals = []
        for x in e:
            for y in p:  # |M(e + p)|² − |Me|² − |Mp|² is the cross term 2 eᵀMᵀMp
                full, a, b = (np.sum((M @ v) ** 2) for v in (x + y, x, y))
                vals.append(abs(full - a - b) / (a + b))
        assert got[h] == pytest.approx(np.mean(vals), rel=1e-4)
    assert got.shape == (tiny_enc.n_heads,) and (got > 0).all()
    # 2|ab| <= a² + b²: the ratio never exceeds 1, and reaches it when p = e
    assert cross_term_ratio(tiny_enc, e, e, layer=0).max() <= 1 + 1e-6
    assert cross_term_ratio(tiny_enc, e[:1], e[:1], layer=0) == pytest.approx(np.ones(tiny_enc.n_heads))
    with pytest.raises(ValueError, match="d_model"):
        cross_term_ratio(tiny_enc, e[:, :5], p[:, :5])
