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
