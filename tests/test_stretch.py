"""Norm stretch psi (mixlib.stretch) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mixlib
from mixlib.stretch import PROJECTIONS, Stretch, StretchBounds

from conftest import make_random_encoder


def naive_psi(enc, X: np.ndarray, layer: int, role: str) -> np.ndarray:
    """psi by the definition, one head at a time, in float64: (H, N)."""
    lin = enc.module(layer, role)  # the nn.Linear itself, not Encoder.projection
    Wf = lin.weight.detach().double().cpu().numpy()  # (D, D)
    X = X.astype(np.float64)
    d, dh, H = enc.d_model, enc.d_head, enc.n_heads
    out = np.empty((H, X.shape[0]))
    xn = np.sqrt((X * X).sum(axis=1))
    for h in range(H):
        P = Wf[h * dh : (h + 1) * dh]  # (d', D)
        px = X @ P.T  # (N, d')
        with np.errstate(invalid="ignore", divide="ignore"):
            out[h] = (np.sqrt((px * px).sum(axis=1)) / math.sqrt(dh)) / (xn / math.sqrt(d))
    return out


@pytest.fixture(scope="module")
def tiny_stretch(tiny_enc):
    return mixlib.norm_stretch(tiny_enc)


@pytest.fixture(scope="module")
def packaged_stretch(packaged_enc):
    return mixlib.norm_stretch(packaged_enc)


def test_psi_matches_per_head_loop(tiny_enc, tiny_stretch):
    s = tiny_stretch
    E = tiny_enc.word_embeddings().numpy()
    L, H, V = tiny_enc.n_layers, tiny_enc.n_heads, tiny_enc.vocab_size
    assert isinstance(s, Stretch)
    assert s.shape == (L, H, V)
    for arr in (s.psi_q, s.psi_k, s.psi_v, s.psi_qkv):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.float32 and arr.shape == (L, H, V)
    for layer in range(L):
        for role, arr in zip(PROJECTIONS, (s.psi_q, s.psi_k, s.psi_v)):
            ref = naive_psi(tiny_enc, E, layer, role)
            np.testing.assert_allclose(arr[layer], ref, rtol=2e-5, atol=0, equal_nan=True)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(s.psi_qkv, s.psi_q.astype(np.float64) * s.psi_k * s.psi_v, rtol=1e-5, equal_nan=True)
    assert s.model == tiny_enc.name and s.layers == tuple(range(L))
    assert s.tokens is not None and len(s.tokens) == V and s.tokens[tiny_enc.tokenizer.cls_token_id] == "[CLS]"


def test_zero_vector_gives_nan_not_crash(tiny_enc, tiny_stretch):
    # BertEmbeddings zero-initialises the padding row: x = 0 -> psi undefined -> NaN by the documented rule
    E = tiny_enc.word_embeddings().numpy()
    zero = np.flatnonzero(np.linalg.norm(E, axis=1) == 0)
    assert len(zero) == tiny_stretch.n_zero >= 1
    assert np.isnan(tiny_stretch.psi_qkv[:, :, zero]).all()
    nonzero = np.setdiff1d(np.arange(E.shape[0]), zero)
    assert np.isfinite(tiny_stretch.psi_qkv[:, :, nonzero]).all()
    X = np.zeros((3, tiny_enc.d_model), dtype=np.float32)
    X[1, 0] = 1.0
    s = mixlib.norm_stretch(tiny_enc, X)
    assert np.isnan(s.psi_q[:, :, [0, 2]]).all() and np.isfinite(s.psi_q[:, :, 1]).all() and s.n_zero == 2


def test_layers_subset_and_chunking_agree(tiny_enc, tiny_stretch):
    s1 = mixlib.norm_stretch(tiny_enc, layers=[1], chunk=999)
    assert s1.layers == (1,) and s1.shape[0] == 1
    np.testing.assert_allclose(s1.psi_v[0], tiny_stretch.psi_v[1], rtol=1e-5, equal_nan=True)
    s2 = mixlib.norm_stretch(tiny_enc, layers=1, chunk=None)
    np.testing.assert_allclose(s2.psi_k[0], tiny_stretch.psi_k[1], rtol=1e-5, equal_nan=True)
    assert s1.index(1) == 0
    with pytest.raises(ValueError, match="not in this Stretch"):
        s1.index(0)


def test_custom_vectors(tiny_enc):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, tiny_enc.d_model)).astype(np.float32)
    s = mixlib.norm_stretch(tiny_enc, torch.from_numpy(X))
    assert s.tokens is None and s.shape == (tiny_enc.n_layers, tiny_enc.n_heads, 50)
    np.testing.assert_allclose(s.psi_q[0], naive_psi(tiny_enc, X, 0, "query"), rtol=2e-5)
    # psi does not depend on the length of x
    s3 = mixlib.norm_stretch(tiny_enc, 3.7 * X)
    np.testing.assert_allclose(s3.psi_qkv, s.psi_qkv, rtol=1e-5)


def test_bad_input(tiny_enc, tiny_stretch):
    with pytest.raises(ValueError, match="out of range"):
        mixlib.norm_stretch(tiny_enc, layers=[tiny_enc.n_layers])
    with pytest.raises(ValueError, match="out of range"):
        mixlib.norm_stretch(tiny_enc, layers=[-1])
    with pytest.raises(ValueError, match="empty"):
        mixlib.norm_stretch(tiny_enc, layers=[])
    with pytest.raises(ValueError, match="shape"):
        mixlib.norm_stretch(tiny_enc, np.zeros((4, tiny_enc.d_model + 1)))
    with pytest.raises(ValueError, match="NaN"):
        mixlib.norm_stretch(tiny_enc, np.full((2, tiny_enc.d_model), np.nan))
    with pytest.raises(ValueError, match="chunk"):
        mixlib.norm_stretch(tiny_enc, chunk=0)
    with pytest.raises(TypeError):
        mixlib.norm_stretch(tiny_enc, "the")
    with pytest.raises(ValueError, match="head"):
        tiny_stretch.top_tokens(0, tiny_enc.n_heads)
    with pytest.raises(ValueError, match="which"):
        tiny_stretch.get("x")


def test_top_tokens_is_sorted(tiny_stretch):
    df = tiny_stretch.top_tokens(1, 2, n=7, which="q")
    psi = tiny_stretch.psi_q[1, 2]
    ref = np.sort(psi[np.isfinite(psi)])[::-1][:7]
    np.testing.assert_allclose(df["psi_q"].to_numpy(), ref)
    assert list(df["token"]) == [tiny_stretch.tokens[i] for i in df["id"]]


# -- eigen bounds -------------------------------------------------------------


def _check_bounds_cover(stretch: Stretch, bounds: StretchBounds) -> None:
    for pi, arr in enumerate((stretch.psi_q, stretch.psi_k, stretch.psi_v)):
        lo = bounds.psi_min[pi][:, :, None]  # (L, H, 1)
        hi = bounds.psi_max[pi][:, :, None]
        fin = np.isfinite(arr)
        assert fin.sum() > 0
        assert np.all(~fin | (arr <= hi * (1 + 1e-5))), "a psi exceeds the largest possible value"
        assert np.all(~fin | (arr >= lo * (1 - 1e-5) - 1e-7)), "a psi is below the smallest possible value"


def test_every_psi_within_bounds_tiny(tiny_enc, tiny_stretch):
    b = mixlib.stretch_bounds(tiny_enc)
    assert b.psi_min.shape == b.psi_max.shape == (3, tiny_enc.n_layers, tiny_enc.n_heads)
    assert np.all(b.psi_min == 0)  # d' < d: P^T P is singular
    _check_bounds_cover(tiny_stretch, b)


def test_every_psi_within_bounds_packaged(packaged_enc, packaged_stretch):
    b = mixlib.stretch_bounds(packaged_enc)
    _check_bounds_cover(packaged_stretch, b)


def test_eigenvalues_match_full_matrix(tiny_enc):
    b = mixlib.stretch_bounds(tiny_enc)
    d, dh = tiny_enc.d_model, tiny_enc.d_head
    for pi, role in enumerate(PROJECTIONS):
        W = tiny_enc.module(1, role).weight.detach().double().numpy()
        for h in range(tiny_enc.n_heads):
            P = W[h * dh : (h + 1) * dh]  # (d', D)
            ev = np.linalg.eigvalsh(P.T @ P)  # (D,) the big D x D matrix, independently
            np.testing.assert_allclose(np.sqrt(d / dh * ev[-1]), b.psi_max[pi, 1, h], rtol=1e-9)
            np.testing.assert_allclose(ev[-dh:], b.eigenvalues[pi, 1, h], rtol=1e-7, atol=1e-10)
            assert abs(ev[0]) < 1e-10  # rank <= d' < D
            lo, hi = b.bounds(role[0], 1, h)
            assert lo == 0.0 and hi == pytest.approx(b.psi_max[pi, 1, h])


@pytest.mark.parametrize("enc_name", ["tiny", "packaged"])
def test_top_eigenvector_attains_max(enc_name, tiny_enc, packaged_enc):
    enc = tiny_enc if enc_name == "tiny" else packaged_enc
    b = mixlib.stretch_bounds(enc)
    L, H = enc.n_layers, enc.n_heads
    X = b.top_vectors.reshape(3 * L * H, enc.d_model)  # (3*L*H, D) one row per (projection, layer, head)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-9)
    s = mixlib.norm_stretch(enc, X.astype(np.float32))
    for pi, arr in enumerate((s.psi_q, s.psi_k, s.psi_v)):
        for l in range(L):
            for h in range(H):
                row = (pi * L + l) * H + h
                assert arr[l, h, row] == pytest.approx(b.psi_max[pi, l, h], rel=1e-4)
                # and it is the max over everything else measured in that head
                assert arr[l, h].max() <= b.psi_max[pi, l, h] * (1 + 1e-5)
    np.testing.assert_allclose(b.top_vector("k", 0, 1), b.top_vectors[1, 0, 1])


def test_single_head_has_positive_min():
    enc = make_random_encoder(layers=1, heads=1, d=24, seed=3)
    b = mixlib.stretch_bounds(enc)
    s = mixlib.norm_stretch(enc)
    W = enc.module(0, "query").weight.detach().double().numpy()
    ev = np.linalg.eigvalsh(W.T @ W)
    assert b.psi_min[0, 0, 0] == pytest.approx(math.sqrt(ev[0]), rel=1e-7) and b.psi_min[0, 0, 0] > 0
    _check_bounds_cover(s, b)


def test_bounds_bad_input(tiny_enc):
    b = mixlib.stretch_bounds(tiny_enc, layers=[0])
    with pytest.raises(ValueError, match="projection"):
        b.bounds("o", 0, 0)
    with pytest.raises(ValueError, match="layer"):
        b.top_vector("q", 1, 0)
    with pytest.raises(ValueError, match="head"):
        b.top_vector("q", 0, tiny_enc.n_heads)
    with pytest.raises(ValueError, match="out of range"):
        mixlib.stretch_bounds(tiny_enc, layers=[2])


# -- random-direction reference, normalised psi, biases -----------------------------------------


def test_random_psi_rms_is_frobenius_and_monte_carlo(tiny_enc):
    rms = mixlib.random_psi_rms(tiny_enc)
    L, H, dh = tiny_enc.n_layers, tiny_enc.n_heads, tiny_enc.d_head
    assert rms.shape == (3, L, H) and rms.dtype == np.float64
    for li in range(L):
        for pi, role in enumerate(PROJECTIONS):
            Wf = tiny_enc.module(li, role).weight.detach().double().numpy()
            for h in range(H):
                P = Wf[h * dh : (h + 1) * dh]
                assert rms[pi, li, h] == pytest.approx(np.linalg.norm(P, "fro") / math.sqrt(dh), rel=1e-10)
    # the same from the eigenvalues: ||P||_F^2 = trace(P P^T) = sum of the eigenvalues
    b = mixlib.stretch_bounds(tiny_enc)
    np.testing.assert_allclose(rms, np.sqrt(b.eigenvalues.sum(axis=-1) / dh), rtol=1e-8)
    # and by simulation: the mean of psi^2 over random directions
    X = np.random.default_rng(0).standard_normal((20000, tiny_enc.d_model)).astype(np.float32)
    s = mixlib.norm_stretch(tiny_enc, X=X)
    for pi, which in enumerate("qkv"):
        mc = np.sqrt((s.get(which).astype(np.float64) ** 2).mean(axis=2))
        np.testing.assert_allclose(mc, rms[pi], rtol=0.03)
    one = mixlib.random_psi_rms(tiny_enc, layers=1)
    np.testing.assert_array_equal(one[:, 0], rms[:, 1])


def test_normalize_stretch(tiny_enc, tiny_stretch):
    rms = mixlib.random_psi_rms(tiny_enc)
    n = mixlib.normalize_stretch(tiny_stretch, rms)
    assert n.normalized and not tiny_stretch.normalized and n.shape == tiny_stretch.shape
    np.testing.assert_allclose(n.psi_k, tiny_stretch.psi_k / rms[1][..., None], rtol=1e-6)
    expect = tiny_stretch.psi_qkv.astype(np.float64) / rms.prod(axis=0)[..., None]
    np.testing.assert_allclose(n.psi_qkv, expect, rtol=1e-5, equal_nan=True)
    n2 = mixlib.normalize_stretch(tiny_stretch, tiny_enc)  # the encoder is accepted
    np.testing.assert_array_equal(n2.psi_qkv, n.psi_qkv)
    # normalised psi of random directions has mean square ~1 in every head
    X = np.random.default_rng(1).standard_normal((20000, tiny_enc.d_model)).astype(np.float32)
    nr = mixlib.normalize_stretch(mixlib.norm_stretch(tiny_enc, X=X), rms)
    np.testing.assert_allclose((nr.psi_v.astype(np.float64) ** 2).mean(axis=2), 1.0, rtol=0.05)
    with pytest.raises(ValueError, match="already normalised"):
        mixlib.normalize_stretch(n, rms)
    with pytest.raises(ValueError, match="shape"):
        mixlib.normalize_stretch(tiny_stretch, rms[:, :1])
    with pytest.raises(ValueError, match="positive"):
        mixlib.normalize_stretch(tiny_stretch, np.zeros_like(rms))
    with pytest.raises(ValueError, match="bias"):
        mixlib.normalize_stretch(mixlib.norm_stretch(tiny_enc, bias=True), rms)


def test_bias_option_matches_definition(tiny_enc):
    E = tiny_enc.word_embeddings().numpy()[1000:1050].astype(np.float64)
    assert (np.linalg.norm(E, axis=1) > 0).all()
    s = mixlib.norm_stretch(tiny_enc, X=E.astype(np.float32), bias=True)
    assert s.bias
    d, dh = tiny_enc.d_model, tiny_enc.d_head
    for li in range(tiny_enc.n_layers):
        lin = tiny_enc.module(li, "key")
        W, b = lin.weight.detach().double().numpy(), lin.bias.detach().double().numpy()
        for h in range(tiny_enc.n_heads):
            y = E @ W[h * dh : (h + 1) * dh].T + b[h * dh : (h + 1) * dh]
            ref = (np.linalg.norm(y, axis=1) / math.sqrt(dh)) / (np.linalg.norm(E, axis=1) / math.sqrt(d))
            np.testing.assert_allclose(s.psi_k[li, h], ref, rtol=2e-5)
    # without biases psi does not depend on the length of x; with them it does
    plain = mixlib.norm_stretch(tiny_enc, X=E.astype(np.float32))
    np.testing.assert_allclose(mixlib.norm_stretch(tiny_enc, X=(3 * E).astype(np.float32)).psi_qkv, plain.psi_qkv, rtol=1e-5)
    assert not np.allclose(mixlib.norm_stretch(tiny_enc, X=(3 * E).astype(np.float32), bias=True).psi_qkv, s.psi_qkv, rtol=1e-3)
    with pytest.raises(TypeError, match="bias"):
        mixlib.norm_stretch(tiny_enc, X=E.astype(np.float32), bias="yes")


def test_bias_rank_correlation_vs_scipy(tiny_enc):
    from scipy.stats import spearmanr

    plain = mixlib.norm_stretch(tiny_enc)
    biased = mixlib.norm_stretch(tiny_enc, bias=True)
    rho = mixlib.bias_rank_correlation(plain, biased)
    assert rho.shape == (tiny_enc.n_layers, tiny_enc.n_heads)
    ok = np.isfinite(plain.psi_qkv).all(axis=(0, 1))
    for li in range(tiny_enc.n_layers):
        for h in range(tiny_enc.n_heads):
            ref = spearmanr(plain.psi_qkv[li, h, ok], biased.psi_qkv[li, h, ok]).statistic
            assert rho[li, h] == pytest.approx(ref, abs=1e-9)
    rho_v = mixlib.bias_rank_correlation(plain, biased, which="v")
    assert rho_v[0, 0] == pytest.approx(spearmanr(plain.psi_v[0, 0, ok], biased.psi_v[0, 0, ok]).statistic, abs=1e-9)
    with pytest.raises(ValueError, match="second"):
        mixlib.bias_rank_correlation(biased, plain)
    with pytest.raises(ValueError, match="differ"):
        mixlib.bias_rank_correlation(mixlib.norm_stretch(tiny_enc, layers=0), biased)


def test_eigen_alignment_vs_eigh(tiny_enc):
    from mixlib.stretch import eigen_alignment

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, tiny_enc.d_model)).astype(np.float32)
    X[7] = 0.0  # a zero vector: NaN ψ, never among the top
    st = mixlib.norm_stretch(tiny_enc, X=X)
    got = eigen_alignment(tiny_enc, st, X, top=25)
    assert len(got) == 3 * tiny_enc.n_layers * tiny_enc.n_heads and not got.isna().any().any()
    dh = tiny_enc.d_head
    for proj, layer, head in [("query", 0, 1), ("value", 1, 3)]:
        P = tiny_enc.projection(layer, proj)[0].double().numpy()[head * dh:(head + 1) * dh]  # (d', D)
        lam, U = np.linalg.eigh(P.T @ P)  # eigenvalues ascending; the top eigenvector is the last column
        lam, U = lam[::-1][:dh], U[:, ::-1][:, :dh]
        psi = st.get(proj[0])[st.index(layer), head]
        best = [i for i in np.argsort(-np.nan_to_num(psi, nan=-np.inf))[:25]]
        assert 7 not in best
        u = X[best] / np.linalg.norm(X[best], axis=1, keepdims=True)
        c = u @ U  # (25, d')
        row = got[(got["projection"] == proj) & (got["layer"] == layer) & (got["head"] == head)].iloc[0]
        assert row["top_cos"] == pytest.approx(np.abs(c[:, 0]).mean(), rel=1e-6)
        assert row["top_share"] == pytest.approx((lam[0] * c[:, 0] ** 2 / (c**2 @ lam)).mean(), rel=1e-6)
        assert row["top_share_rand"] == pytest.approx(lam[0] / lam.sum(), rel=1e-6)
        assert row["row_share"] == pytest.approx((c**2).sum(1).mean(), rel=1e-6)
        assert row["lam21"] == pytest.approx(lam[1] / lam[0], rel=1e-6)
    # vectors along one head's top eigenvector: that head's top vectors are them, at |cos| 1
    b = mixlib.stretch_bounds(tiny_enc)
    Y = np.r_[rng.standard_normal((50, tiny_enc.d_model)), np.repeat(b.top_vectors[0, 0, 2][None], 5, 0)].astype(np.float32)
    one = eigen_alignment(tiny_enc, mixlib.norm_stretch(tiny_enc, X=Y, layers=0), Y, top=5)
    assert one.query("projection == 'query' and head == 2")["top_cos"].iloc[0] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="expected"):
        eigen_alignment(tiny_enc, st, X[:10])
    with pytest.raises(ValueError, match="top="):
        eigen_alignment(tiny_enc, st, X, top=0)
