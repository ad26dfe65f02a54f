"""Analysis A (mixlib.mixing) against independent computations.

The reference here is the paper's decomposition written out the slow way: for
one sequence without padding, every f_j(x_i) is built as an (n, n, d) tensor
from the model's parameters (per-head slices of W_O, explicit softmax), the
LayerNorm is applied to each term (eq. 4-7), and norms/ratios are taken from
those terms. The layer inputs x come from the model's own
``output_hidden_states``; the attention weights are also checked against
``output_attentions``; the LayerNorm outputs against a hook of the test's own.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

import mixlib
from mixlib import mixing as mx
from mixlib.mixing import forward as mx_forward
from mixlib.mixing import kernel as mx_kernel
from mixlib.data import tokenize
from mixlib.plots import CATEGORY_ORDER

from conftest import make_random_encoder

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Tokyo is the capital of Japan, and Kyoto was the old capital.",
    "Short one.",
]


@pytest.fixture(scope="module")
def roberta_enc():
    return make_random_encoder(model_type="roberta", layers=2, heads=4, d=64, seed=3)


# ---------------------------------------------------------------------------
# the slow reference
# ---------------------------------------------------------------------------


@torch.no_grad()
def naive_sequence(enc, ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Everything decompose returns, for one unpadded sequence, computed with (n, n, d) tensors.

    Returns a dict of (L, n) tensors (norms, ratios), (L, H, n) ``alpha_self`` and
    (L, n, D) vectors, plus ``ln`` = F.layer_norm of the reconstructed LayerNorm input.
    """
    kw = {"input_ids": ids[None]}
    if token_type_ids is not None:
        kw["token_type_ids"] = token_type_ids[None]
    hidden = enc.model(**kw, output_hidden_states=True).hidden_states
    H, D = enc.n_heads, enc.d_model
    dh = D // H
    per_layer: dict[str, list[torch.Tensor]] = {}
    for layer in range(enc.n_layers):
        x = hidden[layer][0]  # (n, D)
        n = x.shape[0]

        def lin(role, z):
            m = enc.module(layer, role)
            return F.linear(z, m.weight, m.bias)

        q = lin("query", x).view(n, H, dh)
        k = lin("key", x).view(n, H, dh)
        v = lin("value", x).view(n, H, dh)
        alpha = torch.softmax(torch.einsum("jhc,ihc->hji", q, k) / math.sqrt(dh), dim=-1)  # (H, n, n): alpha[h, j, i]
        w_o = enc.module(layer, "attn_out").weight  # (D, D)
        b_o = enc.module(layer, "attn_out").bias  # (D,)
        f_head = torch.stack([v[:, h] @ w_o[:, h * dh : (h + 1) * dh].T for h in range(H)])  # (H, n, D): f^h(x_i)
        f = torch.einsum("hji,hid->jid", alpha, f_head)  # (n, n, D): f_j(x_i)
        y = x + f.sum(dim=1) + b_o  # (n, D): the LayerNorm input
        ln = enc.module(layer, "attn_norm")
        s = torch.sqrt(((y - y.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + ln.eps)  # (n, 1)

        def g(z, s_=s):  # z: (..., n, D) or (n, D)
            return (z - z.mean(-1, keepdim=True)) / s_ * ln.weight

        eye = torch.eye(n, dtype=torch.bool)
        g_f = g(f.transpose(0, 1)).transpose(0, 1)  # (n, n, D): g applied to every f_j(x_i) with s(y_j)
        mix = g_f.masked_fill(eye[..., None], 0.0).sum(dim=1)  # eq. 4
        keep_attn = g_f[eye]  # eq. 5
        keep_res = g(x)  # eq. 6
        bias = g(b_o.expand(n, D)) + ln.bias  # eq. 7 with b_O made explicit
        f_others = f.masked_fill(eye[..., None], 0.0).sum(dim=1)
        f_self = f[eye]
        nm, nka, nr, nk = f_others.norm(dim=-1), f_self.norm(dim=-1), x.norm(dim=-1), (f_self + x).norm(dim=-1)
        nml, nkal, nrl, nkl = mix.norm(dim=-1), keep_attn.norm(dim=-1), keep_res.norm(dim=-1), (keep_attn + keep_res).norm(dim=-1)
        a_self = alpha.diagonal(dim1=-2, dim2=-1)  # (H, n)
        row = {
            "mix": mix, "keep_attn": keep_attn, "keep_res": keep_res, "bias": bias,
            "ln": F.layer_norm(y, (D,), ln.weight, ln.bias, ln.eps),
            "ratio": nml / (nml + nkl), "attnres_n": nm / (nm + nk), "attn_n": nm / (nm + nka),
            "attn_w": 1 - a_self.mean(0), "attnres_w": (1 - a_self.mean(0)) / 2,
            "norm_mix": nm, "norm_keep_attn": nka, "norm_res": nr, "norm_keep": nk,
            "norm_mix_ln": nml, "norm_keep_attn_ln": nkal, "norm_res_ln": nrl, "norm_keep_ln": nkl,
            "alpha_self": a_self,
        }
        for key, val in row.items():
            per_layer.setdefault(key, []).append(val)
    return {k: torch.stack(v) for k, v in per_layer.items()}


def _check_against_naive(enc, m: mx.Mixing, batch: dict, *, atol_vec: float = 1e-4, atol_ratio: float = 2e-5) -> None:
    for b in range(m.n_sequences):
        real = batch["attention_mask"][b].bool()
        ids = batch["input_ids"][b][real]
        tt = batch["token_type_ids"][b][real] if "token_type_ids" in batch else None
        ref = naive_sequence(enc, ids, tt)
        n = int(real.sum())
        for name in mx.METRICS:
            got = getattr(m, name)[:, b][:, real]
            torch.testing.assert_close(got, ref[name], atol=atol_ratio if name in mx.RATIO_METRICS else 1e-4, rtol=1e-4, msg=name)
        torch.testing.assert_close(m.alpha_self[:, b][..., real], ref["alpha_self"], atol=1e-5, rtol=1e-4)
        for name in mx.VECTOR_FIELDS:
            torch.testing.assert_close(getattr(m, name)[:, b][:, real], ref[name], atol=atol_vec, rtol=1e-4, msg=name)
        # the reference's own LayerNorm of its reconstructed input equals its four terms (the paper's eq. 3)
        torch.testing.assert_close(ref["mix"] + ref["keep_attn"] + ref["keep_res"] + ref["bias"], ref["ln"], atol=atol_vec, rtol=1e-4)
        # padding holds NaN
        assert torch.isnan(m.ratio[:, b][:, ~real]).all()
        assert n == len(m.tokens(b))


# ---------------------------------------------------------------------------
# exactness and agreement
# ---------------------------------------------------------------------------


def test_matches_naive_tiny(tiny_enc):
    batch = mixlib.mask_tokens(tiny_enc, TEXTS, seed=1)
    m = mixlib.decompose(tiny_enc, batch, progress=False)
    assert m.layers == (0, 1) and m.ratio.shape == (2, 3, batch["input_ids"].shape[1])
    assert m.mix.shape == (2, 3, batch["input_ids"].shape[1], 64)
    _check_against_naive(tiny_enc, m, batch)


def test_matches_naive_packaged(packaged_enc):
    batch = mixlib.mask_tokens(packaged_enc, TEXTS[:2], seed=0)
    m = mixlib.decompose(packaged_enc, batch, progress=False)
    assert m.n_layers == 6
    _check_against_naive(packaged_enc, m, batch, atol_vec=2e-4)


def test_matches_naive_roberta_and_pairs(roberta_enc):
    batch = tokenize(roberta_enc, [("Is it raining?", "No, it is sunny today."), ("Yes.", "Fine.")])
    m = mixlib.decompose(roberta_enc, batch, progress=False)
    _check_against_naive(roberta_enc, m, batch)


def test_exact_on_every_layer_against_own_hook(packaged_enc):
    """mix + keep_attn + keep_res + bias equals the LayerNorm output captured by a hook of the test's own."""
    batch = tokenize(packaged_enc, TEXTS)
    captured = {}
    handles = [
        packaged_enc.module(layer, "attn_norm").register_forward_hook(lambda mod, a, out, layer=layer: captured.__setitem__(layer, out.detach().clone()))
        for layer in range(packaged_enc.n_layers)
    ]
    try:
        m = mixlib.decompose(packaged_enc, batch, progress=False)
    finally:
        for h in handles:
            h.remove()
    real = batch["attention_mask"].bool()
    assert len(captured) == packaged_enc.n_layers
    recon = m.reconstruct()  # (L, B, N, D)
    for layer in range(packaged_enc.n_layers):
        err = (recon[layer][real] - captured[layer][real]).abs().max().item()
        assert err <= 1e-4, (layer, err)
    assert m.max_error.shape == (6,) and (m.max_error <= 1e-4).all() and (m.max_error > 0).any()
    assert (m.max_attention_error <= 1e-4).all()
    # the hooks were removed: the model has none left
    for layer in range(packaged_enc.n_layers):
        for role in ("query", "key", "value", "attn_out", "attn_norm"):
            assert not packaged_enc.module(layer, role)._forward_hooks


def test_attn_w_from_output_attentions(packaged_enc):
    """Attn-W from the model's own attention probabilities (independent of the hooked Q, K)."""
    batch = tokenize(packaged_enc, TEXTS)
    m = mixlib.decompose(packaged_enc, batch, vectors=False, progress=False)
    with torch.no_grad():
        att = packaged_enc.model(**batch, output_attentions=True).attentions  # L x (B, H, N, N)
    real = batch["attention_mask"].bool()
    for layer, a in enumerate(att):
        diag = a.diagonal(dim1=-2, dim2=-1)  # (B, H, N)
        torch.testing.assert_close(m.attn_w[layer][real], (1 - diag.mean(1))[real], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(m.alpha_self[layer].transpose(1, 2)[real], diag.transpose(1, 2)[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(m.attnres_w, m.attn_w / 2, equal_nan=True)


def test_ratios_in_range_and_consistent(packaged_enc):
    m = mixlib.decompose(packaged_enc, TEXTS, progress=False)
    real = m.real
    for name in mx.RATIO_METRICS:
        v = getattr(m, name)[:, real]
        assert torch.isfinite(v).all() and (v >= 0).all() and (v <= 1).all(), name
    # the ratio is what its definition says, from the stored vectors
    nm = m.mix.norm(dim=-1)
    nk = (m.keep_attn + m.keep_res).norm(dim=-1)
    torch.testing.assert_close(m.ratio[:, real], (nm / (nm + nk))[:, real], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(m.norm_res_ln[:, real], m.keep_res.norm(dim=-1)[:, real], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------
# padding, chunks, layers, vectors
# ---------------------------------------------------------------------------


def test_padding_invariance(tiny_enc):
    alone = mixlib.decompose(tiny_enc, [TEXTS[2]], progress=False)
    padded = mixlib.decompose(tiny_enc, [TEXTS[1], TEXTS[2]], progress=False)
    n = alone.n_tokens
    assert padded.n_tokens > n
    for name in (*mx.METRICS, *mx.VECTOR_FIELDS):
        torch.testing.assert_close(getattr(padded, name)[:, 1, :n], getattr(alone, name)[:, 0], atol=1e-5, rtol=1e-5, msg=name)
        assert torch.isnan(getattr(padded, name)[:, 1, n:]).all(), name
    assert (padded.categories[1, n:] == "[PAD]").all()


def test_chunks_and_blocks_equal_one_batch(tiny_enc, monkeypatch):
    one = mixlib.decompose(tiny_enc, TEXTS, batch_size=32, progress=False)
    chunked = mixlib.decompose(tiny_enc, TEXTS, batch_size=1, progress=False)
    monkeypatch.setattr(mx_kernel, "BLOCK_TOKENS", 1)  # the per-token part one sequence at a time
    blocked = mixlib.decompose(tiny_enc, TEXTS, batch_size=2, progress=False)
    blocked_novec = mixlib.decompose(tiny_enc, TEXTS, batch_size=2, vectors=False, progress=False)
    for name in (*mx.METRICS, *mx.VECTOR_FIELDS):
        torch.testing.assert_close(getattr(chunked, name), getattr(one, name), atol=1e-5, rtol=1e-5, equal_nan=True, msg=name)
        torch.testing.assert_close(getattr(blocked, name), getattr(one, name), atol=1e-5, rtol=1e-5, equal_nan=True, msg=name)
    for name in mx.METRICS:
        torch.testing.assert_close(getattr(blocked_novec, name), getattr(one, name), atol=1e-5, rtol=1e-5, equal_nan=True, msg=name)
    assert torch.equal(chunked.input_ids, one.input_ids)
    assert (blocked.max_error <= 1e-4).all()


def test_layer_subset(tiny_enc):
    full = mixlib.decompose(tiny_enc, TEXTS, progress=False)
    sub = mixlib.decompose(tiny_enc, TEXTS, layers=[1], progress=False)
    assert sub.layers == (1,) and sub.n_layers == 1 and sub.row(1) == 0
    torch.testing.assert_close(sub.ratio[0], full.ratio[1], equal_nan=True)
    torch.testing.assert_close(sub.mix[0], full.mix[1], equal_nan=True)
    first = mixlib.decompose(tiny_enc, TEXTS, layers=0, progress=False)
    torch.testing.assert_close(first.ratio[0], full.ratio[0], equal_nan=True)
    with pytest.raises(ValueError, match="not analysed"):
        sub.row(0)


@pytest.mark.parametrize("layers", [2, -1, [0, 5], [0, 0], []])
def test_layer_out_of_range(tiny_enc, layers):
    with pytest.raises(ValueError, match="out of range|duplicates|empty"):
        mixlib.decompose(tiny_enc, TEXTS, layers=layers)


def test_vectors_option(tiny_enc, monkeypatch):
    m = mixlib.decompose(tiny_enc, TEXTS, vectors=False, progress=False)
    assert m.mix is None and not m.has_vectors and m.ratio is not None
    with pytest.raises(ValueError, match="not kept"):
        m.reconstruct()
    ref = mixlib.decompose(tiny_enc, TEXTS, vectors=True, progress=False)
    torch.testing.assert_close(m.ratio, ref.ratio, equal_nan=True)

    monkeypatch.setattr(mx_forward, "VECTOR_LIMIT_BYTES", 1000)
    with pytest.warns(UserWarning, match="keeping only norms and ratios"):
        auto = mixlib.decompose(tiny_enc, TEXTS, progress=False)
    assert auto.mix is None
    monkeypatch.setattr(mx_forward, "_available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match="vectors=False"):
        mixlib.decompose(tiny_enc, TEXTS, vectors=True, progress=False)
    with pytest.raises(TypeError, match="vectors"):
        mixlib.decompose(tiny_enc, TEXTS, vectors="yes")


def test_progress_bar(tiny_enc, capsys):
    mixlib.decompose(tiny_enc, TEXTS, batch_size=1, progress=True)
    assert "decompose" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():  # pragma: no cover - runs where a GPU is present
    cpu = make_random_encoder(seed=5)
    gpu = make_random_encoder(seed=5)
    gpu = mixlib.Encoder.from_model(gpu.model, gpu.tokenizer, name="gpu", device="cuda")
    a = mixlib.decompose(cpu, TEXTS, progress=False)
    b = mixlib.decompose(gpu, TEXTS, progress=False)
    assert b.ratio.device.type == "cpu" and b.mix.device.type == "cpu"
    torch.testing.assert_close(b.ratio, a.ratio, atol=1e-4, rtol=1e-4, equal_nan=True)


# ---------------------------------------------------------------------------
# the self-checks fail loudly
# ---------------------------------------------------------------------------


def _hide_attention_weights(enc):
    """Hooks that make every self-attention module return no weights (as SDPA or older transformers do)."""
    return [enc.module(layer, "self_attn").register_forward_hook(lambda mod, args, out: (out[0], None))
            for layer in range(enc.n_layers)]


@pytest.mark.parametrize("weights", ["the model's own", "recomputed from Q and K"])
def test_self_check_catches_dropout(weights, monkeypatch):
    """In train mode, attention dropout fails the attention check, whether the weights come from the model or not
    (the check behind the refusal of a model in train mode, mixlib.models.check_eval, switched off here)."""
    enc = make_random_encoder(seed=7)  # attention dropout 0.1
    handles = _hide_attention_weights(enc) if weights.startswith("recomputed") else []
    enc.model.train()
    try:
        with pytest.raises(ValueError, match=r"decompose: enc.model is in train mode.*enc\.model\.eval\(\)"):
            mixlib.decompose(enc, TEXTS, progress=False)
        monkeypatch.setattr("mixlib.models.check_eval", lambda enc, what: None)
        torch.manual_seed(0)
        with pytest.raises(RuntimeError, match=r"layer 0: attention weights.*enc\.model\.eval\(\)"):
            mixlib.decompose(enc, TEXTS, progress=False)
    finally:
        enc.model.eval()
        for h in handles:
            h.remove()
    assert not enc.module(0, "attn_norm")._forward_hooks  # hooks removed after the error


def test_every_analysis_that_runs_the_model_refuses_train_mode(tiny_enc):
    """Issue 53: mixing_conventions returned numbers moved by dropout (up to 4 points between runs) where decompose
    and context_maps refused; one check (mixlib.models.check_eval) now serves every entry point."""
    import copy
    import dataclasses

    from mixlib.course.sentences import sentence_vectors_by_layer
    from mixlib.positional import token_attention

    enc = dataclasses.replace(tiny_enc, model=copy.deepcopy(tiny_enc.model))
    enc.model.encoder.layer[1].attention.train()  # one submodule is enough to make the numbers random
    batch = tokenize(enc, TEXTS[:2])
    for name, run in (("decompose", lambda: mixlib.decompose(enc, batch, progress=False)),
                      ("context_maps", lambda: mixlib.context_maps(enc, batch)),
                      ("mixing_conventions", lambda: mx.mixing_conventions(enc, batch)),
                      ("token_attention", lambda: token_attention(enc, n=4, n_seqs=2)),
                      ("sentence_vectors_by_layer", lambda: sentence_vectors_by_layer(enc, ["A text."]))):
        with pytest.raises(ValueError, match=rf"^{name}: enc.model is in train mode \(encoder.layer.1.attention"):
            run()
    enc.model.eval()
    mx.mixing_conventions(enc, batch)  # in eval mode: fine


def test_a_batch_not_padded_as_the_tokenizer_pads_is_refused(tiny_enc):
    """Issue 53: padding or an attention mask other than the tokenizer's changed per-text numbers silently."""
    batch = tokenize(tiny_enc, TEXTS[:3])
    assert (batch["attention_mask"] == 0).any()  # texts of different lengths: padding to check
    b = int(torch.nonzero((batch["attention_mask"] == 0).any(1))[0])
    n = int(batch["attention_mask"][b].sum())
    cases = []
    counted = {k: v.clone() for k, v in batch.items()}
    counted["attention_mask"][b] = 1  # padding counted as real tokens
    cases.append(("the pad token where attention_mask is 1", counted))
    hidden = {k: v.clone() for k, v in batch.items()}
    hidden["attention_mask"][b, n - 1] = 0  # a real token hidden: the mask no longer matches the ids
    cases.append(("padding (attention_mask 0) that is not the pad token", hidden))
    left = {k: v.clone() for k, v in batch.items()}
    for k in left:
        left[k][b] = left[k][b].roll(left[k].shape[1] - n)
    cases.append(("not padded on the right", left))
    hole = {k: v.clone() for k, v in batch.items()}
    hole["attention_mask"][b, 1] = 0
    cases.append(("not padded on the right", hole))
    for message, bad in cases:
        for run in (lambda: mixlib.decompose(tiny_enc, bad, progress=False), lambda: mixlib.context_maps(tiny_enc, bad),
                    lambda: mx.mixing_conventions(tiny_enc, bad)):
            with pytest.raises(ValueError, match=rf"sequence {b} of the batch .*{re.escape(message)}"):
                run()


def test_self_check_catches_wrong_layernorm_output():
    enc = make_random_encoder(seed=8)
    # a hook registered before decompose's own shifts what the LayerNorm of layer 1 returns
    h = enc.module(1, "attn_norm").register_forward_hook(lambda mod, a, out: out + 1e-2)
    try:
        with pytest.raises(RuntimeError, match=r"layer 1: mix \+ keep_attn \+ keep_res \+ bias differs"):
            mixlib.decompose(enc, TEXTS, progress=False)
    finally:
        h.remove()


def _rolled_head_w_o(v, a_self, w_o, tmp, out):
    """Fault: head h's alpha^h_jj v^h_j goes through the W_O slice of head h+1."""
    b, N, D = v.shape
    H = a_self.shape[-1]
    self_ctx = (v.view(b, N, H, D // H) * a_self.unsqueeze(-1)).roll(1, dims=2)
    return (self_ctx.reshape(b * N, D) @ w_o.t()).view(b, N, D)


def _transposed_w_o(v, a_self, w_o, tmp, out):
    """Fault: W_O used as stored (out x in) instead of transposed."""
    b, N, D = v.shape
    H = a_self.shape[-1]
    self_ctx = v.view(b, N, H, D // H) * a_self.unsqueeze(-1)
    return (self_ctx.reshape(b * N, D) @ w_o).view(b, N, D)


def _token_off_by_one(v, a_self, w_o, tmp, out):
    """Fault: alpha^h_jj multiplies the value of the previous token, v_{j-1} (an off-by-one on the token axis)."""
    b, N, D = v.shape
    H = a_self.shape[-1]
    self_ctx = v.roll(1, dims=1).view(b, N, H, D // H) * a_self.unsqueeze(-1)
    return (self_ctx.reshape(b * N, D) @ w_o.t()).view(b, N, D)


@pytest.mark.parametrize("fault", [_rolled_head_w_o, _transposed_w_o, _token_off_by_one], ids=["wrong-head", "transposed", "token-off-by-one"])
def test_split_check_catches_wrong_self_part(fault, monkeypatch):
    """Each fault passes the reconstruction check (the remainder absorbs it) but not the split check."""
    enc = make_random_encoder(seed=11)
    batch = tokenize(enc, TEXTS)
    good = mixlib.decompose(enc, batch, progress=False)
    assert (good.max_split_error <= 1e-4).all() and (good.max_split_error > 0).any()

    # with the split check switched off (a probe of zeros sees nothing), the fault slips through the other two
    # checks and moves the ratio: this is why the split check exists
    real_probe = mx_forward.split_probe
    monkeypatch.setattr(mx_kernel, "_self_part", fault)
    monkeypatch.setattr(mx_forward, "split_probe", lambda mod, h: tuple(torch.zeros_like(t) for t in real_probe(mod, h)))
    wrong = mixlib.decompose(enc, batch, progress=False)
    moved = float((wrong.ratio - good.ratio).abs().nan_to_num().max())
    assert moved > 1e-3, moved
    assert (wrong.max_error <= 1e-4).all()  # the reconstruction check is blind to it

    monkeypatch.setattr(mx_forward, "split_probe", real_probe)
    with pytest.raises(RuntimeError, match=r"layer 0: f_j\(x_j\) or sum_\{i!=j\} f_j\(x_i\) differs"):
        mixlib.decompose(enc, batch, progress=False)


def test_split_check_catches_forgotten_b_o(monkeypatch):
    """Fault: b_O left in the attention output (and out of the bias): mix + keep + bias still add up."""
    enc = make_random_encoder(seed=12)
    batch = tokenize(enc, TEXTS)
    good = mixlib.decompose(enc, batch, progress=False)
    real_projection = type(enc).projection

    def no_b_o(self, layer, role):
        w, b = real_projection(self, layer, role)
        return (w, None) if role == "attn_out" else (w, b)

    monkeypatch.setattr(type(enc), "projection", no_b_o)  # the Encoder is frozen: patch its class for this test
    real_probe = mx_forward.split_probe
    monkeypatch.setattr(mx_forward, "split_probe", lambda mod, h: tuple(torch.zeros_like(t) for t in real_probe(mod, h)))
    wrong = mixlib.decompose(enc, batch, progress=False)
    assert (wrong.max_error <= 1e-4).all()
    assert float((wrong.ratio - good.ratio).abs().nan_to_num().max()) > 1e-3
    monkeypatch.setattr(mx_forward, "split_probe", real_probe)
    with pytest.raises(RuntimeError, match=r"layer 0: f_j\(x_j\) or sum"):
        mixlib.decompose(enc, batch, progress=False)


def test_split_probe_is_w_o_transposed_per_head(tiny_enc):
    """The probe against a direct computation: (c W_O^T) . u == sum_h c_h . p_h for a random context c."""
    mod = tiny_enc.module(1, "attn_out")
    u, p_heads = mx.split_probe(mod, tiny_enc.n_heads)
    assert u.shape == (tiny_enc.d_model,) and abs(float(u.norm()) - 1.0) < 1e-6
    dh = tiny_enc.d_model // tiny_enc.n_heads
    for h in range(tiny_enc.n_heads):  # each column lives on its head's coordinates only
        outside = torch.ones(tiny_enc.d_model, dtype=torch.bool)
        outside[h * dh:(h + 1) * dh] = False
        assert (p_heads[outside, h] == 0).all()
    u2, p2 = mx.split_probe(mod.weight, tiny_enc.n_heads)  # the weight alone gives the same probe
    assert torch.equal(u, u2) and torch.equal(p_heads, p2)
    c = torch.randn(5, tiny_enc.d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        direct = (mod(c) - mod.bias) @ u
    torch.testing.assert_close(c @ p_heads.sum(1), direct, atol=1e-5, rtol=1e-5)


def test_split_error_small_on_trained_model(packaged_enc):
    m = mixlib.decompose(packaged_enc, TEXTS, vectors=False, progress=False)
    assert m.max_split_error.shape == (packaged_enc.n_layers,)
    assert (m.max_split_error <= 1e-4).all() and (m.max_split_error > 0).any()


def test_weights_recomputed_from_q_and_k_when_the_model_gives_none(tiny_enc, monkeypatch):
    """The model's own attention weights are used when it returns them; otherwise they are recomputed, same result."""
    seen = []
    real = mx_forward.decompose_layer

    def spy(*args, **kwargs):
        seen.append(kwargs.get("alpha") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(mx_forward, "decompose_layer", spy)
    own = mixlib.decompose(tiny_enc, TEXTS, progress=False)
    assert seen == [True] * tiny_enc.n_layers
    seen.clear()
    handles = _hide_attention_weights(tiny_enc)
    try:
        recomputed = mixlib.decompose(tiny_enc, TEXTS, progress=False)
    finally:
        for h in handles:
            h.remove()
    assert seen == [False] * tiny_enc.n_layers
    for name in ("ratio", "norm_mix", "norm_keep_ln", "alpha_self", "mix", "keep_attn"):
        torch.testing.assert_close(getattr(recomputed, name), getattr(own, name), atol=1e-6, rtol=1e-5, equal_nan=True)
    assert (recomputed.max_attention_error <= 1e-4).all()
    with pytest.raises(ValueError, match="alpha"):  # neither the weights nor Q and K: a clear error
        x = torch.zeros(1, 2, tiny_enc.d_model)
        mx.decompose_layer(x, None, None, x, x, x, x, x, torch.zeros(1, 2), torch.eye(tiny_enc.d_model), None,
                           torch.ones(tiny_enc.d_model), torch.zeros(tiny_enc.d_model), 1e-12, tiny_enc.n_heads)


def _one_token_wrong_head(v, a_self, w_o, tmp, out):
    """Fault on one token only: token 3 of the last sequence takes head h's W_O slice for head h+1."""
    b, N, D = v.shape
    H = a_self.shape[-1]
    self_ctx = v.view(b, N, H, D // H) * a_self.unsqueeze(-1)
    self_ctx[-1, 3] = self_ctx[-1, 3].roll(1, dims=0)
    return (self_ctx.reshape(b * N, D) @ w_o.t()).view(b, N, D)


def test_split_check_catches_a_fault_on_one_token(monkeypatch):
    """Every token is checked (no sampling): a fault on one token of one sequence still fails loudly."""
    enc = make_random_encoder(seed=13)
    batch = tokenize(enc, TEXTS)
    good = mixlib.decompose(enc, batch, progress=False)
    real_probe = mx_forward.split_probe
    monkeypatch.setattr(mx_kernel, "_self_part", _one_token_wrong_head)  # the 3 sequences are one block
    monkeypatch.setattr(mx_forward, "split_probe", lambda mod, h: tuple(torch.zeros_like(t) for t in real_probe(mod, h)))
    wrong = mixlib.decompose(enc, batch, progress=False)
    moved = (wrong.ratio - good.ratio).abs().nan_to_num()  # (L, B, N)
    assert float(moved[:, -1, 3].min()) > 1e-4  # the fault moves that token's ratio on every layer ...
    moved[:, -1, 3] = 0
    assert float(moved.max()) == 0.0  # ... and nothing else
    assert (wrong.max_error <= 1e-4).all()
    monkeypatch.setattr(mx_forward, "split_probe", real_probe)
    with pytest.raises(RuntimeError, match=r"layer 0: f_j\(x_j\) or sum"):
        mixlib.decompose(enc, batch, progress=False)


def test_each_layers_tensors_are_released_after_its_layer(tiny_enc, monkeypatch):
    """The hooks keep nothing of a finished layer: memory does not grow with the number of layers."""
    import gc
    import weakref

    refs = []
    real = mx_forward.decompose_layer

    def spy(*args, **kwargs):
        gc.collect()
        assert all(r() is None for r in refs), "an earlier layer's value vectors are still held"
        refs.append(weakref.ref(args[3]))  # v
        return real(*args, **kwargs)

    monkeypatch.setattr(mx_forward, "decompose_layer", spy)
    mixlib.decompose(tiny_enc, TEXTS, progress=False)
    assert len(refs) == tiny_enc.n_layers >= 2


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_bad_inputs(tiny_enc):
    with pytest.raises(ValueError, match="empty"):
        mixlib.decompose(tiny_enc, [])
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        mixlib.decompose(tiny_enc, ["fine", 3])
    with pytest.raises(ValueError, match="unexpected key"):
        mixlib.decompose(tiny_enc, {"input_ids": torch.tensor([[101, 102]]), "labels": torch.tensor([[0, 0]])})
    with pytest.raises(ValueError, match="outside"):
        mixlib.decompose(tiny_enc, {"input_ids": torch.tensor([[101, 10**6, 102]])})
    with pytest.raises(ValueError, match="no real token"):
        mixlib.decompose(tiny_enc, {"input_ids": torch.tensor([[101, 102]]), "attention_mask": torch.tensor([[0, 0]])})
    with pytest.raises(TypeError, match="integers"):
        mixlib.decompose(tiny_enc, {"input_ids": torch.tensor([[1.0, 2.0]])})
    with pytest.raises(ValueError, match="batch_size"):
        mixlib.decompose(tiny_enc, TEXTS, batch_size=0)


def test_long_text_truncated_with_warning(tiny_enc):
    long = " ".join(["word"] * 600)
    with pytest.warns(UserWarning, match="truncated to 512"):
        m = mixlib.decompose(tiny_enc, [long, "short text."], vectors=False, progress=False)
    assert m.n_tokens == 512 and (m.max_error <= 1e-4).all()


def test_tokenized_dict_without_mask(tiny_enc):
    ids = tokenize(tiny_enc, [TEXTS[0]])["input_ids"]
    a = mixlib.decompose(tiny_enc, {"input_ids": ids}, progress=False)
    b = mixlib.decompose(tiny_enc, {"input_ids": ids[0].tolist()}, progress=False)  # 1-D list works too
    torch.testing.assert_close(a.ratio, b.ratio)


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


def test_mixing_table_per_sequence_then_mean(tiny_enc):
    batch = mixlib.mask_tokens(tiny_enc, TEXTS + ["A, b. C, d."], seed=2)
    m = mixlib.decompose(tiny_enc, batch, vectors=False, progress=False)
    table = mixlib.mixing_table(m)
    assert list(table.columns) == ["全体", *CATEGORY_ORDER]
    assert list(table.index) == [0, 1] and table.index.name == "layer"
    # independent: pandas groupby on the long frame
    df = m.to_frame(["ratio"])
    assert len(df) == 2 * int(m.real.sum())
    per_seq = df.groupby(["layer", "category", "seq"])["ratio"].mean().groupby(["layer", "category"]).mean() * 100
    for (layer, cat), val in per_seq.items():
        assert table.loc[layer, cat] == pytest.approx(val, rel=1e-6), (layer, cat)
    overall = df.groupby(["layer", "seq"])["ratio"].mean().groupby("layer").mean() * 100
    np.testing.assert_allclose(table["全体"].to_numpy(), overall.to_numpy(), rtol=1e-6)
    # a category present in only some sequences is averaged over those only
    assert (batch["input_ids"] == tiny_enc.tokenizer.convert_tokens_to_ids(",")).any(1).sum() < len(TEXTS) + 1
    # norms are not percent by default; fractions on request
    norms = mixlib.mixing_table(m, metric="norm_res")
    dfn = m.to_frame(["norm_res"])
    expected = dfn.groupby(["layer", "seq"])["norm_res"].mean().groupby("layer").mean()
    np.testing.assert_allclose(norms["全体"].to_numpy(), expected.to_numpy(), rtol=1e-6)
    frac = mixlib.mixing_table(m, percent=False)
    np.testing.assert_allclose(frac.to_numpy() * 100, table.to_numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="unknown metric"):
        mixlib.mixing_table(m, metric="nope")
    with pytest.raises(ValueError, match="by="):
        mixlib.mixing_table(m, by="head")


def test_mixing_table_absent_category_is_nan(tiny_enc):
    m = mixlib.decompose(tiny_enc, ["no mask here"], progress=False)
    table = mixlib.mixing_table(m)
    assert table["[MASK]"].isna().all() and table["句読点"].isna().all()
    assert table["[CLS]"].notna().all()


def test_mixing_summary_pooled(tiny_enc):
    m = mixlib.decompose(tiny_enc, TEXTS, vectors=False, progress=False)
    s = mixlib.mixing_summary(m)
    assert list(s.index) == ["Attn-W", "Attn-N", "AttnRes-W", "AttnRes-N", "AttnResLn-N"]
    assert list(s.columns) == ["mean", "max", "min"]
    df = m.to_frame()
    for metric, name in mx.RATIO_METRICS.items():
        assert s.loc[name, "mean"] == pytest.approx(df[metric].mean() * 100, rel=1e-6)
        assert s.loc[name, "max"] == pytest.approx(df[metric].max() * 100, rel=1e-6)
        assert s.loc[name, "min"] == pytest.approx(df[metric].min() * 100, rel=1e-6)
    assert s.loc["AttnRes-W", "mean"] == pytest.approx(s.loc["Attn-W", "mean"] / 2, rel=1e-6)
    frac = mixlib.mixing_summary(m, percent=False)
    assert frac.loc["AttnResLn-N", "mean"] * 100 == pytest.approx(s.loc["AttnResLn-N", "mean"])


def test_mixing_helpers(tiny_enc):
    m = mixlib.decompose(tiny_enc, TEXTS, progress=False)
    assert m.tokens(0)[0] == "[CLS]" and m.tokens(0)[-1] == "[SEP]"
    assert m.tokens(-1) == m.tokens(2)
    with pytest.raises(IndexError):
        m.tokens(3)
    assert m.categories.shape == tuple(m.input_ids.shape)
    assert m.categories[0, 0] == "[CLS]"
    assert "Mixing(" in repr(m) and m.model_name == tiny_enc.name
    with pytest.raises(ValueError, match="unknown metric"):
        m.metric("bogus")
    assert isinstance(m.to_frame(["ratio"]), pd.DataFrame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixlib.mixing_table(m)  # no RuntimeWarning from NaN handling


# ---------------------------------------------------------------------------
# bootstrap over sequences
# ---------------------------------------------------------------------------


def _resampled_frame(df: pd.DataFrame, counts: np.ndarray) -> pd.DataFrame:
    """The long frame with sequence b repeated counts[b] times, each copy a new sequence id."""
    parts = []
    new_id = 0
    for b, c in enumerate(counts):
        for _ in range(int(c)):
            part = df[df["seq"] == b].copy()
            part["seq"] = new_id
            parts.append(part)
            new_id += 1
    return pd.concat(parts, ignore_index=True)


def test_mixing_table_bootstrap_against_explicit_resamples(tiny_enc):
    texts = TEXTS + ["A, b. C, d.", "One more sentence, with a comma.", "And the last one here."]
    m = mixlib.decompose(tiny_enc, mixlib.mask_tokens(tiny_enc, texts, seed=2), vectors=False, progress=False)
    n_boot = 25
    t = mixlib.mixing_table(m, ci=0.9, n_boot=n_boot, seed=5)
    assert t.columns.names == ["category", "stat"]
    assert list(t.columns.get_level_values(0).unique()) == ["全体", *CATEGORY_ORDER]
    pd.testing.assert_frame_equal(t.xs("estimate", axis=1, level="stat"), mixlib.mixing_table(m), check_names=False)
    # independent: rebuild each resample as a long frame and use the pandas groupby of the official figure
    counts = mx.bootstrap_counts(m.n_sequences, n_boot, 5)
    assert counts.shape == (n_boot, m.n_sequences) and (counts.sum(1) == m.n_sequences).all()
    df = m.to_frame(["ratio"])
    boots = {}
    for r in range(n_boot):
        rs = _resampled_frame(df, counts[r])
        boots[r] = rs.groupby(["layer", "seq"])["ratio"].mean().groupby("layer").mean() * 100
        cat = rs[rs["category"] == "[MASK]"]
        boots[r] = (boots[r], cat.groupby(["layer", "seq"])["ratio"].mean().groupby("layer").mean() * 100)
    overall = np.array([boots[r][0].to_numpy() for r in range(n_boot)])  # (R, L)
    np.testing.assert_allclose(t[("全体", "low")], np.quantile(overall, 0.05, axis=0), rtol=1e-6)
    np.testing.assert_allclose(t[("全体", "high")], np.quantile(overall, 0.95, axis=0), rtol=1e-6)
    mask = np.array([boots[r][1].reindex([0, 1]).to_numpy() for r in range(n_boot)])  # NaN when no [MASK] drawn
    np.testing.assert_allclose(t[("[MASK]", "low")], np.nanquantile(mask, 0.05, axis=0), rtol=1e-6)
    assert (t[("全体", "low")] <= t[("全体", "estimate")] + 1e-9).all() and (t[("全体", "estimate")] <= t[("全体", "high")] + 1e-9).all()
    # seeded: same seed, same interval; another seed, another one
    pd.testing.assert_frame_equal(t, mixlib.mixing_table(m, ci=0.9, n_boot=n_boot, seed=5))
    assert not mixlib.mixing_table(m, ci=0.9, n_boot=n_boot, seed=6).equals(t)
    for bad in (dict(ci=1.0), dict(ci=0), dict(ci="0.9"), dict(ci=0.9, n_boot=3), dict(ci=0.9, seed=-1)):
        with pytest.raises(ValueError):
            mixlib.mixing_table(m, **bad)


def test_mixing_summary_bootstrap(tiny_enc):
    texts = TEXTS + ["A, b. C, d.", "One more sentence, with a comma."]
    m = mixlib.decompose(tiny_enc, texts, vectors=False, progress=False)
    s = mixlib.mixing_summary(m, ci=0.8, n_boot=30, seed=1)
    pd.testing.assert_frame_equal(s.xs("estimate", axis=1, level="stat"), mixlib.mixing_summary(m), check_names=False)
    counts = mx.bootstrap_counts(m.n_sequences, 30, 1)
    df = m.to_frame(["ratio"])
    means = []
    maxes = []
    for r in range(30):
        rs = _resampled_frame(df, counts[r])
        means.append(rs["ratio"].mean() * 100)  # pooled: every token of every layer once
        maxes.append(rs["ratio"].max() * 100)
    assert s.loc["AttnResLn-N", ("mean", "low")] == pytest.approx(np.quantile(means, 0.1), rel=1e-6)
    assert s.loc["AttnResLn-N", ("mean", "high")] == pytest.approx(np.quantile(means, 0.9), rel=1e-6)
    # issue 53: a percentile bootstrap of the max always ends at the estimate (no resample passes it), so
    # max and min get no interval at all rather than one that claims false certainty
    assert np.quantile(maxes, 0.9) == pytest.approx(s.loc["AttnResLn-N", ("max", "estimate")], rel=1e-6)
    assert s.xs("low", axis=1, level="stat")[["max", "min"]].isna().all().all()
    assert s.xs("high", axis=1, level="stat")[["max", "min"]].isna().all().all()


def test_an_interval_resting_on_one_sequence_is_left_out(tiny_enc):
    """Issue 53: a cell resting on one sequence had a zero-width "95%" interval, with no warning."""
    texts = ["A, b. C, d.", "No punctuation here at all", "Neither here"]  # only the first has 句読点
    m = mixlib.decompose(tiny_enc, texts, vectors=False, progress=False)
    with pytest.warns(UserWarning, match=r"interval of 句読点 rests on fewer than 2 sequences"):
        t = mixlib.mixing_table(m, ci=0.95, n_boot=50, seed=0)
    assert t[("句読点", "low")].isna().all() and t[("句読点", "high")].isna().all()
    assert t[("句読点", "estimate")].notna().all()  # the estimate stays
    assert (t[("全体", "high")] > t[("全体", "low")]).all()  # three sequences: a real interval
    one = mixlib.decompose(tiny_enc, texts[:1], vectors=False, progress=False)
    with pytest.warns(UserWarning, match="rests on fewer than 2 sequences"):
        s = mixlib.mixing_summary(one, ci=0.95, n_boot=50, seed=0)
    assert s.xs("low", axis=1, level="stat").isna().all().all()
    with pytest.warns(UserWarning, match=r"interval of layer 0, layer 1"):
        lm = mx.layer_means(one.metric("ratio").numpy(), one.real.numpy(), ci=0.9, n_boot=20)
    assert lm["low"].isna().all() and lm["estimate"].notna().all()


# ---------------------------------------------------------------------------
# conventions and the LayerNorm step by step
# ---------------------------------------------------------------------------


def test_mixing_conventions_against_decompose_and_naive(tiny_enc):
    texts = TEXTS[:2]
    batch = tokenize(tiny_enc, texts)
    m = mixlib.decompose(tiny_enc, batch, progress=False)
    v = mx.mixing_conventions(tiny_enc, batch, batch_size=1)
    real = m.real.numpy()
    # the book's convention and the LayerNorm steps against decompose (a separate implementation)
    np.testing.assert_allclose(v.ratios["book"][:, real], m.ratio.numpy()[:, real], atol=2e-5)
    np.testing.assert_allclose(v.ratios["full_ln"][:, real], m.ratio.numpy()[:, real], atol=2e-5)
    np.testing.assert_allclose(v.ratios["before_ln"][:, real], m.attnres_n.numpy()[:, real], atol=2e-5)
    # a uniform scale changes nothing
    np.testing.assert_allclose(v.ratios["scale_only"][:, real], v.ratios["before_ln"][:, real], atol=1e-6)  # float32 rounding only
    # b_O / beta conventions from decompose's own vectors
    for li in range(m.n_layers):
        beta = tiny_enc.module(li, "attn_norm").bias.detach().numpy()
        g_bo = m.bias[li].numpy() - beta  # (B, N, D)
        mix, keep = m.mix[li].numpy(), (m.keep_attn[li] + m.keep_res[li]).numpy()

        def r(a, b):
            na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
            return (na / (na + nb))[real]

        np.testing.assert_allclose(v.ratios["bo_to_keep"][li][real], r(mix, keep + g_bo), atol=2e-5)
        np.testing.assert_allclose(v.ratios["bo_to_mix"][li][real], r(mix + g_bo, keep), atol=2e-5)
        np.testing.assert_allclose(v.ratios["bias_to_keep"][li][real], r(mix, keep + g_bo + beta), atol=2e-5)
        cosine = (mix * keep).sum(-1) / np.linalg.norm(mix, axis=-1) / np.linalg.norm(keep, axis=-1)
        np.testing.assert_allclose(v.cosines["mix_keep"][li][real], cosine[real], atol=2e-5)
        np.testing.assert_allclose(v.norms["out_ln"][li][real], np.linalg.norm(m.reconstruct()[li].numpy(), axis=-1)[real], rtol=1e-5)
    # b_V W_O moved to the bias: the n x n x d way, with the value bias left out of every f_j(x_i)
    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()]
    hidden = tiny_enc.model(input_ids=ids[None], output_hidden_states=True).hidden_states
    H, D = tiny_enc.n_heads, tiny_enc.d_model
    dh = D // H
    for layer in range(tiny_enc.n_layers):
        x = hidden[layer][0].detach()
        n = x.shape[0]
        mod = {r_: tiny_enc.module(layer, r_) for r_ in ("query", "key", "value", "attn_out", "attn_norm")}
        q = F.linear(x, mod["query"].weight, mod["query"].bias).view(n, H, dh)
        k = F.linear(x, mod["key"].weight, mod["key"].bias).view(n, H, dh)
        v_nob = F.linear(x, mod["value"].weight).view(n, H, dh)  # no b_V
        alpha = torch.softmax(torch.einsum("jhc,ihc->hji", q, k) / math.sqrt(dh), dim=-1)
        w_o = mod["attn_out"].weight
        f = torch.einsum("hji,hid->jid", alpha, torch.stack([v_nob[:, h] @ w_o[:, h * dh:(h + 1) * dh].T for h in range(H)]))
        ctx = torch.einsum("hji,ihc->jhc", alpha, F.linear(x, mod["value"].weight, mod["value"].bias).view(n, H, dh)).reshape(n, D)
        y = x + F.linear(ctx, w_o, mod["attn_out"].bias)
        s = torch.sqrt(y.var(-1, unbiased=False, keepdim=True) + mod["attn_norm"].eps)
        g = lambda z: (z - z.mean(-1, keepdim=True)) / s * mod["attn_norm"].weight  # noqa: E731
        eye = torch.eye(n, dtype=torch.bool)
        g_f = g(f.transpose(0, 1)).transpose(0, 1)
        mix = g_f.masked_fill(eye[..., None], 0.0).sum(1)
        keep = g_f[eye] + g(x)
        expected = (mix.norm(dim=-1) / (mix.norm(dim=-1) + keep.norm(dim=-1))).detach().numpy()
        np.testing.assert_allclose(v.ratios["bv_to_bias"][layer, 0, :n], expected, atol=2e-5)
    # tables: per sequence, then over sequences, as mixing_table
    t = v.table(["book", "before_ln"])
    np.testing.assert_allclose(t["book"], mixlib.mixing_table(m)["全体"], rtol=1e-4)
    np.testing.assert_allclose(v.table(["book"], category="[CLS]")["book"], mixlib.mixing_table(m)["[CLS]"], rtol=1e-4)
    np.testing.assert_allclose(v.table(["mix_raw"])["mix_raw"], mixlib.mixing_table(m, metric="norm_mix")["全体"], rtol=1e-4)  # norms: not percent
    with pytest.raises(ValueError, match="unknown field"):
        v.table(["nope"])
    with pytest.raises(ValueError, match="no sequence"):
        v.table(category="[MASK]")
    assert set(v.ratios) == set(mx.CONVENTIONS) | set(mx.LN_STEPS)


def test_layer_means_and_variants_ci(tiny_enc):
    texts = TEXTS + ["A, b. C, d.", "One more sentence, with a comma."]
    batch = mixlib.mask_tokens(tiny_enc, texts, seed=2)
    m = mixlib.decompose(tiny_enc, batch, vectors=False, progress=False)
    t = mixlib.mixing_table(m, ci=0.9, n_boot=40, seed=3)
    lm = mx.layer_means(m.ratio * 100, m.real, ci=0.9, n_boot=40, seed=3)
    np.testing.assert_allclose(lm["estimate"], t[("全体", "estimate")], rtol=1e-6)
    np.testing.assert_allclose(lm["low"], t[("全体", "low")], rtol=1e-6)
    np.testing.assert_allclose(lm["high"], t[("全体", "high")], rtol=1e-6)
    sel = m.categories == "[MASK]"
    lm_mask = mx.layer_means(m.ratio * 100, m.real, select=sel, ci=0.9, n_boot=40, seed=3)
    np.testing.assert_allclose(lm_mask["high"], t[("[MASK]", "high")], rtol=1e-6)
    v = mx.mixing_conventions(tiny_enc, batch)
    vt = v.table(["book"], ci=0.9, n_boot=40, seed=3)
    np.testing.assert_allclose(vt[("book", "low")], t[("全体", "low")], rtol=1e-4)
    with pytest.raises(ValueError, match=r"\(L, B, N\)"):
        mx.layer_means(np.zeros((2, 3)), m.real)


@pytest.mark.parametrize("atol", [float("nan"), float("inf"), 0.0, -1e-4, True, "1e-4"])
def test_atol_must_be_positive_and_finite(tiny_enc, atol):
    """atol=nan used to fail every self-check and blame the model ("train mode?"); inf switched them off."""
    for analysis in (mixlib.decompose, mixlib.context_maps):
        with pytest.raises(ValueError, match="positive, finite"):
            analysis(tiny_enc, ["The cat sat."], atol=atol)
    assert mixlib.decompose(tiny_enc, ["The cat sat."], atol=1e-3).ratio.shape[0] == tiny_enc.n_layers  # a good one


def _in_dtype(enc, dtype=None, device=None):
    import copy
    import dataclasses

    model = copy.deepcopy(enc.model)
    if device is not None:
        model = model.to_empty(device=device)
    return dataclasses.replace(enc, model=model.to(dtype) if dtype is not None else model)


def test_float64_is_analysed_and_agrees_with_float32(packaged_enc):
    """Issue 20: a float64 model ended in 'expected m1 and m2 to have the same dtype'."""
    texts = ["The cat sat on the mat.", "A short one, with padding after it in the batch."]
    batch = mixlib.tokenize(packaged_enc, texts)
    m32 = mixlib.decompose(packaged_enc, batch)
    enc64 = _in_dtype(packaged_enc, torch.float64)
    m64 = mixlib.decompose(enc64, batch)
    assert m64.max_error.max() < 1e-10 and m64.max_split_error.max() < 1e-10  # exact to float64, not float32
    assert m64.ratio.dtype == torch.float32  # results are float32 whatever the model computes in
    torch.testing.assert_close(m64.ratio, m32.ratio, rtol=0, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(m64.mix, m32.mix, rtol=0, atol=1e-4, equal_nan=True)
    c64, c32 = mixlib.context_maps(enc64, batch), mixlib.context_maps(packaged_enc, batch)
    for name in c32.maps:
        torch.testing.assert_close(c64.maps[name].float(), c32.maps[name].float(), rtol=0, atol=1e-4, equal_nan=True)


def test_mixed_dtypes_are_refused(packaged_enc):
    enc = _in_dtype(packaged_enc)
    enc.module(0, "value").double()
    with pytest.raises(ValueError, match=r"decompose: enc.model mixes dtypes \(torch.float32, torch.float64\)"):
        mixlib.decompose(enc, mixlib.tokenize(packaged_enc, ["The cat sat on the mat."]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_refused_naming_the_dtype(packaged_enc, dtype):
    enc = _in_dtype(packaged_enc, dtype)
    batch = mixlib.tokenize(packaged_enc, ["The cat sat on the mat."])
    for f in (mixlib.decompose, mixlib.context_maps, mixlib.mixing_conventions):
        with pytest.raises(ValueError, match=rf"{f.__name__}: enc.model computes in {dtype}.*enc.model.float\(\)"):
            f(enc, batch)


def test_a_model_on_the_meta_device_is_refused(packaged_enc):
    enc = _in_dtype(packaged_enc, device="meta")
    batch = mixlib.tokenize(packaged_enc, ["The cat sat on the mat."])
    for f in (mixlib.decompose, mixlib.context_maps):
        with pytest.raises(ValueError, match=r"on the meta device \(shapes without values\)"):
            f(enc, batch)


def test_mixing_package_keeps_every_name_where_it_was():
    """mixing.py became a package of one idea a file; every name importable from mixlib.mixing before still is,
    as the same object as in the file that defines it (so patching that file's name patches what runs)."""
    import importlib

    for name in mx.__all__:
        assert getattr(mixlib, name, getattr(mx, name)) is getattr(mx, name), name
    for name in ("_StopForward", "_as_batch", "_first", "_register", "_run_hooked", "check_precision"):  # used by mixlib.measures
        assert callable(getattr(mx, name)), name
    for module, names in {"kernel": ["decompose_layer", "split_probe", "BLOCK_TOKENS"], "forward": ["decompose"],
                          "result": ["Mixing", "METRICS"], "tables": ["mixing_table", "layer_means"],
                          "conventions": ["mixing_conventions", "CONVENTIONS"]}.items():
        sub = importlib.import_module(f"mixlib.mixing.{module}")
        for name in names:
            assert getattr(sub, name) is getattr(mx, name), (module, name)


def test_benchmark_breakdown_times_the_kernels_steps(capsys):
    """benchmarks/bench_mixing.py --quick runs, its per-stage timers find every step they name, and are taken off after."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import bench_mixing
    finally:
        sys.path.pop(0)
    before = {name: getattr(mx_kernel, name) for names in bench_mixing.STAGES.values() for name in names if name != "store"}
    assert bench_mixing.main(["--quick", "--repeats", "1", "--threads", "1", "--no-memory", "--naive-repeats", "0"]) == 0
    out = capsys.readouterr().out
    assert "decompose(vectors=False) / plain forward" in out and "breakdown of one decompose" in out
    for stage in bench_mixing.STAGES:
        assert stage in out
    assert all(getattr(mx_kernel, name) is fn for name, fn in before.items())
    with bench_mixing.stage_timers() as spent:
        mixlib.decompose(make_random_encoder(seed=2), TEXTS, progress=False)
    assert {"_self_part", "_split", "_layernorm_pieces", "_check_attention", "_check_split", "_check_reconstruction", "store"} <= set(spent)
    assert "_attention_weights" not in spent  # the model returned its own weights
