"""Token-to-token context mixing: the norm-based maps and the other measures, side by side.

Analysis A (:func:`mixlib.decompose`) answers *how much* token j mixes. This
module answers *from where*: for every layer it returns n x n maps whose row j
says how much each source token i contributes to what token j receives. All
maps come from one forward pass of the unmodified model, through the same
forward hooks as :func:`mixlib.decompose` (``query``, ``key``, ``value``,
``self_attn``, ``attn_out``, ``attn_norm``; plus ``ffn_norm`` for GlobEnc), and every call
checks itself against the model.

Notation (rows j receive, columns i send; ``h`` a head; 0-based layers)::

    f^h(x_i)      = (x_i W_V^h + b_V^h) W_O^h                   (D,)
    T_{j,i}       = sum_h alpha^h_{j,i} f^h(x_i)                (D,)   so  sum_i T_{j,i} = attn_out_j - b_O
    g1(z)         = (z - m(z)) * gamma1 / s1(y_j)               the first LayerNorm, linear at fixed s1
    G_{j,i}       = g1(T_{j,i})          for i != j
    G_{j,j}       = g1(T_{j,j} + x_j)                           (the residual belongs to the token itself)
                    so  sum_i G_{j,i} + g1(b_O) + beta1 = LN1(y_j)  exactly

The five measures (fields of :class:`ContextMaps`, each ``(L, B, N, N)``):

``attention``
    The attention weights averaged over heads, ``mean_h alpha^h_{j,i}``.
``norm``
    Kobayashi et al. (EMNLP 2020), the weighted-norm map ``||sum_h alpha^h_{j,i} f^h(x_i)||``
    (their eq. 4 ``||alpha f(x)||`` summed over heads, Sec. 4).
``attn_res_ln``
    Kobayashi et al. (EMNLP 2021 / NLP2021), the AttnResLn level: ``||G_{j,i}||``.
    Row j is the breakdown of what token j receives; the ratio of analysis A
    compares ``||sum_{i != j} G_{j,i}||`` with ``||G_{j,j}||``.
``alti``
    ALTI (Ferrando, Gállego & Costa-jussà, EMNLP 2022, Sec. 3), as the authors'
    code computes it (mt-upc/transformer-contributions, ``contributions.py``,
    post-LN): with ``y_j = LN1(y)_j`` the first LayerNorm's real output, biases
    included (``sum_i G_{j,i} + g1(b_O) + beta1``, checked against the module's
    own output), the contribution is the L1 proximity
    ``c_{j,i} = max(0, ||y_j||_1 - ||y_j - G_{j,i}||_1)``, normalised so that
    ``sum_i c_{j,i} = 1``.
``globenc``
    GlobEnc (Modarressi, Fayyaz, Yaghoobzadeh & Pilehvar, NAACL 2022, Sec. 3):
    ``||g2(G_{j,i})||`` with ``g2(z) = (z - m(z)) * gamma2 / s2(j)`` the second
    LayerNorm linearised at the model's own ``s2`` (its input is
    ``FFN(z_j) + z_j``). The FFN itself is not decomposed: its contribution is
    left out, as in the paper.

Across layers (:meth:`ContextMaps.rollout`), ``R^(l) = C^(l) R^(l-1)`` with
each method's own ``C``, as its authors aggregate: attention rollout (Abnar &
Zuidema, ACL 2020, eq. 1) uses ``0.5 * A + 0.5 * I``; ALTI its own map (rows
already sum to 1); GlobEnc the raw ``N_Enc`` maps, not normalised (the
authors' ``modeling_bert.py`` and ``attention_rollout.py``). ``normalize=True``
scales every layer's rows to sum 1 first, a variant for comparing methods on
one scale that GlobEnc's authors do not use.

How they are computed: the (n, n, D) tensor of all ``T_{j,i}`` is never
built. Both LayerNorms are linear at their fixed ``s``, and ``s`` belongs to
the receiver j, so with ``f1 = c(f) * gamma1`` and ``f2 = c(f1) * gamma2``
(``c`` centres over the D features), per sender i::

    ||T_{j,i}||              = sqrt(a^T K_i a)                        K_i  = F_i F_i^T    (H, H)
    ||G_{j,i}|| * s1(j)      = sqrt(a^T K1_i a)  (+ the x_j terms)    K1_i = F1_i F1_i^T
    ||g2(G_{j,i})|| * s1 s2  = sqrt(a^T K2_i a)  (+ the x_j terms)    K2_i = F2_i F2_i^T

with ``a = (alpha^h_{j,i})_h``; on the diagonal, ``2 a^T F1_j x1_j + ||x1_j||^2``
(and the same with f2, x2) add the residual. That is n H^2 D + n^2 H^2 work per
sequence in place of n^2 H D. Only ALTI's L1 distances need the vectors:
``s1(j) G_{j,i} = sum_h alpha^h_{j,i} f1^h_i``, one batched product per block of
receiving tokens (:data:`BLOCK_ELEMENTS` floats) over ``-s1(j) y_j``, then the
absolute sum. Memory is O(B*H*N^2 + N*H*D + BLOCK_ELEMENTS) besides the
(L, B, N, N) results. In float32 the Gram route loses accuracy only where the
heads' parts nearly cancel (an error of about eps * (sum_h a_h ||f_h||)^2 in the
square); on the packaged BERT the maps agree with a float64 computation to
about 1e-6 relative.

The attention weights are the model's own (its eager self-attention returns
them; recomputed from Q and K where it returns none), and all scratch is
reused from sequence to sequence and layer to layer. Sequences must be padded
on the right (real tokens first).

Self-checks on every layer (``RuntimeError`` otherwise, within ``atol``;
``max_error`` holds the largest):

1. the attention weights reproduce the model's attention output and their
   rows sum to 1 (the check of :func:`mixlib.decompose`);
2. the parts add up, feature by feature, to the model's own tensors:
   ``sum_i T_{j,i} = attn_out_j - b_O`` and ``sum_i G_{j,i} + g1(b_O) + beta1
   = LN1(y_j)``, summed over the receivers with fixed random positive weights
   (this checks f, so W_O, and f1, x1 and s1 against the model);
3. s2, gamma2 and beta2 reproduce the second LayerNorm's output;
4. one receiving row per sequence (a different one per layer) of the four
   norm-based maps is recomputed by the definition, from the (n, D) vectors
   themselves (relative to the row's largest value): this checks the Gram
   route, f2 and x2, and ALTI's blocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .mixing import _StopForward, _as_batch, _chunks, _first, _register, _run_hooked, check_precision
from .mixing.kernel import _attention_weights, _check_attention, _inverse_std, _Workspace

__all__ = ["ContextMaps", "MEASURES", "context_maps", "measure_agreement", "agreement_null"]

#: Measures computed by :func:`context_maps`, with their sources.
MEASURES: dict[str, str] = {
    "attention": "attention weights, mean over heads",
    "norm": "Kobayashi et al. 2020: ||sum_h alpha f(x)||",
    "attn_res_ln": "Kobayashi et al. 2021: ||g(alpha f(x) [+ x])|| (AttnResLn)",
    "alti": "Ferrando et al. 2022: ALTI, L1 proximity of each part to the first LayerNorm's output (biases included)",
    "globenc": "Modarressi et al. 2022: GlobEnc N_enc (second LayerNorm, FFN left out)",
}
#: Measures that :meth:`ContextMaps.rollout` aggregates over layers, each as its authors do.
ROLLOUT_MEASURES = ("attention", "alti", "globenc")
#: Floats per block of ALTI's vectors (one sequence's senders x a block of receiving tokens x D).
BLOCK_ELEMENTS = 1 << 21


@dataclass(frozen=True)
class ContextMaps:
    """Token-to-token maps of one batch: ``maps[name]`` is ``(L, B, N, N)``, rows receive.

    Padding rows and columns hold NaN.
    """

    layers: tuple[int, ...]
    maps: dict[str, torch.Tensor]
    input_ids: torch.Tensor  # (B, N)
    attention_mask: torch.Tensor  # (B, N)
    token_strings: tuple[tuple[str, ...], ...]
    model_name: str
    max_error: np.ndarray  # (L,) largest self-check error per layer

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.maps:
            raise KeyError(f"unknown measure {name!r}; this object holds {', '.join(self.maps)}.")
        return self.maps[name]

    def row(self, layer: int) -> int:
        """Row of a (0-based) model layer in the (L, ...) fields."""
        if layer not in self.layers:
            raise ValueError(f"layer {layer} was not analysed; analysed layers: {list(self.layers)}.")
        return self.layers.index(layer)

    def map(self, name: str, layer: int, b: int = 0) -> np.ndarray:
        """The real-token part of one map, ``(n_b, n_b)`` (rows receive, columns send)."""
        n = int(self.attention_mask[b].sum())
        return self[name][self.row(layer), b, :n, :n].numpy()

    def rollout(self, name: str, *, normalize: bool | None = None) -> torch.Tensor:
        """Aggregate a measure over layers as its authors do: ``R^(l) = C^(l) R^(l-1)``.

        ``attention`` uses ``C = 0.5 A + 0.5 I`` (Abnar & Zuidema 2020, eq. 1);
        ``alti`` its own map (rows sum to 1); ``globenc`` the raw ``N_Enc``
        maps, not normalised, as Modarressi et al.'s code multiplies them.
        ``normalize=True`` scales each layer's rows to sum 1 before multiplying
        (for ``globenc`` a variant for comparing on one scale, not the
        authors'); ``False`` never scales. Needs consecutive layers from 0.
        Returns ``(L, B, N, N)`` float64; row l is the aggregate up to and
        including layer ``layers[l]``.
        """
        if name not in ROLLOUT_MEASURES:
            raise ValueError(f"rollout is defined for {ROLLOUT_MEASURES}; got {name!r}.")
        if self.layers != tuple(range(len(self.layers))):
            raise ValueError(f"rollout needs layers 0..k in order; these maps have {list(self.layers)}.")
        real = self.attention_mask.bool()  # (B, N)
        both = (real[:, :, None] & real[:, None, :]).double()  # (B, N, N)
        eye = torch.eye(real.shape[1], dtype=torch.float64).expand_as(both) * both
        # float64: GlobEnc's raw products grow like (row sum)^layers, past float32's range for long inputs
        out = torch.empty(self[name].shape, dtype=torch.float64)
        acc = eye.clone()
        for li in range(len(self.layers)):
            c = torch.nan_to_num(self[name][li].double()) * both
            if name == "attention":
                c = 0.5 * c + 0.5 * eye
            if normalize if normalize is not None else name != "globenc":
                c = c / c.sum(-1, keepdim=True).clamp_min(1e-12) * real[:, :, None]
            acc = torch.bmm(c, acc)
            out[li] = acc.masked_fill(~both.bool(), float("nan"))
        return out


def _sequence_maps(alpha: torch.Tensor, v: torch.Tensor, p: dict[str, Any], tok: dict[str, torch.Tensor], row: int,
                   ws: _Workspace) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """One sequence's four norm-based maps ``(nr, nr)`` (rows receive) and its self-checks' errors by what they compare.

    alpha (H, nr, nr) and v (H, nr, d') over the sequence's real tokens; ``p`` the layer's parameters
    (:func:`_layer_params`); ``tok`` the real tokens' tensors: x (the layer's input), inv_s1, inv_s2 (nr, 1),
    and the model's own attn_out and ln1_out; ``row`` the receiving token whose rows are recomputed by the
    definition (check 4). One step function per piece of the equations.
    """
    H, nr, _ = v.shape
    D = p["w_heads"].shape[-1]
    f_h = torch.bmm(v, p["w_heads"], out=ws.get("f_h", (H, nr, D)))  # f^h(x_i), heads first
    f = ws.get("f", (nr, H, D)).copy_(f_h.transpose(0, 1))  # (nr, H, D): sender by sender
    a = ws.get("a", (nr, nr, H)).copy_(alpha.permute(2, 1, 0))  # a[i, j, h] = alpha^h_{j,i}, senders first
    f1, f2, x1, x2 = _layernorm_terms(f, tok["x"], p["gamma1"], p["gamma2"], ws)
    inv_s1 = tok["inv_s1"]
    maps = {"norm": _gram_norms(a, f, None, ws),
            "attn_res_ln": _gram_norms(a, f1, x1, ws).mul_(inv_s1),
            "globenc": _gram_norms(a, f2, x2, ws).mul_(inv_s1 * tok["inv_s2"])}
    maps["alti"] = _alti(a, f1, x1, tok["ln1_out"], inv_s1, ws)
    errors = _check_sums(a, f, f1, x1, p, tok, ws)
    errors[f"the maps differ from their definition recomputed on receiving token {row} (relative error); this is a "
           "bug in mixlib, please report it"] = _check_row(row, a, f, maps, p, tok, ws)
    return maps, errors


def _layernorm_terms(f: torch.Tensor, x: torch.Tensor, gamma1: torch.Tensor, gamma2: torch.Tensor,
                     ws: _Workspace) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The parts through the LayerNorms, up to the receiver's scalars: ``f1 = c(f) * gamma1``, ``f2 = c(f1) * gamma2``.

    ``c`` centres over the D features. Then ``G_{j,i} = sum_h alpha^h_{j,i} f1^h_i / s1(j)`` (plus ``x1_j / s1(j)``
    on the diagonal), and GlobEnc's ``g2(G_{j,i})`` is the same with ``f2``, ``x2`` and ``1 / (s1(j) s2(j))``:
    both LayerNorms are linear at fixed s, and their s belong to the receiver, so they leave the sums over heads.
    """
    f1 = torch.sub(f, f.mean(-1, keepdim=True), out=ws.get("f1", f.shape)).mul_(gamma1)
    f2 = torch.sub(f1, f1.mean(-1, keepdim=True), out=ws.get("f2", f.shape)).mul_(gamma2)
    x1 = (x - x.mean(-1, keepdim=True)).mul_(gamma1)
    x2 = (x1 - x1.mean(-1, keepdim=True)).mul_(gamma2)
    return f1, f2, x1, x2


def _gram_norms(a: torch.Tensor, f: torch.Tensor, x: torch.Tensor | None, ws: _Workspace) -> torch.Tensor:
    """``||sum_h a[i, j, h] f[i, h] (+ x[j] where i == j)||`` for every pair, ``(nr, nr)`` rows receiving.

    Never builds the (n, n, D) vectors: ``||sum_h a_h f_h||^2 = a^T K_i a`` with ``K_i = F_i F_i^T`` the senders'
    (H, H) Gram matrices, and the diagonal adds ``2 a^T (F_j x_j) + ||x_j||^2``. That is n H^2 D + n^2 H^2 work
    in place of n^2 H D.
    """
    gram = torch.bmm(f, f.transpose(1, 2), out=ws.get("gram", (f.shape[0], f.shape[1], f.shape[1])))  # (nr, H, H)
    sq = torch.bmm(a, gram).mul_(a).sum(-1)  # (nr_i, nr_j): a^T K_i a
    if x is not None:
        cross = torch.mul(f, x[:, None, :], out=ws.get("tmp", f.shape)).sum(-1)  # (nr, H): f^h_j . x_j
        own = torch.diagonal(a).t()  # (nr, H): alpha^h_{j,j}
        torch.diagonal(sq).add_(cross.mul_(own).sum(-1).mul_(2.0)).add_(x.square().sum(-1))
    return sq.clamp_min_(0.0).sqrt_().t()


def _alti(a: torch.Tensor, f1: torch.Tensor, x1: torch.Tensor, ln1_out: torch.Tensor, inv_s1: torch.Tensor,
          ws: _Workspace) -> torch.Tensor:
    """ALTI's rows: ``c_{j,i} = max(0, ||y_j||_1 - ||y_j - G_{j,i}||_1)``, normalised; ``y_j`` the real LayerNorm output.

    ``||y_j - G_{j,i}||_1 = ||s1(j) y_j - s1(j) G_{j,i}||_1 / s1(j)``, and ``s1(j) G_{j,i} = sum_h alpha^h_{j,i} f1^h_i``
    (``+ x1_j`` on the diagonal): one batched product per block of receivers, written over ``-s1(j) y_j``, then
    the absolute sum. The L1 norm has no shortcut: this is the one n^2 H D step.
    """
    nr, H, D = f1.shape
    sy = ln1_out / inv_s1  # (nr, D): s1(j) y_j
    dist = torch.empty((nr, nr), device=f1.device, dtype=f1.dtype)
    step = max(1, min(nr, BLOCK_ELEMENTS // max(1, nr * D)))
    for j0 in range(0, nr, step):
        j1 = min(nr, j0 + step)
        z = torch.baddbmm(sy[None, j0:j1], a[:, j0:j1], f1, beta=-1.0, out=ws.get("z", (nr, j1 - j0, D)))
        rows = torch.arange(j1 - j0, device=f1.device)
        z[rows + j0, rows] += x1[j0:j1]  # the residual is the receiver's own
        dist[j0:j1] = z.abs_().sum(-1).t()
    c = (ln1_out.abs().sum(-1, keepdim=True) - dist.mul_(inv_s1)).clamp_min_(0.0)
    return c.div_(c.sum(-1, keepdim=True).clamp_min_(1e-30))


def _check_sums(a: torch.Tensor, f: torch.Tensor, f1: torch.Tensor, x1: torch.Tensor, p: dict[str, Any],
                tok: dict[str, torch.Tensor], ws: _Workspace) -> dict[str, float]:
    """Self-check 2: the parts add up to the model's own tensors, feature by feature (max abs errors).

    Summed over receivers with fixed random positive weights w (sum 1), which costs one pass over f and f1
    instead of the n^2 H D sums over senders, yet keeps every feature (beta^h_i = sum_j w_j alpha^h_{j,i} > 0)::

        sum_i sum_h beta^h_i f^h_i    = sum_j w_j (attn_out_j - b_O)
        sum_i sum_h beta^h_i f1^h_i   = sum_j w_j (s1(j) (LN1(y)_j - beta1) - x1_j) - c(b_O) gamma1

    The second is compared in units of the LayerNorm's output (divided by ``sum_j w_j s1(j)``).
    """
    nr, H, D = f.shape
    w = ws.receiver_weights(nr)  # (nr,)
    beta = (a * w[None, :, None]).sum(1).view(1, nr * H)  # beta^h_i, senders first
    got_t = (beta @ f.view(nr * H, D))[0]
    got_g = (beta @ f1.view(nr * H, D))[0]
    s1 = tok["inv_s1"].reciprocal()  # (nr, 1)
    want_t = w @ tok["attn_out"] - p["bo"]
    want_g = w @ ((tok["ln1_out"] - p["beta1"]).mul_(s1).sub_(x1)) - p["bo1"]
    scale = float(w @ s1[:, 0])
    return {"the token-to-token pieces do not add up to the model's attention output":
            float((got_t - want_t).abs().max()),
            "the token-to-token pieces do not add up to the model's first LayerNorm output":
            float((got_g - want_g).abs().max()) / scale}


def _check_row(j: int, a: torch.Tensor, f: torch.Tensor, maps: dict[str, torch.Tensor], p: dict[str, Any],
               tok: dict[str, torch.Tensor], ws: _Workspace) -> float:
    """Self-check 4: receiver j's rows of the four maps, recomputed from the vectors by their definitions.

    Returns the largest difference, relative to the largest value of the row (at least 1).
    """
    t = torch.bmm(a[:, j, None, :], f, out=ws.get("t_row", (f.shape[0], 1, f.shape[2])))[:, 0]  # (nr, D): T_{j,i}
    ref = {"norm": torch.linalg.vector_norm(t, dim=-1)}
    t[j] += tok["x"][j]
    g = (t - t.mean(-1, keepdim=True)).mul_(p["gamma1"]).mul_(tok["inv_s1"][j])  # G_{j,i}
    ref["attn_res_ln"] = torch.linalg.vector_norm(g, dim=-1)
    y = tok["ln1_out"][j]
    c = (y.abs().sum() - (y - g).abs().sum(-1)).clamp_min(0.0)
    ref["alti"] = c / c.sum().clamp_min(1e-30)
    g2 = (g - g.mean(-1, keepdim=True)).mul_(p["gamma2"]).mul_(tok["inv_s2"][j])
    ref["globenc"] = torch.linalg.vector_norm(g2, dim=-1)
    return max(float((maps[k][j] - r).abs().max()) / max(1.0, float(r.abs().max())) for k, r in ref.items())


def _layer_params(enc: Any, layer: int) -> dict[str, Any]:
    """What the maps of one layer need from its weights: W_O^h, the LayerNorms' parameters, and c(b_O) * gamma1."""
    w_o, b_o = enc.projection(layer, "attn_out")
    ln1, ln2 = enc.module(layer, "attn_norm"), enc.module(layer, "ffn_norm")
    H, D = enc.n_heads, enc.d_model
    bo = b_o if b_o is not None else torch.zeros(D, device=w_o.device, dtype=w_o.dtype)
    g1 = ln1.weight.detach()
    return {"w_heads": w_o.t().reshape(H, D // H, D), "gamma1": g1, "beta1": ln1.bias.detach(), "eps1": float(ln1.eps),
            "gamma2": ln2.weight.detach(), "beta2": ln2.bias.detach(), "eps2": float(ln2.eps),
            "bo": bo, "bo1": (bo - bo.mean()) * g1}


def _layer_maps(layer: int, p: dict[str, Any], got: dict[str, Any], ln2: tuple[torch.Tensor, torch.Tensor],
                real: torch.Tensor, ws: _Workspace, atol: float, store: Any) -> float:
    """Every map of one layer for a chunk of sequences; ``store(bi, nr, maps)`` takes each sequence's.

    ``got`` holds the hooked tensors (:func:`mixlib.mixing._register`), ``ln2`` the second LayerNorm's input and
    output, ``real`` (b, n) the real tokens. Raises ``RuntimeError`` when a self-check fails; returns the largest error.
    """
    nb, n, D = got["x"].shape
    H = p["w_heads"].shape[0]
    dh = D // H
    alpha = got.get("alpha")  # (b, H, n, n): the model's own weights (eager attention returns them)
    if alpha is None:  # recomputed from Q and K, as decompose does
        additive = torch.zeros(real.shape, device=real.device, dtype=got["q"].dtype)
        additive.masked_fill_(~real, torch.finfo(additive.dtype).min)
        alpha = _attention_weights(got["q"], got["k"], additive, H, ws)
    err = float(_check_attention(alpha, got["v"], got["context"], ws.directions(H, dh), ~real, ws))
    if not err <= atol:
        raise RuntimeError(f"context_maps: layer {layer}: the attention weights do not reproduce the model's attention "
                           f"output or do not sum to 1 (max abs error {err:.3e} > atol={atol:g}); is the model in "
                           "train mode (call enc.model.eval())?")
    inv_s1 = _inverse_std(got["ln1_in"], p["eps1"], ws)  # (b, n, 1)
    inv_s2 = _inverse_std(ln2[0], p["eps2"], ws)
    e2 = torch.sub(ln2[0], ln2[0].mean(-1, keepdim=True), out=ws.get("tmp", ln2[0].shape))
    e2.mul_(inv_s2).mul_(p["gamma2"]).add_(p["beta2"]).sub_(ln2[1]).abs_()
    err = max(err, _fail_if(layer, float(e2.masked_fill_(~real[..., None], 0.0).max()), atol,
                                "gamma2, beta2 and s2 do not reproduce the model's second LayerNorm output"))
    v = got["v"].view(nb, n, H, dh)
    for bi in range(nb):
        nr = int(real[bi].sum())
        tok = {"x": got["x"][bi, :nr], "inv_s1": inv_s1[bi, :nr], "inv_s2": inv_s2[bi, :nr],
               "attn_out": got["attn_out"][bi, :nr], "ln1_out": got["ln1_out"][bi, :nr]}
        a_seq = alpha[bi, :, :nr, :nr]
        maps, errors = _sequence_maps(a_seq, v[bi, :nr].transpose(0, 1), p, tok, (7 * layer + 13 * bi) % nr, ws)
        err = max(err, *(_fail_if(layer, e, atol, what) for what, e in errors.items()))
        maps["attention"] = a_seq.mean(0)
        store(bi, nr, maps)
    return err


def _fail_if(layer: int, err: float, atol: float, what: str) -> float:
    """``err`` if within ``atol``; otherwise a RuntimeError that says which self-check failed, on which layer."""
    if not err <= atol:
        raise RuntimeError(f"context_maps: layer {layer}: {what} (max error {err:.3e} > atol={atol:g}).")
    return err


def context_maps(
    enc: Any,
    batch: Any,
    *,
    layers: Any = None,
    batch_size: int = 16,
    max_length: int | None = None,
    atol: float = 1e-4,
) -> ContextMaps:
    """Token-to-token maps of five context-mixing measures for every analysed layer.

    Parameters
    ----------
    enc : mixlib.Encoder
        A post-LN BERT-family encoder (:func:`mixlib.load_encoder`).
    batch : list of str, list of (str, str), or dict of tensors
        As for :func:`mixlib.decompose` (e.g. the output of :func:`mixlib.mask_tokens`).
    layers : int or list of int, optional
        0-based layers; default all. :meth:`ContextMaps.rollout` needs 0..k.
    batch_size : int, default 16
        Sequences per forward pass.
    max_length : int, optional
        For texts: longest sequence in tokens.
    atol : float, default 1e-4
        Tolerance of the self-checks.

    Returns
    -------
    ContextMaps
        ``maps`` holds :data:`MEASURES`, each ``(L, B, N, N)`` (rows receive, columns send).

    Raises
    ------
    RuntimeError
        A self-check fails on some layer (the message names it and the error).
    ValueError, TypeError
        Bad input, as for :func:`mixlib.decompose`.

    Examples
    --------
    >>> cm = mixlib.context_maps(enc, ["The cat sat on the mat."], layers=[0, 1])
    >>> sorted(cm.maps)
    ['alti', 'attention', 'attn_res_ln', 'globenc', 'norm']
    >>> cm["alti"].shape  # (L, B, N, N)
    torch.Size([2, 1, 9, 9])
    >>> cm.map("alti", layer=0).sum(1).round(3).tolist()  # rows of ALTI sum to 1
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is not allowed; give a positive int.")
    from .data import check_atol

    atol = check_atol(atol)
    dtype = check_precision(enc, "context_maps")
    layer_idx = enc.check_layers(layers)
    inputs = _as_batch(enc, batch, max_length)
    ids, am = inputs["input_ids"], inputs["attention_mask"]
    if bool((am[:, 1:] > am[:, :-1]).any()):
        raise ValueError("context_maps needs each sequence's real tokens first (padding on the right), but this "
                         "attention_mask has padding before real tokens; tokenize with padding_side='right' "
                         "(mixlib.tokenize and mixlib.mask_tokens do).")
    B, N = ids.shape
    L = len(layer_idx)
    maps = {name: torch.full((L, B, N, N), float("nan")) for name in MEASURES}
    max_err = np.zeros(L)
    row_of = {layer: li for li, layer in enumerate(layer_idx)}
    dev = enc.device

    ws = _Workspace(dev, dtype)  # scratch reused from layer to layer (no fresh large blocks)
    params = {layer: _layer_params(enc, layer) for layer in layer_idx}
    for b0, chunk, real in _chunks(inputs, batch_size, dev):
        real = real.to(dev)  # (b, n)
        state: dict[int, dict[str, Any]] = {}

        def finish_attn(layer: int, ln_in: torch.Tensor, ln_out: torch.Tensor) -> None:
            state[layer]["ln1_in"], state[layer]["ln1_out"] = ln_in, ln_out

        def make_ffn_hook(layer: int):
            li = row_of[layer]

            def store(bi: int, nr: int, seq_maps: dict[str, torch.Tensor]) -> None:
                for name, m in seq_maps.items():
                    maps[name][li, b0 + bi, :nr, :nr] = m.cpu()

            def on_ffn_norm(module, args, kwargs, output):
                got = state.pop(layer)
                try:
                    err = _layer_maps(layer, params[layer], got, (_first(args, kwargs), output), real, ws, atol, store)
                    max_err[li] = max(max_err[li], err)
                finally:
                    got.clear()  # the hooks hold this dict until the pass ends: let the layer's tensors go now
                if layer == layer_idx[-1]:
                    raise _StopForward

            return on_ffn_norm

        def hook_groups() -> Iterable[list[Any]]:
            for layer in layer_idx:
                yield _register(enc, layer, state, finish_attn)
                yield [enc.module(layer, "ffn_norm").register_forward_hook(make_ffn_hook(layer), with_kwargs=True)]

        _run_hooked(enc, chunk, hook_groups())

    tok = enc.tokenizer
    real_all = am.bool()
    token_strings = tuple(tuple(tok.convert_ids_to_tokens(ids[b][real_all[b]].tolist())) for b in range(B))
    return ContextMaps(layers=layer_idx, maps=maps, input_ids=ids, attention_mask=am, token_strings=token_strings,
                       model_name=enc.name, max_error=max_err)


def _pairs_values(m: torch.Tensor, n: int, offdiag: bool) -> np.ndarray:
    a = m[:n, :n].numpy()
    return a[~np.eye(n, dtype=bool)] if offdiag else a.reshape(-1)


def measure_agreement(cm: ContextMaps, measures: Any = None, *, rollout: bool = False, offdiag: bool = False) -> Any:
    """Rank agreement between measures, layer by layer.

    For every sequence, the Spearman correlation between two measures over all
    (receiving, sending) pairs of real tokens; summarised over sequences as the
    mean and the standard deviation.

    Parameters
    ----------
    cm : ContextMaps
        The maps of :func:`mixlib.context_maps`.
    measures : list of str, optional
        At least two names in ``cm.maps``. Default: all of ``cm.maps`` (with ``rollout=True``:
        :data:`ROLLOUT_MEASURES`).
    rollout : bool, default False
        Compare the aggregated maps (:meth:`ContextMaps.rollout`) instead of the per-layer ones.
    offdiag : bool, default False
        Leave out each token's own entry (i = j). The diagonal dominates the
        residual-aware maps, so the agreement over all pairs is partly just
        "the token itself is the largest source"; the off-diagonal agreement is
        about *which other* tokens matter.

    Returns
    -------
    pandas.DataFrame
        Rows: layers (0-based); columns: a MultiIndex (``"A vs B"``, ``mean``/``sd``), one pair of
        columns per pair of measures. ``sd`` is NaN with a single sequence.

    Raises
    ------
    ValueError
        A measure is not in ``cm.maps``, or fewer than two measures are given. With ``rollout=True``, a
        measure that cannot be rolled out or maps without consecutive layers from 0
        (:meth:`ContextMaps.rollout`).

    Examples
    --------
    >>> cm = mixlib.context_maps(enc, ["The cat sat on the mat."], layers=[0, 1])
    >>> a = mixlib.measure_agreement(cm, ["attention", "norm", "alti"])
    >>> a.shape  # 2 layers x (3 pairs x mean, sd)
    (2, 6)
    >>> a.columns.get_level_values(0).unique().tolist()
    ['attention vs norm', 'attention vs alti', 'norm vs alti']
    >>> round(float(a.loc[0, ("norm vs alti", "mean")]), 2)
    0.73
    """
    import pandas as pd
    from scipy.stats import spearmanr

    names = list(measures) if measures is not None else list(ROLLOUT_MEASURES if rollout else cm.maps)
    for name in names:
        if name not in cm.maps:
            raise ValueError(f"unknown measure {name!r}; expected some of {', '.join(cm.maps)}.")
    if len(names) < 2:
        raise ValueError("give at least two measures to compare.")
    data = {name: (cm.rollout(name) if rollout else cm[name]) for name in names}
    lengths = cm.attention_mask.sum(1).tolist()
    rows = {}
    for li, layer in enumerate(cm.layers):
        row = {}
        for a, b in itertools.combinations(names, 2):
            rhos = []
            for bi, nb in enumerate(lengths):
                va = _pairs_values(data[a][li, bi], nb, offdiag)
                vb = _pairs_values(data[b][li, bi], nb, offdiag)
                rho = spearmanr(va, vb).statistic
                if np.isfinite(rho):
                    rhos.append(rho)
            row[(f"{a} vs {b}", "mean")] = float(np.mean(rhos)) if rhos else float("nan")
            row[(f"{a} vs {b}", "sd")] = float(np.std(rhos, ddof=1)) if len(rhos) > 1 else float("nan")
        rows[layer] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.name = "layer"
    return df


def agreement_null(cm: ContextMaps, a: str, b: str, *, layer: int, n_perm: int = 100, seed: int = 0, offdiag: bool = True) -> np.ndarray:
    """What agreement chance gives: the mean Spearman of ``a`` vs ``b`` after shuffling ``b``'s senders.

    In every permutation, each row of ``b``'s map (one receiving token) has its
    off-diagonal entries shuffled independently (the diagonal stays in place
    when ``offdiag=False``), which keeps each row's set of values and breaks
    which token they belong to. Returns the ``n_perm`` mean correlations
    (over sequences), to set beside :func:`measure_agreement`.

    Parameters
    ----------
    cm : ContextMaps
    a, b : str
        Measures in ``cm.maps``.
    layer : int
        Model layer (0-based).
    n_perm : int, default 100
    seed : int, default 0
    offdiag : bool, default True
        As in :func:`measure_agreement`.

    Returns
    -------
    numpy.ndarray
        ``(n_perm,)``.
    """
    from scipy.stats import spearmanr

    for name in (a, b):
        if name not in cm.maps:
            raise ValueError(f"unknown measure {name!r}; expected one of {', '.join(cm.maps)}.")
    if isinstance(n_perm, bool) or not isinstance(n_perm, (int, np.integer)) or n_perm < 1:
        raise ValueError(f"n_perm={n_perm!r}; give a positive int.")
    rng = np.random.default_rng(seed)
    li = cm.row(layer)
    lengths = cm.attention_mask.sum(1).tolist()
    seqs = [(cm[a][li, bi, :n, :n].numpy(), cm[b][li, bi, :n, :n].numpy(), n) for bi, n in enumerate(lengths) if n > 2]
    if not seqs:
        raise ValueError("every sequence has at most 2 tokens; a permutation null needs longer sequences.")
    out = np.empty(n_perm)
    for p in range(n_perm):
        rhos = []
        for ma, mb, n in seqs:
            off = ~np.eye(n, dtype=bool)
            vals = mb[off].reshape(n, n - 1)
            shuffled = rng.permuted(vals, axis=1)
            mb2 = mb.copy()
            mb2[off] = shuffled.reshape(-1)
            va = ma[off] if offdiag else ma.reshape(-1)
            vb = mb2[off] if offdiag else mb2.reshape(-1)
            rhos.append(spearmanr(va, vb).statistic)
        out[p] = np.nanmean(rhos)
    return out
