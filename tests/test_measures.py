"""mixlib.measures against a straightforward n x n x d float64 implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mixlib
from mixlib.measures import MEASURES, context_maps, measure_agreement

TEXTS = [("The cat sat on the mat.", "It was [MASK]."), ("A dog barked loudly at night.", "Everyone woke.")]


def naive_maps(enc, batch, *, bias_free_alti=False):
    """Every T_{j,i} built explicitly in float64 from the model's own weights and hidden states.

    ``bias_free_alti``: ALTI's resultant without g1(b_O) + beta1 (mixlib's convention before issue 21)."""
    model = enc.model
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    hs = [h.double() for h in out.hidden_states]
    am = batch["attention_mask"]
    H, D = enc.n_heads, enc.d_model
    dh = D // H
    res = {name: [] for name in MEASURES}
    for layer in range(enc.n_layers):
        x = hs[layer]  # (B, N, D)
        lin = {r: enc.module(layer, r) for r in ("query", "key", "value", "attn_out", "attn_norm", "ffn_in", "ffn_out", "ffn_norm")}
        W = {r: (lin[r].weight.double(), lin[r].bias.double()) for r in ("query", "key", "value", "attn_out", "ffn_in", "ffn_out")}
        q, k, v = (x @ W[r][0].T + W[r][1] for r in ("query", "key", "value"))
        B, N, _ = x.shape
        q, k, v = (t.view(B, N, H, dh).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-1, -2) / dh**0.5
        s = s.masked_fill(am[:, None, None, :] == 0, -1e30)
        alpha = s.softmax(-1)  # (B, H, N, N)
        wo, bo = W["attn_out"]
        y = (alpha @ v).transpose(1, 2).reshape(B, N, D) @ wo.T + bo + x
        g1, beta1 = lin["attn_norm"].weight.double(), lin["attn_norm"].bias.double()
        s1 = torch.sqrt(y.var(-1, unbiased=False, keepdim=True) + lin["attn_norm"].eps)
        z = (y - y.mean(-1, keepdim=True)) / s1 * g1 + beta1
        ffn = torch.nn.functional.gelu(z @ W["ffn_in"][0].T + W["ffn_in"][1]) @ W["ffn_out"][0].T + W["ffn_out"][1]
        y2 = ffn + z
        g2 = lin["ffn_norm"].weight.double()
        s2 = torch.sqrt(y2.var(-1, unbiased=False, keepdim=True) + lin["ffn_norm"].eps)
        per = {name: torch.full((B, N, N), float("nan"), dtype=torch.float64) for name in MEASURES}
        for b in range(B):
            n = int(am[b].sum())
            for j in range(n):
                T = torch.zeros((n, D), dtype=torch.float64)
                for i in range(n):
                    for h in range(H):
                        T[i] += alpha[b, h, j, i] * (v[b, h, i] @ wo.T[h * dh:(h + 1) * dh])
                per["attention"][b, j, :n] = alpha[b, :, j, :n].mean(0)
                per["norm"][b, j, :n] = T.norm(dim=-1)
                T[j] = T[j] + x[b, j]
                G = (T - T.mean(-1, keepdim=True)) / s1[b, j] * g1
                per["attn_res_ln"][b, j, :n] = G.norm(dim=-1)
                # ALTI as its authors' code computes it: the resultant is the first LayerNorm's real output z_j,
                # biases included (g1(b_O) + beta1), which the parts add up to
                bias = (bo - bo.mean()) / s1[b, j] * g1 + beta1
                torch.testing.assert_close(G.sum(0) + bias, z[b, j], rtol=0, atol=1e-4 if z.dtype == torch.float32 else 1e-10)
                yt = G.sum(0) if bias_free_alti else z[b, j]
                c = (yt.abs().sum() - (yt - G).abs().sum(-1)).clamp(min=0)
                per["alti"][b, j, :n] = c / c.sum()
                G2 = (G - G.mean(-1, keepdim=True)) / s2[b, j] * g2
                per["globenc"][b, j, :n] = G2.norm(dim=-1)
        for name in MEASURES:
            res[name].append(per[name])
    return {name: torch.stack(v) for name, v in res.items()}


@pytest.fixture(scope="module")
def case(tiny_enc):
    batch = mixlib.mask_tokens(tiny_enc, TEXTS, rate=0.15, seed=0)
    return tiny_enc, batch


@pytest.mark.parametrize("batch_size", [1, 2])
def test_maps_match_naive_implementation(case, batch_size):
    """batch_size=2 puts both sequences (of different lengths) in one padded chunk."""
    enc, batch = case
    cm = context_maps(enc, batch, batch_size=batch_size)
    ref = naive_maps(enc, batch)
    am = batch["attention_mask"].bool()
    both = am[:, :, None] & am[:, None, :]
    for name in MEASURES:
        got = cm[name].double()
        assert torch.isnan(got[:, ~both]).all(), name
        np.testing.assert_allclose(got[:, both].numpy(), ref[name][:, both].numpy(), rtol=2e-4, atol=2e-5, err_msg=name)
    assert (cm.max_error < 1e-4).all()


def test_maps_match_naive_implementation_in_float64(case, monkeypatch):
    """In float64 the maps are the definitions to rounding: ALTI with the LayerNorm's real output (issue 21).
    One padded chunk, and ALTI's receivers in blocks of 3 tokens (the block loop's boundaries)."""
    import copy
    import dataclasses

    from mixlib import measures

    enc, batch = case
    enc64 = dataclasses.replace(enc, model=copy.deepcopy(enc.model).double())
    n = batch["input_ids"].shape[1]
    monkeypatch.setattr(measures, "BLOCK_ELEMENTS", 3 * n * enc.d_model)
    cm = context_maps(enc64, batch, batch_size=2, atol=1e-10)
    ref = naive_maps(enc64, batch)
    both = batch["attention_mask"].bool()[:, :, None] & batch["attention_mask"].bool()[:, None, :]
    for name in MEASURES:  # the results are float32: agreement to float32 rounding, not to the float32 model's error
        np.testing.assert_allclose(cm[name][:, both].double().numpy(), ref[name][:, both].numpy(), rtol=1e-6, atol=1e-7,
                                   err_msg=name)
    assert (cm.max_error < 1e-10).all()


def test_maps_equal_with_recomputed_attention_weights(case):
    """Where the model returns no attention weights (SDPA, older transformers), they are recomputed: same maps."""
    enc, batch = case
    own = context_maps(enc, batch, batch_size=2)
    handles = [enc.module(layer, "self_attn").register_forward_hook(lambda mod, args, out: (out[0], None))
               for layer in range(enc.n_layers)]
    try:
        recomputed = context_maps(enc, batch, batch_size=2)
    finally:
        for h in handles:
            h.remove()
    for name in MEASURES:
        torch.testing.assert_close(recomputed[name], own[name], atol=1e-6, rtol=1e-5, equal_nan=True, msg=name)


def test_dropout_fails_the_attention_check(tiny_enc):
    import copy
    import dataclasses

    model = copy.deepcopy(tiny_enc.model)
    model.config.attention_probs_dropout_prob = 0.5
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    enc = dataclasses.replace(tiny_enc, model=model.train())
    with pytest.raises(ValueError, match=r"context_maps: enc.model is in train mode"):  # refused before any work
        context_maps(enc, ["The cat sat on the mat."])
    import mixlib.models

    check = mixlib.models.check_eval
    mixlib.models.check_eval = lambda enc, what: None  # the self-check behind that refusal still catches dropout
    try:
        torch.manual_seed(0)
        with pytest.raises(RuntimeError, match=r"attention weights.*eval\(\)"):
            context_maps(enc, ["The cat sat on the mat."])
    finally:
        mixlib.models.check_eval = check


def test_alti_differs_from_its_bias_free_variant(packaged_enc):
    """The convention matters: without g1(b_O) + beta1 in the resultant (mixlib's ALTI before issue 21) the map of
    the real packaged BERT differs by far more than rounding; with it, mixlib's map is the authors' definition.
    The Gram-matrix maps of the real model (large residuals, real gammas) hold in float32 against float64."""
    batch = mixlib.tokenize(packaged_enc, ["The cat sat on the mat."])
    cm = context_maps(packaged_enc, batch)
    ref = naive_maps(packaged_enc, batch)
    authors = ref["alti"].numpy()
    bias_free = naive_maps(packaged_enc, batch, bias_free_alti=True)["alti"].numpy()
    ours = cm["alti"].double().numpy()
    assert np.abs(ours - authors).max() < 1e-4 < 0.05 < np.abs(ours - bias_free).max()
    for name in ("norm", "attn_res_ln", "globenc"):
        np.testing.assert_allclose(cm[name].double().numpy(), ref[name].numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_rows_and_decompose_agree(case):
    """ALTI rows sum to 1; the diagonal of the AttnResLn map is decompose's ||keep_attn + keep_res||."""
    enc, batch = case
    cm = context_maps(enc, batch)
    m = mixlib.decompose(enc, batch)
    for b in range(2):
        n = int(batch["attention_mask"][b].sum())
        for layer in cm.layers:
            np.testing.assert_allclose(cm.map("alti", layer, b).sum(1), 1.0, atol=1e-5)
            np.testing.assert_allclose(np.diag(cm.map("attn_res_ln", layer, b)), m.norm_keep_ln[layer, b, :n].numpy(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(cm.map("attention", layer, b).diagonal(), m.alpha_self[layer, b, :, :n].mean(0).numpy(), atol=1e-6)


def test_rollout_matches_matrix_product(case):
    enc, batch = case
    cm = context_maps(enc, batch)
    n = int(batch["attention_mask"][0].sum())
    acc = np.eye(n)
    for layer in cm.layers:
        a = cm.map("attention", layer)
        acc = (0.5 * a + 0.5 * np.eye(n)) @ acc
    np.testing.assert_allclose(cm.rollout("attention")[-1, 0, :n, :n].numpy(), acc, atol=1e-5)
    # GlobEnc as its authors aggregate: the raw N_Enc maps multiplied, R^0 = N^0, R^l = N^l R^(l-1) (issue 21)
    raw, scaled = np.eye(n), np.eye(n)
    for layer in cm.layers:
        g = cm.map("globenc", layer).astype(np.float64)
        raw = g @ raw
        scaled = (g / g.sum(1, keepdims=True)) @ scaled
    np.testing.assert_allclose(cm.rollout("globenc")[-1, 0, :n, :n].numpy(), raw, rtol=1e-4, atol=0)
    np.testing.assert_allclose(cm.rollout("globenc", normalize=True)[-1, 0, :n, :n].numpy(), scaled, rtol=1e-4, atol=1e-6)
    assert not np.allclose(raw / raw.sum(1, keepdims=True), scaled, atol=1e-3)  # the two conventions rank differently
    acc = np.eye(n)
    for layer in cm.layers:
        acc = cm.map("alti", layer).astype(np.float64) @ acc  # ALTI's rows already sum to 1
    np.testing.assert_allclose(cm.rollout("alti")[-1, 0, :n, :n].numpy(), acc, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="rollout is defined"):
        cm.rollout("norm")


def test_agreement_table(case):
    from scipy.stats import spearmanr

    enc, batch = case
    cm = context_maps(enc, batch)
    df = measure_agreement(cm, ["attention", "alti"])
    n = int(batch["attention_mask"][1].sum())
    rhos = [spearmanr(cm.map("attention", 1, b).ravel(), cm.map("alti", 1, b).ravel()).statistic
            for b, n in enumerate(batch["attention_mask"].sum(1).tolist())]
    assert df.loc[1, ("attention vs alti", "mean")] == pytest.approx(np.mean(rhos))
    with pytest.raises(ValueError, match="at least two"):
        measure_agreement(cm, ["alti"])


def test_self_check_catches_a_wrong_output_projection(case, monkeypatch):
    """A W_O from which the decomposition is built differently from the model's fails loudly."""
    enc, batch = case
    real = type(enc).projection

    def transposed(self, layer, role):
        w, b = real(self, layer, role)
        return (w.t().contiguous(), b) if role == "attn_out" else (w, b)

    monkeypatch.setattr(type(enc), "projection", transposed)
    with pytest.raises(RuntimeError, match="do not add up"):
        context_maps(enc, batch)


def test_self_check_catches_wrong_layernorm_terms_in_one_feature(case, monkeypatch):
    """The first LayerNorm's terms from which attn_res_ln, ALTI and GlobEnc are built are checked, as whole
    vectors, against the model's own LayerNorm output: a 2% error in one feature of f1 fails loudly."""
    from mixlib import measures

    enc, batch = case
    real = measures._layernorm_terms

    def off(*args):
        f1, *rest = real(*args)
        f1[..., 5] *= 1.02
        return (f1, *rest)

    monkeypatch.setattr(measures, "_layernorm_terms", off)
    with pytest.raises(RuntimeError, match="do not add up to the model's first LayerNorm output"):
        context_maps(enc, batch)


@pytest.mark.parametrize("fault", ["residual left out of the Gram maps", "another token's residual in ALTI"])
def test_self_checks_catch_a_fault_in_the_maps_own_code(case, monkeypatch, fault):
    """Faults in the fast maps themselves (not in their inputs) are caught by the rows recomputed by the
    definition: the Gram route without its diagonal's residual terms, ALTI's vectors with the wrong residual."""
    from mixlib import measures

    enc, batch = case
    if fault.startswith("residual"):
        real = measures._gram_norms
        monkeypatch.setattr(measures, "_gram_norms", lambda a, f, x, ws: real(a, f, None, ws))
    else:
        real = measures._alti
        monkeypatch.setattr(measures, "_alti", lambda a, f1, x1, *rest: real(a, f1, x1.roll(1, 0), *rest))
    with pytest.raises(RuntimeError, match="differ from their definition"):
        context_maps(enc, batch)


def test_left_padding_is_refused(case):
    """The maps index each sequence's real tokens as a prefix: a left-padded batch is an error, not wrong maps."""
    enc, batch = case
    left = {k: v.clone() for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    for b in range(left["input_ids"].shape[0]):
        n = int(left["attention_mask"][b].sum())
        for k in left:
            left[k][b] = left[k][b].roll(left[k].shape[1] - n)
    assert not torch.equal(left["attention_mask"], batch["attention_mask"])
    with pytest.raises(ValueError, match="padded on the right"):
        context_maps(enc, left)


def test_self_check_catches_a_second_layernorm_that_is_not_the_model_s(case):
    """GlobEnc linearises the second LayerNorm with its own gamma2 and s2: an output they do not reproduce fails."""
    enc, batch = case
    handle = enc.module(1, "ffn_norm").register_forward_hook(lambda mod, args, out: out * 1.01)
    try:
        with pytest.raises(RuntimeError, match="layer 1: .*second LayerNorm output"):
            context_maps(enc, batch)
    finally:
        handle.remove()


def test_plot_and_widget(case):
    import matplotlib

    matplotlib.use("Agg")
    from mixlib import plots
    from mixlib.widgets import context_explorer

    plots.setup()
    enc, batch = case
    cm = context_maps(enc, batch)
    fig = plots.plot_context_row(cm, enc, layer=1, token=2)
    assert len(fig.axes) == 4
    heights = [p.get_height() for p in fig.axes[2].patches]
    assert sum(heights) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="out of range"):
        plots.plot_context_row(cm, enc, layer=1, token=999)
    ex = context_explorer(enc, TEXTS, layer=0, token=1)
    assert ex.last is not None and ex.last.data["layer"] == 0
    ex.set(token=120)
    assert ex.error is not None and "トークン" in ex.error
    ex.set(token=3, layer=1)
    assert ex.error is None and ex.last.data["token"] == 3


def test_offdiag_agreement_and_null(case):
    from scipy.stats import spearmanr

    enc, batch = case
    cm = context_maps(enc, batch)
    df = measure_agreement(cm, ["norm", "alti"], offdiag=True)
    rhos = []
    for b, n in enumerate(batch["attention_mask"].sum(1).tolist()):
        off = ~np.eye(n, dtype=bool)
        rhos.append(spearmanr(cm.map("norm", 0, b)[off], cm.map("alti", 0, b)[off]).statistic)
    assert df.loc[0, ("norm vs alti", "mean")] == pytest.approx(np.mean(rhos))
    null = mixlib.measures.agreement_null(cm, "norm", "norm", layer=0, n_perm=20, seed=1)
    assert null.shape == (20,)
    # a map agrees perfectly with itself; with its senders shuffled, only chance is left
    assert measure_agreement(cm, ["norm", "norm"], offdiag=True).iloc[0, 0] == pytest.approx(1.0)
    assert abs(null.mean()) < 0.3 and null.max() < 0.9
    again = mixlib.measures.agreement_null(cm, "norm", "norm", layer=0, n_perm=20, seed=1)
    np.testing.assert_array_equal(null, again)


def test_benchmark_breakdown_times_the_maps_steps(capsys):
    """benchmarks/bench_measures.py --quick runs, and its per-map timers find every step of mixlib.measures they name."""
    import sys
    from pathlib import Path

    from mixlib import measures

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import bench_measures
    finally:
        sys.path.pop(0)
    before = {name: getattr(measures, name) for names in bench_measures.STAGES.values() for name in names}
    assert bench_measures.main(["--quick", "--repeats", "1", "--threads", "1", "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert "context_maps / decompose(vectors=False)" in out
    for stage in bench_measures.STAGES:
        assert stage in out
    assert all(getattr(measures, name) is fn for name, fn in before.items())
