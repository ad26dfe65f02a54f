"""Analysis A: how much each layer mixes context and how much it preserves the token.

Kobayashi et al. (NLP2021; EMNLP 2021) split the output of the LayerNorm that
follows the attention block of a post-LN Transformer layer, exactly and for
every token j, into four vectors::

    LN(y_j) = mix_j + keep_attn_j + keep_res_j + bias_j                     (1)

    y_j       = x_j + sum_i f_j(x_i) + b_O        the LayerNorm's input
    f_j(x_i)  = sum_h alpha^h_{j,i} (x_i W_V^h + b_V^h) W_O^h
    g(z)      = (z - m(z)) / s(y_j) * gamma       LayerNorm applied to a part
    mix_j       = g(sum_{i != j} f_j(x_i))        what attention brings from the others
    keep_attn_j = g(f_j(x_j))                     what attention brings from j itself
    keep_res_j  = g(x_j)                          what the residual connection keeps
    bias_j      = g(b_O) + beta

with m the mean over the d elements and s(y_j) the standard deviation of the
real LayerNorm input (population variance plus the model's epsilon). Because g
is linear in z once s(y_j) is fixed and sum(alpha) = 1, (1) holds without
approximation. The paper's mixing ratio (AttnResLn-N) compares the norms::

    ratio_j = ||mix_j|| / (||mix_j|| + ||keep_attn_j + keep_res_j||)

How it is computed (fast and exact)
-----------------------------------
Forward hooks on the *unmodified* ``query``, ``key``, ``value``, ``attn_out``
and ``attn_norm`` modules of each layer (found through
:meth:`mixlib.Encoder.module`) capture what one ordinary forward pass computes
anyway. Per layer, only the attention weights' diagonal alpha^h_{j,j} is
needed beyond that:

* ``f_j(x_j) = sum_h alpha^h_{j,j} v^h_j W_O^h`` -- one (B*N, D) x (D, D) product;
* ``sum_{i != j} f_j(x_i) = (attention output - b_O) - f_j(x_j)``.

The n x n x d tensor of all f_j(x_i) is never built; memory per layer is
O(B*N*D) plus the (B, H, N, N) attention weights the model itself holds. Each
layer is decomposed inside the hook on its LayerNorm, while the forward pass
runs, and the pass stops after the last layer asked for (the last FFN is never
computed). The per-token work goes through blocks of about
:data:`BLOCK_TOKENS` tokens with reused scratch buffers, so that it stays in
the CPU cache.

Every call checks itself on every layer, three ways: mix + keep_attn + keep_res + bias
must reproduce the model's own LayerNorm output (max abs error over all real
tokens and elements), and the attention weights recomputed from the hooked Q
and K must reproduce the model's own attention output (the input of
``attn_out``; compared along one fixed random unit direction per head, which
costs a matrix-vector instead of a matrix-matrix product), both within
``atol`` (1e-4); otherwise a :class:`RuntimeError` names the layer and the
error.

The first check alone cannot see the one error that matters most: because
``sum_{i != j} f_j(x_i)`` is obtained as a remainder, ``mix + keep_attn``
equals ``g(attention output - b_O)`` whatever ``f_j(x_j)`` was. A third check
therefore recomputes, along one fixed random unit direction u of the output
space, both ``f_j(x_j) . u = sum_h alpha^h_jj (v^h_j . p_h)`` and
``sum_{i != j} f_j(x_i) . u = context_j . p - f_j(x_j) . u`` with
``p = W_O^T u`` taken from the ``attn_out`` module itself and cut per head,
the diagonal read off the attention weights again, and the model's own
context -- a path that shares no slicing code with the decomposition. A W_O
sliced from the wrong head, a transposed W_O or a forgotten b_O moves these
projections far beyond ``atol`` (``Mixing.max_split_error``).

Padding
-------
Positions where ``attention_mask`` is 0 hold NaN in every per-token field
(norms, ratios, vectors), so any statistic that forgets to exclude them shows
NaN instead of a silently wrong number. :func:`mixing_table` and
:func:`mixing_summary` exclude them.

Uncertainty and conventions
---------------------------
:func:`mixing_table` and :func:`mixing_summary` take ``ci=0.95`` for a
seeded bootstrap interval over sequences (:func:`layer_means` does the same
for any per-token quantity). The ratio depends on conventions that the
decomposition itself leaves free -- which side ``b_V W_O`` and ``b_O`` are
counted on -- and on the LayerNorm's centring and gamma (a uniform scale
cannot move it); :func:`mixing_conventions` measures both.

Units
-----
Fields of :class:`Mixing` hold ratios as fractions in [0, 1]. The tables
(:func:`mixing_table`, :func:`mixing_summary`) print ratios in percent by
default, as the paper's figures and Table 1 do.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = [
    "Mixing",
    "decompose",
    "mixing_table",
    "mixing_summary",
    "decompose_layer",
    "RATIO_METRICS",
    "NORM_METRICS",
    "METRICS",
    "SUMMARY_ROWS",
    "OVERALL",
    "CI_LEVELS",
    "bootstrap_counts",
    "layer_means",
    "split_probe",
    "mixing_conventions",
    "MixingVariants",
    "CONVENTIONS",
    "LN_STEPS",
]

#: Per-token ratio fields of :class:`Mixing` (fractions in [0, 1]) and their names in the paper.
RATIO_METRICS: dict[str, str] = {
    "ratio": "AttnResLn-N",
    "attnres_n": "AttnRes-N",
    "attn_n": "Attn-N",
    "attnres_w": "AttnRes-W",
    "attn_w": "Attn-W",
}
#: Per-token norm fields of :class:`Mixing` and what they measure.
NORM_METRICS: dict[str, str] = {
    "norm_mix": "||sum_{i!=j} f_j(x_i)||, attention mixes (Fig. 3)",
    "norm_keep_attn": "||f_j(x_j)||, attention preserves (Fig. 4)",
    "norm_res": "||x_j||, residual preserves (Fig. 5)",
    "norm_keep": "||f_j(x_j) + x_j||, attention + residual preserve",
    "norm_mix_ln": "||mix_j|| = ||g(sum_{i!=j} f_j(x_i))||",
    "norm_keep_attn_ln": "||keep_attn_j|| = ||g(f_j(x_j))||",
    "norm_res_ln": "||keep_res_j|| = ||g(x_j)||, residual after LN (Fig. 7)",
    "norm_keep_ln": "||keep_attn_j + keep_res_j||",
}
#: Every per-token (L, B, N) field that :func:`mixing_table` accepts as ``metric``.
METRICS: tuple[str, ...] = (*RATIO_METRICS, *NORM_METRICS)
#: Rows of :func:`mixing_summary`, in the order of the official Table 1.
SUMMARY_ROWS: tuple[str, ...] = ("attn_w", "attn_n", "attnres_w", "attnres_n", "ratio")
#: Column name of the all-tokens average in :func:`mixing_table`.
OVERALL = "全体"
#: Size above which ``vectors=None`` drops the four (L, B, N, D) vector fields.
VECTOR_LIMIT_BYTES = 1 << 30
#: Field names of the four vectors of eq. (1).
VECTOR_FIELDS = ("mix", "keep_attn", "keep_res", "bias")
#: Tokens per block in the per-token part of :func:`decompose_layer` (keeps its working set in the CPU cache).
BLOCK_TOKENS = 2048
#: Keys a tokenized batch may carry (the rest is refused, so that typos do not pass silently).
BATCH_KEYS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask", "masked")


# ---------------------------------------------------------------------------
# result
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Mixing:
    """Result of :func:`decompose`: the four vectors and their norms, per layer and token.

    Shapes: ``L`` = analysed layers (``layers``), ``B`` = sequences, ``N`` =
    tokens (padded), ``D`` = model dimension, ``H`` = heads. All tensors are
    float32 on the CPU; padding positions hold NaN.

    Attributes
    ----------
    layers : tuple of int
        The model layers analysed (0-based), one per row of the ``L`` axis.
    input_ids, attention_mask : torch.Tensor, (B, N)
    categories : numpy.ndarray of str, (B, N)
        ``[CLS]``, ``[SEP]``, ``[MASK]``, 句読点, その他, or ``[PAD]``
        (see :func:`mixlib.token_categories`).
    ratio : torch.Tensor, (L, B, N)
        AttnResLn-N, the paper's mixing ratio
        ``||mix|| / (||mix|| + ||keep_attn + keep_res||)``.
    attnres_n : torch.Tensor, (L, B, N)
        AttnRes-N, the same before LayerNorm:
        ``||sum_{i!=j} f|| / (||sum_{i!=j} f|| + ||f_j(x_j) + x_j||)``.
    attn_n : torch.Tensor, (L, B, N)
        Attn-N, attention alone: ``||sum_{i!=j} f|| / (||sum_{i!=j} f|| + ||f_j(x_j)||)``.
    attn_w : torch.Tensor, (L, B, N)
        Attn-W, the weight baseline ``1 - mean_h alpha^h_{j,j}``.
    attnres_w : torch.Tensor, (L, B, N)
        AttnRes-W = Attn-W / 2 (residual counted as a second, equal weight).
    norm_mix, norm_keep_attn, norm_res, norm_keep : torch.Tensor, (L, B, N)
        ``||sum_{i!=j} f_j(x_i)||``, ``||f_j(x_j)||``, ``||x_j||`` and
        ``||f_j(x_j) + x_j||`` (before LayerNorm; no b_O).
    norm_mix_ln, norm_keep_attn_ln, norm_res_ln, norm_keep_ln : torch.Tensor, (L, B, N)
        ``||mix||``, ``||keep_attn||``, ``||keep_res|| = ||g(x_j)||`` and
        ``||keep_attn + keep_res||`` (after LayerNorm).
    alpha_self : torch.Tensor, (L, B, H, N)
        The attention weight of every token on itself, alpha^h_{j,j}.
    max_error : numpy.ndarray, (L,)
        Largest |mix + keep_attn + keep_res + bias - LN output| over the real
        tokens of each layer (the self-check; at most ``atol``).
    max_attention_error : numpy.ndarray, (L,)
        Largest |(alpha V - the model's attention output) r_h| per layer, r_h
        a fixed random unit vector per head (the check that alpha recomputed
        from Q and K is the model's).
    max_split_error : numpy.ndarray, (L,)
        Largest deviation of ``f_j(x_j) . u`` and ``sum_{i!=j} f_j(x_i) . u``
        (u a fixed random unit vector) from their recomputation by a second
        path that shares no code with the split (the check that sees a W_O
        sliced from the wrong head, a transposed W_O or a forgotten b_O, which
        ``max_error`` cannot see).
    mix, keep_attn, keep_res, bias : torch.Tensor, (L, B, N, D), or None
        The four vectors of the decomposition, or None when they were not
        kept (``vectors=False``, or too large for ``vectors=None``).
    token_strings : tuple of tuple of str
        The real (non-padding) tokens of each sequence.
    model_name : str
    """

    layers: tuple[int, ...]
    input_ids: torch.Tensor  # (B, N)
    attention_mask: torch.Tensor  # (B, N)
    categories: np.ndarray  # (B, N)
    ratio: torch.Tensor  # (L, B, N)
    attnres_n: torch.Tensor  # (L, B, N)
    attn_n: torch.Tensor  # (L, B, N)
    attn_w: torch.Tensor  # (L, B, N)
    attnres_w: torch.Tensor  # (L, B, N)
    norm_mix: torch.Tensor  # (L, B, N)
    norm_keep_attn: torch.Tensor  # (L, B, N)
    norm_res: torch.Tensor  # (L, B, N)
    norm_keep: torch.Tensor  # (L, B, N)
    norm_mix_ln: torch.Tensor  # (L, B, N)
    norm_keep_attn_ln: torch.Tensor  # (L, B, N)
    norm_res_ln: torch.Tensor  # (L, B, N)
    norm_keep_ln: torch.Tensor  # (L, B, N)
    alpha_self: torch.Tensor  # (L, B, H, N)
    max_error: np.ndarray  # (L,)
    max_attention_error: np.ndarray  # (L,)
    mix: torch.Tensor | None = field(default=None, repr=False)  # (L, B, N, D)
    keep_attn: torch.Tensor | None = field(default=None, repr=False)  # (L, B, N, D)
    keep_res: torch.Tensor | None = field(default=None, repr=False)  # (L, B, N, D)
    bias: torch.Tensor | None = field(default=None, repr=False)  # (L, B, N, D)
    token_strings: tuple[tuple[str, ...], ...] = field(default=(), repr=False)
    model_name: str = ""
    max_split_error: np.ndarray | None = None  # (L,)

    # -- sizes ------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        """Number of analysed layers (the ``L`` axis)."""
        return len(self.layers)

    @property
    def n_sequences(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_tokens(self) -> int:
        """Padded sequence length ``N``."""
        return int(self.input_ids.shape[1])

    @property
    def has_vectors(self) -> bool:
        """True when the four (L, B, N, D) vector fields were kept."""
        return self.mix is not None

    @property
    def real(self) -> torch.Tensor:
        """``(B, N)`` bool: True at real (non-padding) tokens."""
        return self.attention_mask.bool()

    # -- access -----------------------------------------------------------
    def row(self, layer: int) -> int:
        """Index on the ``L`` axis of model layer ``layer`` (0-based)."""
        if layer not in self.layers:
            raise ValueError(f"layer {layer!r} was not analysed; this result holds layers {list(self.layers)}.")
        return self.layers.index(layer)

    def tokens(self, b: int) -> list[str]:
        """The token strings of sequence ``b`` (padding left out)."""
        if not isinstance(b, (int, np.integer)) or not -self.n_sequences <= b < self.n_sequences:
            raise IndexError(f"sequence {b!r} is out of range: this result holds {self.n_sequences} sequences.")
        return list(self.token_strings[b])

    def metric(self, name: str) -> torch.Tensor:
        """A per-token ``(L, B, N)`` field by name (one of :data:`METRICS`)."""
        if name not in METRICS:
            raise ValueError(f"unknown metric {name!r}; expected one of {', '.join(METRICS)}.")
        return getattr(self, name)

    def reconstruct(self) -> torch.Tensor:
        """``mix + keep_attn + keep_res + bias``, ``(L, B, N, D)``: the LayerNorm outputs."""
        if not self.has_vectors:
            raise ValueError("the vectors were not kept; call decompose(..., vectors=True).")
        return self.mix + self.keep_attn + self.keep_res + self.bias

    def to_frame(self, metrics: Iterable[str] = METRICS) -> Any:
        """One row per (layer, sequence, real token): token, category and the chosen metrics.

        Returns
        -------
        pandas.DataFrame
            Columns ``layer``, ``seq``, ``pos``, ``token``, ``category`` and one per metric.
        """
        import pandas as pd

        metrics = list(metrics)
        for m in metrics:
            self.metric(m)
        real = self.real.numpy()
        b_idx, n_idx = np.nonzero(real)
        toks = np.array([t for seq in self.token_strings for t in seq], dtype=object)
        if toks.size != b_idx.size:  # token strings and mask disagree only for left-padded input
            toks = np.array([""] * b_idx.size, dtype=object)
        frames = []
        for li, layer in enumerate(self.layers):
            data = {"layer": layer, "seq": b_idx, "pos": n_idx, "token": toks, "category": self.categories[b_idx, n_idx]}
            for m in metrics:
                data[m] = self.metric(m)[li].numpy()[b_idx, n_idx]
            frames.append(pd.DataFrame(data))
        return pd.concat(frames, ignore_index=True)

    def __repr__(self) -> str:
        vec = "with vectors" if self.has_vectors else "norms only"
        return (
            f"Mixing(model={self.model_name!r}, layers={list(self.layers)}, sequences={self.n_sequences}, "
            f"tokens={self.n_tokens}, {vec}, max_error={float(np.max(self.max_error)):.1e})"
        )


# ---------------------------------------------------------------------------
# one layer (pure tensors)
# ---------------------------------------------------------------------------


#: The dtypes the decomposition computes in: its self-checks compare sums to ``atol`` (1e-4 by default),
#: beyond what float16 and bfloat16 can hold.
PRECISIONS = (torch.float32, torch.float64)


def check_precision(enc: Any, what: str) -> torch.dtype:
    """The dtype ``enc.model`` computes in, if an analysis can be exact in it; else one ValueError naming it.

    float32 and float64 are analysed (float64 results are returned as float32,
    like all results); float16 and bfloat16, and a model on the meta device
    (no values), are refused with what to do.
    """
    params = list(enc.model.parameters())
    if not params:
        raise ValueError(f"{what}: enc.model has no parameters; give a BERT-family encoder.")
    if any(p.device.type == "meta" for p in params):
        raise ValueError(f"{what}: enc.model is on the meta device (shapes without values); load its weights "
                         "(load_encoder, or from_pretrained without device_map='meta') before analysing it.")
    dtypes = {p.dtype for p in params}
    if len(dtypes) > 1:
        raise ValueError(f"{what}: enc.model mixes dtypes ({', '.join(sorted(str(d) for d in dtypes))}); "
                         "call enc.model.float() to analyse it in float32.")
    dtype = dtypes.pop()
    if dtype not in PRECISIONS:
        raise ValueError(f"{what}: enc.model computes in {dtype}, which cannot hold the decomposition's self-checks "
                         "(sums exact to about 1e-4); call enc.model.float() (float32, as load_encoder loads it) or "
                         "enc.model.double() first.")
    return dtype


class _Workspace:
    """Flat scratch buffers by name, grown on demand and reused (large CPU allocations are slow)."""

    def __init__(self, device: torch.device | str, dtype: torch.dtype = torch.float32) -> None:
        self.device = torch.device(device)
        self.dtype = dtype
        self._bufs: dict[str, torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        numel = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, device=self.device, dtype=self.dtype)
            self._bufs[name] = buf
        return buf[:numel].view(shape)

    def projection(self, n_heads: int, d_head: int) -> torch.Tensor:
        """``(D, H)`` block-diagonal matrix of one fixed random unit vector per head (for the attention check)."""
        key = f"projection/{n_heads}/{d_head}"
        r = self._bufs.get(key)
        if r is None:
            gen = torch.Generator().manual_seed(20210)
            dirs = torch.randn(n_heads, d_head, generator=gen)
            dirs /= dirs.norm(dim=1, keepdim=True)  # (H, dh)
            r = torch.block_diag(*dirs[:, :, None]).to(self.device, self.dtype)  # (H*dh, H)
            self._bufs[key] = r
        return r


def _norm(z: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(z, dim=-1)


#: Seed of the fixed random unit direction along which the split self-check compares f_j(x_j).
SPLIT_PROBE_SEED = 20211


def split_probe(out_module: Any, n_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe of the split self-check, taken from the ``attn_out`` module itself.

    Parameters
    ----------
    out_module : torch.nn.Linear or torch.Tensor
        The layer's attention output projection, or its weight ``(D, D)``
        (out x in, as ``torch.nn.Linear`` stores it).
    n_heads : int

    Returns
    -------
    u : torch.Tensor, (D,)
        A fixed random unit vector in the output space.
    p_heads : torch.Tensor, (D, H)
        ``p = W_O^T u`` (so that ``(c W_O^T) . u = c . p`` for any context
        row ``c``), cut into one column per head: column h holds p on head h's
        ``d'`` input coordinates and 0 elsewhere.
    """
    weight = getattr(out_module, "weight", out_module).detach()  # (D_out, D_in), as torch.nn.Linear stores it
    d_out, d_in = weight.shape
    gen = torch.Generator().manual_seed(SPLIT_PROBE_SEED)
    u = torch.randn(d_out, generator=gen, dtype=torch.float64)
    u = (u / u.norm()).to(weight.dtype).to(weight.device)  # (D,)
    p = torch.mv(weight.t(), u)  # (D_in,)
    dh = d_in // n_heads
    p_heads = torch.zeros(d_in, n_heads, dtype=weight.dtype, device=weight.device)  # (D, H)
    for h in range(n_heads):
        p_heads[h * dh:(h + 1) * dh, h] = p[h * dh:(h + 1) * dh]
    return u, p_heads


def _self_part(v: torch.Tensor, a_self: torch.Tensor, w_o: torch.Tensor, tmp: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``f_j(x_j) = sum_h alpha^h_jj v^h_j W_O^h`` for a block: ``v`` (b, N, D), ``a_self`` (b, N, H) -> (b, N, D).

    ``tmp`` (b, N, H, d') and ``out`` (b*N, D) are scratch buffers. Kept as a
    function of its own so that the tests can replace it with a faulty
    version and see the split self-check fail.
    """
    b, N, D = v.shape
    H = a_self.shape[-1]
    self_ctx = torch.mul(v.view(b, N, H, D // H), a_self.unsqueeze(-1), out=tmp)
    return torch.mm(self_ctx.view(b * N, D), w_o.t(), out=out).view(b, N, D)


def decompose_layer(
    x: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    context: torch.Tensor,
    attn_out: torch.Tensor,
    ln_in: torch.Tensor,
    ln_out: torch.Tensor,
    additive_mask: torch.Tensor,
    w_o: torch.Tensor,
    b_o: torch.Tensor | None,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    eps: float,
    n_heads: int,
    *,
    keep_vectors: bool = True,
    out: dict[str, torch.Tensor] | None = None,
    workspace: "_Workspace | None" = None,
    probe: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """The decomposition of one layer from the tensors its forward pass produced.

    Parameters
    ----------
    x : (B, N, D)
        The layer's input (the residual stream).
    q, k, v : (B, N, D)
        Outputs of the query/key/value projections (biases included).
    context : (B, N, D)
        The attention output before ``W_O`` (the input of ``attn_out``).
    attn_out : (B, N, D)
        The output of ``attn_out`` (``context W_O^T + b_O``).
    ln_in, ln_out : (B, N, D)
        Input (``attn_out + x``) and output of the model's LayerNorm.
    additive_mask : (B, N)
        0 for real tokens, a large negative number for padding; padding keys
        get no attention and padding positions are left out of the checks.
    w_o : (D, D)
        ``attn_out`` weight (``torch.nn.Linear`` layout, out x in).
    b_o : (D,) or None
    gamma, beta : (D,)
        LayerNorm parameters; ``eps`` its epsilon.
    n_heads : int
    keep_vectors : bool
        Return the four (B, N, D) vectors as well.
    out : dict of str to (B, N, D) tensors, optional
        Where to write ``mix``, ``keep_attn``, ``keep_res`` and ``bias`` (e.g.
        slices of the result's (L, B, N, D) fields), saving a copy.
    workspace : _Workspace, optional
        Scratch buffers reused from layer to layer (fewer large allocations).
        Vectors that are returned and not written to ``out`` live in it, so
        they are only valid until the next call with the same workspace.
    probe : (u, p_heads), optional
        The split self-check's probe (:func:`split_probe`), best taken from
        the model's ``attn_out`` module rather than from ``w_o``; default: made
        from ``w_o``.

    Returns
    -------
    dict of str to torch.Tensor
        Every per-token field of :class:`Mixing` for this layer (``(B, N)``;
        ``alpha_self`` ``(B, H, N)``), the vectors when asked, and the two
        self-check errors ``ln_error``, ``attention_error`` and
        ``split_error`` (0-d tensors: the largest absolute deviation from the
        model's LayerNorm output, from its attention output, and of
        ``f_j(x_j)`` and ``sum_{i!=j} f_j(x_i)`` along the probe direction from
        their independent recomputation, over the real positions).
    """
    B, N, D = x.shape
    H = n_heads
    dh = D // H
    out = out or {}
    ws = workspace if workspace is not None else _Workspace(x.device, x.dtype)
    pad = additive_mask != 0  # (B, N)
    has_pad = bool(pad.any())
    inf = float("inf")

    # Everything runs on blocks of whole sequences of about BLOCK_TOKENS tokens, so that the attention
    # weights and the dozen element-wise passes below work on data that is still in the CPU cache.
    dev = x.device
    vec = {}
    if keep_vectors:
        vec = {name: out[name] if out.get(name) is not None else torch.empty((B, N, D), device=dev, dtype=x.dtype)
               for name in VECTOR_FIELDS}
    norm_names = ("norm_mix", "norm_keep_attn", "norm_res", "norm_keep", "norm_mix_ln", "norm_keep_attn_ln", "norm_res_ln", "norm_keep_ln")
    norms = {name: torch.empty((B, N), device=dev, dtype=x.dtype) for name in norm_names}  # (B, N) each
    a_self = torch.empty((B, N, H), device=dev, dtype=x.dtype)  # alpha^h_{j,j}
    b_c = (b_o - b_o.mean()) * gamma if b_o is not None else torch.zeros_like(gamma)  # (D,): centred b_O times gamma
    r = ws.projection(H, dh)  # (D, H), block-diagonal: one fixed random unit vector per head
    if probe is None:
        probe = split_probe(w_o, H)
    u, p_heads = probe  # (D,), (D, H)
    p_all = p_heads.sum(dim=1)  # (D,) = W_O^T u
    ln_error = torch.zeros((), device=dev, dtype=x.dtype)
    attention_error = torch.zeros((), device=dev, dtype=x.dtype)
    split_error = torch.zeros((), device=dev, dtype=x.dtype)
    step = max(1, BLOCK_TOKENS // max(N, 1))
    for s0 in range(0, B, step):
        sl = slice(s0, min(B, s0 + step))
        b = sl.stop - s0
        xb = x[sl]  # (b, N, D)
        pad_b = pad[sl]  # (b, N)
        pad_here = has_pad and bool(pad_b.any())

        # attention weights from the model's own Q and K: softmax(Q K^T / sqrt(d') + mask), per head;
        # the scaling rides on the copy of Q into head-major layout
        q3 = torch.mul(q[sl].view(b, N, H, dh).transpose(1, 2), dh**-0.5, out=ws.get("q3", (b, H, N, dh))).view(b * H, N, dh)
        k3t = ws.get("k3t", (b, H, dh, N)).copy_(k[sl].view(b, N, H, dh).permute(0, 2, 3, 1)).view(b * H, dh, N)
        scores = ws.get("scores", (b * H, N, N))
        if pad_here:
            mask = additive_mask[sl, None, None, :].expand(b, H, 1, N).reshape(b * H, 1, N)  # (b*H, 1, N)
            torch.baddbmm(mask, q3, k3t, out=scores)
        else:
            torch.bmm(q3, k3t, out=scores)
        alpha = torch.softmax(scores, dim=-1)  # (b*H, N, N)
        a_self[sl] = alpha.diagonal(dim1=-2, dim2=-1).view(b, H, N).transpose(1, 2)
        # self-check 1: alpha V must be the model's own attention output (the input of attn_out), compared along
        # one fixed random unit direction r^h per head: (alpha V) r^h = alpha (V r^h), a matrix-vector product
        # instead of a second alpha V; any difference in alpha shows up in it (with probability 1).
        v_r = torch.mm(v[sl].reshape(b * N, D), r).view(b, N, H).transpose(1, 2).reshape(b * H, N, 1)  # (b*H, N, 1)
        ctx_r = torch.mm(context[sl].reshape(b * N, D), r).view(b, N, H).transpose(1, 2)  # (b, H, N)
        diff_ctx = torch.bmm(alpha, v_r).view(b, H, N).sub_(ctx_r)  # (b, H, N)
        if pad_here:
            diff_ctx.masked_fill_(pad_b[:, None, :], 0.0)
        attention_error = torch.maximum(attention_error, torch.linalg.vector_norm(diff_ctx, ord=inf))
        # reference for self-check 3, by a path that shares nothing with f_self below: the diagonal read off
        # alpha again, V projected per head on p_h = (W_O^T u)_h, and the model's own context projected on W_O^T u:
        #   f_j(x_j) . u = sum_h alpha^h_jj (v^h_j . p_h),   sum_{i!=j} f_j(x_i) . u = context_j . p - f_j(x_j) . u
        diag = alpha.diagonal(dim1=-2, dim2=-1).reshape(b, H, N)  # (b, H, N)
        v_p = torch.mm(v[sl].reshape(b * N, D), p_heads).view(b, N, H).transpose(1, 2)  # (b, H, N)
        ref_self_u = (diag * v_p).sum(dim=1)  # (b, N)
        ref_others_u = torch.mv(context[sl].reshape(b * N, D), p_all).view(b, N).sub_(ref_self_u)  # (b, N)
        del alpha, diag, v_p

        # f_j(x_j) = sum_h alpha^h_jj v^h_j W_O^h ; the rest of the attention output is what attention mixes in
        f_self = _self_part(v[sl], a_self[sl], w_o, ws.get("tmp", (b, N, H, dh)), ws.get("f_self", (b * N, D)))
        f_others = torch.sub(attn_out[sl], f_self, out=ws.get("f_others", (b, N, D)))  # (b, N, D)
        if b_o is not None:
            f_others.sub_(b_o)

        # self-check 3: the split itself. Checks 1 and 2 cannot see a wrong f_j(x_j) (the remainder absorbs it).
        diff_self = torch.mv(f_self.reshape(b * N, D), u).view(b, N).sub_(ref_self_u)  # (b, N)
        diff_others = torch.mv(f_others.reshape(b * N, D), u).view(b, N).sub_(ref_others_u)  # (b, N)
        split_b = torch.maximum(diff_self.abs_(), diff_others.abs_())
        if pad_here:
            split_b.masked_fill_(pad_b, 0.0)
        split_error = torch.maximum(split_error, split_b.max())

        # g(z) = (z - m(z)) / s(y_j) * gamma, with s(y_j) the standard deviation of the real LayerNorm input
        y = ln_in[sl]
        centred = torch.sub(y, y.mean(dim=-1, keepdim=True), out=ws.get("tmp", (b, N, D)))  # (b, N, D)
        var = torch.linalg.vector_norm(centred, dim=-1, keepdim=True).square_().div_(D)  # (b, N, 1), population variance
        inv_s = torch.rsqrt(var.add_(eps))  # (b, N, 1)
        scale = torch.mul(inv_s, gamma, out=ws.get("scale", (b, N, D)))  # (b, N, D)

        def g(z: torch.Tensor, name: str, scale: torch.Tensor = scale, sl: slice = sl, b: int = b) -> torch.Tensor:
            dst = vec[name][sl] if name in vec else ws.get(name, (b, N, D))
            return torch.sub(z, z.mean(dim=-1, keepdim=True), out=dst).mul_(scale)

        mix = g(f_others, "mix")  # (b, N, D)
        keep_attn = g(f_self, "keep_attn")  # (b, N, D)
        keep_res = g(xb, "keep_res")  # (b, N, D)
        if keep_vectors:  # g(b_O) + beta
            torch.addcmul(beta, inv_s, b_c, out=vec["bias"][sl])

        def norm(z: torch.Tensor, name: str, sl: slice = sl) -> None:
            torch.linalg.vector_norm(z, dim=-1, out=norms[name][sl])

        norm(f_others, "norm_mix")
        norm(f_self, "norm_keep_attn")
        norm(xb, "norm_res")
        norm(torch.add(f_self, xb, out=ws.get("tmp", (b, N, D))), "norm_keep")
        norm(mix, "norm_mix_ln")
        norm(keep_attn, "norm_keep_attn_ln")
        norm(keep_res, "norm_res_ln")
        keep_ln = torch.add(keep_attn, keep_res, out=ws.get("tmp", (b, N, D)))  # (b, N, D)
        norm(keep_ln, "norm_keep_ln")

        # self-check 2: the four vectors must add up to the model's own LayerNorm output
        diff = keep_ln.add_(mix)
        if keep_vectors:
            diff.add_(vec["bias"][sl])
        else:
            diff.addcmul_(inv_s, b_c).add_(beta)
        diff.sub_(ln_out[sl])
        if pad_here:
            diff.masked_fill_(pad_b[..., None], 0.0)
        ln_error = torch.maximum(ln_error, torch.linalg.vector_norm(diff, ord=inf))

    n_mix, n_keep_attn, n_res, n_keep = norms["norm_mix"], norms["norm_keep_attn"], norms["norm_res"], norms["norm_keep"]
    n_mix_ln, n_keep_attn_ln, n_keep_ln = norms["norm_mix_ln"], norms["norm_keep_attn_ln"], norms["norm_keep_ln"]
    alpha_self = a_self.transpose(1, 2)  # (B, H, N)
    attn_w = 1.0 - alpha_self.mean(dim=1)  # (B, N)
    res = {
        "ratio": n_mix_ln / (n_mix_ln + n_keep_ln),
        "attnres_n": n_mix / (n_mix + n_keep),
        "attn_n": n_mix / (n_mix + n_keep_attn),
        "attn_w": attn_w,
        "attnres_w": attn_w / 2.0,
        **norms,
        "alpha_self": alpha_self,
        "ln_error": ln_error,
        "attention_error": attention_error,
        "split_error": split_error,
    }
    res.update(vec)
    return res


# ---------------------------------------------------------------------------
# decompose
# ---------------------------------------------------------------------------


class _StopForward(Exception):
    """Raised from the last needed hook: the rest of the forward pass is not needed."""


def _run_hooked(enc: Any, chunk: Mapping[str, torch.Tensor], hooks: Iterable[Iterable[Any]]) -> None:
    """One forward pass of ``enc.model`` on ``chunk`` with forward hooks attached.

    ``hooks`` yields groups of hook handles (e.g. :func:`_register` per layer); they
    are registered as they are drawn and always removed, also when registration
    fails half-way. A hook may end the pass early by raising :class:`_StopForward`.
    """
    handles: list[Any] = []
    try:
        for group in hooks:
            handles.extend(group)
        with torch.no_grad():
            enc.model(**chunk)
    except _StopForward:
        pass
    finally:
        for h in handles:
            h.remove()


_PER_TOKEN_FIELDS = METRICS




def _as_tensor(value: Any, key: str) -> torch.Tensor:
    try:
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    except Exception as err:  # noqa: BLE001
        raise TypeError(f"batch[{key!r}] cannot be turned into a tensor ({type(value).__name__}).") from err
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2:
        raise ValueError(f"batch[{key!r}] must have shape (B, N); got {tuple(t.shape)}.")
    if t.dtype.is_floating_point or t.dtype.is_complex:
        raise TypeError(f"batch[{key!r}] must hold integers; got {t.dtype}.")
    return t.long().cpu()


def _as_batch(enc: Any, batch: Any, max_length: int | None) -> dict[str, torch.Tensor]:
    """Texts, pairs or a tokenized dict -> validated ``input_ids``/``attention_mask``/``token_type_ids`` on the CPU."""
    if isinstance(batch, Mapping):
        unknown = [k for k in batch if k not in BATCH_KEYS]
        if unknown:
            raise ValueError(f"batch has unexpected key(s) {unknown}; a tokenized batch may hold {', '.join(BATCH_KEYS)}.")
        if "input_ids" not in batch:
            raise ValueError("the tokenized batch has no 'input_ids'; pass the output of mixlib.mask_tokens / the tokenizer.")
        ids = _as_tensor(batch["input_ids"], "input_ids")
        out = {"input_ids": ids}
        for key in ("attention_mask", "token_type_ids"):
            if batch.get(key) is not None:
                t = _as_tensor(batch[key], key)
                if t.shape != ids.shape:
                    raise ValueError(f"batch[{key!r}] has shape {tuple(t.shape)} but input_ids has {tuple(ids.shape)}.")
                out[key] = t
        if "attention_mask" not in out:
            out["attention_mask"] = torch.ones_like(ids)
        if ids.numel() == 0:
            raise ValueError("the tokenized batch is empty; give at least one sequence with at least one token.")
        if int(ids.min()) < 0 or int(ids.max()) >= enc.vocab_size:
            raise ValueError(f"input_ids hold ids outside 0..{enc.vocab_size - 1}, the vocabulary of {enc.name}.")
        if not bool(((out["attention_mask"] == 0) | (out["attention_mask"] == 1)).all()):
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token).")
        if ids.shape[1] > enc.max_positions:
            raise ValueError(f"sequences have {ids.shape[1]} tokens; {enc.name} accepts at most {enc.max_positions}.")
        empty = torch.nonzero(out["attention_mask"].sum(1) == 0).flatten().tolist()
        if empty:
            raise ValueError(f"sequence(s) {empty[:5]} have no real token (attention_mask all 0).")
        return out
    from .data import tokenize

    return tokenize(enc, batch, max_length=max_length)


def _available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil is optional
        pass
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _decide_vectors(vectors: Any, L: int, B: int, N: int, D: int) -> bool:
    size = 4 * L * B * N * D * 4  # four float32 (L, B, N, D) fields
    if vectors is None:
        if size <= VECTOR_LIMIT_BYTES:
            return True
        warnings.warn(
            f"decompose: the four (L, B, N, D) vector fields would take {_gib(size)} "
            f"(L={L}, B={B}, N={N}, D={D}); keeping only norms and ratios. "
            "Pass vectors=True to keep them anyway, or fewer texts/layers.",
            UserWarning,
            stacklevel=3,
        )
        return False
    if vectors is False:
        return False
    if vectors is True:
        avail = _available_memory()
        if avail is not None and size > 0.8 * avail:
            raise MemoryError(
                f"decompose(vectors=True) would need {_gib(size)} for the four (L, B, N, D) vector fields "
                f"(L={L}, B={B}, N={N}, D={D}) but only {_gib(avail)} of memory is available. "
                "Use vectors=False (norms and ratios only), fewer texts, or layers=[...]."
            )
        return True
    raise TypeError(f"vectors must be None (automatic), True or False; got {vectors!r}.")


def _progress(total: int, n_chunks: int, progress: Any, desc: str) -> Any:
    show = n_chunks > 1 if progress is None else bool(progress)
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="seq")


def _first(args: tuple, kwargs: dict, name: str = "input") -> torch.Tensor:
    return args[0] if args else kwargs[name]


def decompose(
    enc: Any,
    batch: Any,
    *,
    layers: Any = None,
    batch_size: int = 32,
    vectors: bool | None = None,
    progress: bool | None = None,
    max_length: int | None = None,
    atol: float = 1e-4,
) -> Mixing:
    """Split each attention block's LayerNorm output into mix / keep_attn / keep_res / bias.

    Parameters
    ----------
    enc : mixlib.Encoder
        A post-LN BERT-family encoder (:func:`mixlib.load_encoder`). Runs on
        ``enc.device``; results come back on the CPU.
    batch : list of str, list of (str, str), or dict of tensors
        Texts, sentence pairs (``[CLS] a [SEP] b [SEP]``), or a tokenized
        batch such as the output of :func:`mixlib.mask_tokens` (keys
        ``input_ids``, optional ``attention_mask`` and ``token_type_ids``).
    layers : int or list of int, optional
        Layers to analyse, 0-based; default all. The forward pass stops after
        the last one needed.
    batch_size : int, default 32
        Sequences per forward pass. Many texts are processed in chunks, each
        padded only as far as its own longest sequence; results are padded to
        the longest sequence overall.
    vectors : bool or None, default None
        Keep the four ``(L, B, N, D)`` vector fields? ``None``: when they take
        at most 1 GiB (otherwise one warning, norms and ratios only). ``True``:
        always (``MemoryError`` when they would not fit in memory). ``False``:
        never.
    progress : bool or None, default None
        ``tqdm`` progress bar; ``None`` shows one when there is more than one chunk.
    max_length : int, optional
        For texts: longest sequence in tokens (default: the model's limit,
        512); longer texts are truncated with a warning.
    atol : float, default 1e-4
        Tolerance of the self-checks.

    Returns
    -------
    Mixing

    Raises
    ------
    RuntimeError
        The decomposition does not reproduce the model's own LayerNorm output,
        the recomputed attention its attention output, or f_j(x_j) its
        independent recomputation (the split check) within ``atol`` on some
        layer; the message names the layer and the error.
    ValueError, TypeError
        Bad input: empty text list, a non-string item, a layer out of range,
        a malformed tokenized batch.

    Examples
    --------
    >>> enc = mixlib.load_encoder()
    >>> m = mixlib.decompose(enc, mixlib.mask_tokens(enc, ["The cat sat on the mat."]))
    >>> m.ratio.shape  # (L, B, N)
    torch.Size([6, 1, 9])
    >>> mixlib.mixing_table(m)  # layer x category, percent
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is not allowed; give a positive int.")
    from .data import check_atol

    atol = check_atol(atol)
    mdtype = check_precision(enc, "decompose")
    layer_idx = enc.check_layers(layers)
    inputs = _as_batch(enc, batch, max_length)
    ids, am = inputs["input_ids"], inputs["attention_mask"]
    B, N = ids.shape
    L, D, H = len(layer_idx), enc.d_model, enc.n_heads
    keep_vectors = _decide_vectors(vectors, L, B, N, D)
    real = am.bool()  # (B, N)

    nan = float("nan")
    stats = {name: torch.full((L, B, N), nan) for name in _PER_TOKEN_FIELDS}  # (L, B, N)
    alpha_self = torch.full((L, B, H, N), nan)  # (L, B, H, N)
    # (L, B, N, D); every element is written below (values, or NaN at padding)
    vecs = {name: torch.empty((L, B, N, D)) for name in VECTOR_FIELDS} if keep_vectors else {}
    max_err = np.zeros(L)
    max_ctx_err = np.zeros(L)
    max_split_err = np.zeros(L)

    dev = enc.device
    direct = torch.device(dev).type == "cpu" and mdtype == torch.float32  # write straight into the float32 results
    row_of = {layer: li for li, layer in enumerate(layer_idx)}
    params = {}
    probes = {}
    for layer in layer_idx:
        w_o, b_o = enc.projection(layer, "attn_out")
        ln = enc.module(layer, "attn_norm")
        params[layer] = (w_o, b_o, ln.weight.detach(), ln.bias.detach(), float(ln.eps))
        # the split self-check's probe comes from the module itself, not from w_o above
        probes[layer] = split_probe(enc.module(layer, "attn_out"), H)

    workspace = _Workspace(dev, mdtype)
    bar = _progress(B, math.ceil(B / int(batch_size)), progress, f"decompose ({enc.name})")
    state: dict[str, Any] = {}
    try:
        for b0 in range(0, B, int(batch_size)):
            b1 = min(B, b0 + int(batch_size))
            cols = torch.nonzero(am[b0:b1].any(0)).flatten()
            n = int(cols.max()) + 1  # trailing all-padding columns are dropped for this chunk
            chunk = {k: v[b0:b1, :n].to(dev) for k, v in inputs.items()}
            chunk_real = real[b0:b1, :n]  # (b, n)
            chunk_real_dev = chunk_real.to(dev)
            additive = torch.zeros(chunk_real.shape, dtype=mdtype, device=dev)
            additive.masked_fill_(~chunk_real_dev, torch.finfo(mdtype).min)  # (b, n)
            state.clear()

            def finish_layer(layer: int, ln_in: torch.Tensor, ln_out: torch.Tensor) -> None:
                li = row_of[layer]
                w_o, b_o, gamma, beta, eps = params[layer]
                got = state.pop(layer)
                dst = {name: t[li, b0:b1, :n] for name, t in vecs.items()} if direct else None
                res = decompose_layer(
                    got["x"], got["q"], got["k"], got["v"], got["context"], got["attn_out"], ln_in, ln_out,
                    additive, w_o, b_o, gamma, beta, eps, H, keep_vectors=keep_vectors, out=dst, workspace=workspace,
                    probe=probes[layer],
                )
                err = float(res.pop("ln_error"))
                ctx_err = float(res.pop("attention_error"))
                split_err = float(res.pop("split_error"))
                if not ctx_err <= atol:
                    raise RuntimeError(
                        f"decompose: layer {layer}: attention weights recomputed from the model's Q and K do not "
                        f"reproduce its attention output (max abs error {ctx_err:.3e} > atol={atol:g}). The model "
                        "computes attention differently from standard BERT (is it in train mode with dropout? relative positions? "
                        "a different scaling?); mixlib supports post-LN BERT-family encoders with standard scaled dot-product attention."
                    )
                if not err <= atol:
                    raise RuntimeError(
                        f"decompose: layer {layer}: mix + keep_attn + keep_res + bias differs from the model's own "
                        f"LayerNorm output by {err:.3e} (max abs error > atol={atol:g}); the decomposition is not exact "
                        "for this model."
                    )
                if not split_err <= atol:
                    raise RuntimeError(
                        f"decompose: layer {layer}: f_j(x_j) or sum_{{i!=j}} f_j(x_i) differs from its independent "
                        f"recomputation (alpha^h_jj v^h_j along W_O^T u, per head, from the attn_out module) by "
                        f"{split_err:.3e} (max abs error > atol={atol:g}). The split between what attention mixes and what "
                        "it keeps is wrong: check which W_O slice goes with which head, W_O's orientation (out x in) "
                        "and that b_O is taken out of the attention output."
                    )
                max_err[li] = max(max_err[li], err)
                max_split_err[li] = max(max_split_err[li], split_err)
                max_ctx_err[li] = max(max_ctx_err[li], ctx_err)
                pad = ~chunk_real  # (b, n)
                any_pad = bool(pad.any())
                for name in _PER_TOKEN_FIELDS:
                    stats[name][li, b0:b1, :n].copy_(res[name]).masked_fill_(pad, nan)
                alpha_self[li, b0:b1, :, :n].copy_(res["alpha_self"]).masked_fill_(pad[:, None, :], nan)
                for name, t in vecs.items():
                    view = t[li, b0:b1, :n]
                    if not direct:
                        view.copy_(res[name])
                    if any_pad:
                        view.masked_fill_(pad[..., None], nan)
                    if n < N:
                        t[li, b0:b1, n:] = nan
                if layer == layer_idx[-1]:
                    raise _StopForward

            try:
                _run_hooked(enc, chunk, (_register(enc, layer, state, finish_layer) for layer in layer_idx))
            finally:
                state.clear()
            if bar is not None:
                bar.update(b1 - b0)
    finally:
        if bar is not None:
            bar.close()

    from .data import token_categories

    tok = enc.tokenizer
    token_strings = tuple(tuple(tok.convert_ids_to_tokens(ids[b][real[b]].tolist())) for b in range(B))
    return Mixing(
        layers=layer_idx,
        input_ids=ids,
        attention_mask=am,
        categories=token_categories(enc, ids, am),
        alpha_self=alpha_self,
        max_error=max_err,
        max_attention_error=max_ctx_err,
        max_split_error=max_split_err,
        token_strings=token_strings,
        model_name=enc.name,
        **stats,
        **vecs,
    )


def _register(enc: Any, layer: int, state: dict, finish: Any) -> list[Any]:
    """Forward hooks on the unmodified modules of one layer; ``finish`` runs at its LayerNorm."""
    slot = state.setdefault(layer, {})

    def on_query(module, args, kwargs, output):
        slot["x"] = _first(args, kwargs)
        slot["q"] = output

    def on_key(module, args, kwargs, output):
        slot["k"] = output

    def on_value(module, args, kwargs, output):
        slot["v"] = output

    def on_attn_out(module, args, kwargs, output):
        slot["context"] = _first(args, kwargs)
        slot["attn_out"] = output

    def on_norm(module, args, kwargs, output):
        missing = [k for k in ("x", "q", "k", "v", "context", "attn_out") if k not in slot]
        if missing:
            raise RuntimeError(f"decompose: layer {layer}: the forward pass did not go through {missing} before the LayerNorm.")
        finish(layer, _first(args, kwargs), output)

    hooks = {"query": on_query, "key": on_key, "value": on_value, "attn_out": on_attn_out, "attn_norm": on_norm}
    return [enc.module(layer, role).register_forward_hook(fn, with_kwargs=True) for role, fn in hooks.items()]


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}.")
    return metric


#: Second level of the columns of :func:`mixing_table` / :func:`mixing_summary` when ``ci`` is given.
CI_LEVELS: tuple[str, ...] = ("estimate", "low", "high")


def _check_ci(ci: Any, n_boot: Any, seed: Any) -> None:
    if isinstance(ci, bool) or not isinstance(ci, (float, int, np.floating)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci={ci!r} is not allowed: give the confidence level as a float in (0, 1), e.g. 0.95, or None.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 10:
        raise ValueError(f"n_boot={n_boot!r} is not allowed: give an int >= 10 (e.g. 1000).")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r} is not allowed: give a non-negative int.")


def bootstrap_counts(n_sequences: int, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """``(n_boot, B)`` int array: how often each sequence is drawn in each bootstrap resample.

    Every resample draws ``B`` sequences with replacement
    (``numpy.random.default_rng(seed)``); a statistic over sequences becomes a
    weighted one, so all resamples are evaluated with a few matrix products.
    """
    rng = np.random.default_rng(int(seed))
    return rng.multinomial(int(n_sequences), np.full(int(n_sequences), 1.0 / int(n_sequences)), size=int(n_boot))


def _interval(samples: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over the last axis (NaN samples ignored)."""
    alpha = (1.0 - float(ci)) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows (absent category) stay NaN
        lo = np.nanquantile(samples, alpha, axis=-1)
        hi = np.nanquantile(samples, 1.0 - alpha, axis=-1)
    return lo, hi


def _with_ci(estimate: Any, low: Any, high: Any, name: str) -> Any:
    import pandas as pd

    out = pd.concat({lvl: t for lvl, t in zip(CI_LEVELS, (estimate, low, high))}, axis=1)  # (level, column)
    out = out.swaplevel(0, 1, axis=1)
    cols = list(estimate.columns)
    out = out.reindex(columns=pd.MultiIndex.from_product([cols, list(CI_LEVELS)], names=[name, "stat"]))
    return out


def layer_means(
    values: Any,
    real: Any,
    *,
    select: Any = None,
    ci: float | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> Any:
    """Per-layer mean of any per-token quantity, as the official figure averages, with an optional bootstrap interval.

    The mean is taken within each sequence over the selected real tokens,
    then over the sequences that have at least one (as :func:`mixing_table`);
    the interval resamples sequences with replacement (:func:`bootstrap_counts`).
    Use it for a quantity derived in a notebook, e.g. the difference of two
    ratios token by token, so that its uncertainty is computed the same way.

    Parameters
    ----------
    values : array-like, (L, B, N)
        NaN allowed where ``real`` or ``select`` is False.
    real : array-like of bool, (B, N)
    select : array-like of bool, (B, N) or (L, B, N), optional
        Tokens to average (default: all real tokens).
    ci, n_boot, seed
        As for :func:`mixing_table`.

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (0..L-1), column ``estimate`` (and ``low``, ``high`` with ``ci``).
    """
    import pandas as pd

    vals = np.asarray(values.numpy() if isinstance(values, torch.Tensor) else values, dtype=float)
    real = np.asarray(real.numpy() if isinstance(real, torch.Tensor) else real, dtype=bool)
    if vals.ndim != 3 or vals.shape[1:] != real.shape:
        raise ValueError(f"values must be (L, B, N) with (B, N) = real.shape {real.shape}; got {vals.shape}.")
    sel = real if select is None else np.asarray(select.numpy() if isinstance(select, torch.Tensor) else select, dtype=bool) & real
    sel = np.broadcast_to(sel, vals.shape)  # (L, B, N)
    count = sel.sum(axis=2)  # (L, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_seq = np.where(sel, vals, 0.0).sum(axis=2) / count  # (L, B)
    present = count > 0
    filled = np.where(present, per_seq, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = filled.sum(axis=1) / present.sum(axis=1)
    out = {"estimate": est}
    if ci is not None:
        _check_ci(ci, n_boot, seed)
        w = bootstrap_counts(real.shape[0], n_boot, seed).astype(float)  # (R, B)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.einsum("lb,rb->lr", filled, w) / np.einsum("lb,rb->lr", present.astype(float), w)  # (L, R)
        out["low"], out["high"] = _interval(boot, ci)
    return pd.DataFrame(out, index=pd.Index(range(vals.shape[0]), name="layer"))


def mixing_table(
    mixing: Mixing,
    by: str = "category",
    metric: str = "ratio",
    *,
    percent: bool | None = None,
    ci: float | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> Any:
    """Per-layer averages by token category, computed as the official figure does.

    For every sequence, the metric is averaged over its tokens of a category;
    these per-sequence means are then averaged over the sequences that contain
    the category (a sequence without ``[MASK]`` does not count for
    ``[MASK]``). ``全体`` averages all real tokens the same way. Padding is
    never counted.

    Parameters
    ----------
    mixing : Mixing
    by : {"category"}
        Group tokens by their category (:func:`mixlib.token_categories`).
    metric : str, default "ratio"
        Any per-token field (:data:`METRICS`): ``ratio`` (AttnResLn-N),
        ``attnres_n``, ``attn_n``, ``attn_w``, ``attnres_w`` or a norm.
    percent : bool, optional
        Multiply by 100. Default: True for the ratio metrics (the paper prints
        percentages), False for norms.
    ci : float, optional
        Also return a seeded bootstrap confidence interval at this level
        (e.g. 0.95): the sequences are resampled with replacement ``n_boot``
        times, the table is recomputed on each resample (exactly as above,
        so a resample without a ``[MASK]`` token leaves that cell out), and
        the percentile interval is reported. It measures how much the numbers
        would move with other texts of the same kind, not the masking seed
        or the model.
    n_boot : int, default 1000
        Bootstrap resamples (with ``ci``).
    seed : int, default 0
        Seed of the resampling (with ``ci``); the same seed gives the same interval.

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (0-based model layers), columns ``全体`` then
        :data:`mixlib.plots.CATEGORY_ORDER`; NaN where no sequence has the
        category. With ``ci``, the columns are a MultiIndex
        ``(category, stat)`` with ``stat`` in :data:`CI_LEVELS`
        (``estimate``, ``low``, ``high``); ``table.xs("estimate", axis=1,
        level="stat")`` is the table without ``ci``.

    Examples
    --------
    >>> t = mixing_table(m, ci=0.95, n_boot=1000, seed=0)
    >>> t[("全体", "high")] - t[("全体", "low")]  # width of the 95% interval, per layer
    """
    import pandas as pd

    from .data import category_names

    if by != "category":
        raise ValueError(f"by={by!r} is not supported; use by='category'.")
    _check_metric(metric)
    if ci is not None:
        _check_ci(ci, n_boot, seed)
    if percent is None:
        percent = metric in RATIO_METRICS
    vals = mixing.metric(metric).double().numpy()  # (L, B, N)
    real = mixing.real.numpy()  # (B, N)
    cats = mixing.categories
    groups = {OVERALL: real, **{c: (cats == c) & real for c in category_names()}}
    L = len(mixing.layers)
    counts = bootstrap_counts(mixing.n_sequences, n_boot, seed).astype(float) if ci is not None else None  # (R, B)
    table, low, high = {}, {}, {}
    for name, sel in groups.items():
        count = sel.sum(axis=1)  # (B,)
        sums = np.where(sel[None], vals, 0.0).sum(axis=2)  # (L, B)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_seq = sums / count[None]  # (L, B); NaN where the category is absent
        present = count > 0
        table[name] = per_seq[:, present].mean(axis=1) if present.any() else np.full(L, np.nan)
        if counts is not None:
            w = counts * present[None]  # (R, B): draws of sequences that have the category
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = (np.where(present[None], per_seq, 0.0) @ w.T) / w.sum(axis=1)[None]  # (L, R)
            low[name], high[name] = _interval(boot, ci)
    index = pd.Index(list(mixing.layers), name="layer")
    scale = 100.0 if percent else 1.0
    df = pd.DataFrame(table, index=index) * scale
    df.columns.name = "category"
    if ci is None:
        return df
    return _with_ci(df, pd.DataFrame(low, index=index) * scale, pd.DataFrame(high, index=index) * scale, "category")


def mixing_summary(mixing: Mixing, *, percent: bool = True, ci: float | None = None, n_boot: int = 1000, seed: int = 0) -> Any:
    """Mean, max and min of each mixing-ratio variant over all real tokens and layers (official Table 1).

    Parameters
    ----------
    mixing : Mixing
    percent : bool, default True
        Report percentages, as Table 1 does; False gives fractions.
    ci : float, optional
        Also return a seeded bootstrap confidence interval over sequences at
        this level (see :func:`mixing_table`). The interval of the mean is the
        one to read; those of max and min are given for completeness but a
        bootstrap cannot see values beyond the sample's own extremes, so they
        understate the uncertainty of extremes.
    n_boot : int, default 1000
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        Index: Attn-W, Attn-N, AttnRes-W, AttnRes-N, AttnResLn-N (``variant``);
        columns ``mean``, ``max``, ``min``. Pooled means every real token of
        every analysed layer counts once. With ``ci``, MultiIndex columns
        ``(statistic, stat)`` with ``stat`` in :data:`CI_LEVELS`.
    """
    import pandas as pd

    if ci is not None:
        _check_ci(ci, n_boot, seed)
    real = mixing.real
    real_np = real.numpy()
    counts = bootstrap_counts(mixing.n_sequences, n_boot, seed).astype(float) if ci is not None else None  # (R, B)
    rows, lows, highs = {}, {}, {}
    for name in SUMMARY_ROWS:
        v = mixing.metric(name)[:, real].double()  # (L, T) real tokens only
        rows[RATIO_METRICS[name]] = {"mean": float(v.mean()), "max": float(v.max()), "min": float(v.min())}
        if counts is not None:
            full = mixing.metric(name).double().numpy()  # (L, B, N)
            sums = np.where(real_np[None], full, 0.0).sum(axis=(0, 2))  # (B,)
            n_tok = real_np.sum(axis=1) * full.shape[0]  # (B,)
            seq_max = np.where(real_np[None], full, -np.inf).max(axis=(0, 2))  # (B,)
            seq_min = np.where(real_np[None], full, np.inf).min(axis=(0, 2))  # (B,)
            drawn = counts > 0  # (R, B)
            boot = {
                "mean": (counts @ sums) / (counts @ n_tok),
                "max": np.where(drawn, seq_max[None], -np.inf).max(axis=1),
                "min": np.where(drawn, seq_min[None], np.inf).min(axis=1),
            }
            lows[RATIO_METRICS[name]], highs[RATIO_METRICS[name]] = {}, {}
            for stat, samples in boot.items():
                lo, hi = _interval(samples, ci)
                lows[RATIO_METRICS[name]][stat], highs[RATIO_METRICS[name]][stat] = float(lo), float(hi)
    scale = 100.0 if percent else 1.0

    def frame(d: dict) -> Any:
        df = pd.DataFrame.from_dict(d, orient="index")[["mean", "max", "min"]]
        df.index.name = "variant"
        return df * scale

    if counts is None:
        return frame(rows)
    return _with_ci(frame(rows), frame(lows), frame(highs), "statistic")


# ---------------------------------------------------------------------------
# conventions: where the biases go, and what the LayerNorm does to the ratio
# ---------------------------------------------------------------------------

#: The bias conventions of :func:`mixing_conventions` (name -> what goes where).
CONVENTIONS: dict[str, str] = {
    "book": "b_V W_O inside f (split by alpha like the rest); g(b_O) and beta in a bias term counted on neither side "
            "(the book; dropping b_O and beta altogether, as the official code does, gives the same ratio)",
    "bv_to_bias": "b_V W_O taken out of f: f_j(x_i) = sum_h alpha^h_ji x_i W_V^h W_O^h; sum_h b_V^h W_O^h joins the bias term",
    "bo_to_keep": "g(b_O) counted with what is kept: keep = keep_attn + keep_res + g(b_O)",
    "bo_to_mix": "g(b_O) counted with what is mixed: mix = g(sum_{i!=j} f_j(x_i)) + g(b_O)",
    "bias_to_keep": "the whole bias term g(b_O) + beta counted with what is kept",
}
#: What :func:`mixing_conventions` measures about the LayerNorm (name -> ratio compared).
LN_STEPS: dict[str, str] = {
    "before_ln": "||F_o|| / (||F_o|| + ||F_s + x||), F_o = sum_{i!=j} f_j(x_i), F_s = f_j(x_j): AttnRes-N",
    "scale_only": "the same after dividing both by s(y_j) (a uniform scale): always equal to before_ln",
    "centre_only": "after subtracting each vector's mean m(z) (no gamma)",
    "gamma_only": "after multiplying elementwise by gamma (no centring)",
    "full_ln": "after centring, dividing by s(y_j) and multiplying by gamma: AttnResLn-N",
}


@dataclass(frozen=True, eq=False)
class MixingVariants:
    """Per-token quantities of :func:`mixing_conventions`, all ``(L, B, N)`` float64 (NaN at padding).

    Attributes
    ----------
    layers : tuple of int
    attention_mask : torch.Tensor, (B, N)
    categories : numpy.ndarray of str, (B, N)
    ratios : dict of str to numpy.ndarray
        The mixing ratio under each bias convention (:data:`CONVENTIONS`) and
        after each step of the LayerNorm (:data:`LN_STEPS`), as fractions.
    norms : dict of str to numpy.ndarray
        ``mix``/``keep`` before the LayerNorm (``mix_raw``, ``keep_raw``),
        after centring (``mix_centred``, ``keep_centred``), after centring and
        gamma with s = 1 (``mix_centred_gamma``, ``keep_centred_gamma``), and
        the book's ``mix_ln``, ``keep_ln``, ``bias_ln`` (``||g(b_O) + beta||``)
        and ``out_ln`` (``||LN(y_j)||``).
    cosines : dict of str to numpy.ndarray
        ``mix_keep``: cosine between the book's mix and keep vectors after
        the LayerNorm; ``mix_keep_raw``: the same before it.
    model_name : str
    """

    layers: tuple[int, ...]
    attention_mask: torch.Tensor = field(repr=False)
    categories: np.ndarray = field(repr=False)
    ratios: dict[str, np.ndarray] = field(repr=False)
    norms: dict[str, np.ndarray] = field(repr=False)
    cosines: dict[str, np.ndarray] = field(repr=False)
    model_name: str = ""

    def get(self, name: str) -> np.ndarray:
        """Any per-token array by name (ratio, norm or cosine)."""
        for d in (self.ratios, self.norms, self.cosines):
            if name in d:
                return d[name]
        raise ValueError(f"unknown field {name!r}; expected one of {', '.join([*self.ratios, *self.norms, *self.cosines])}.")

    def table(self, names: Iterable[str] | None = None, *, percent: bool | None = None, category: str = OVERALL,
              ci: float | None = None, n_boot: int = 1000, seed: int = 0) -> Any:
        """Per-layer means of the chosen fields (mean within each sequence, then over sequences, as :func:`mixing_table`).

        Parameters
        ----------
        names : list of str, optional
            Fields to tabulate; default: every ratio.
        percent : bool, optional
            Multiply by 100; default True when every field is a ratio.
        category : str, default "全体"
            ``全体`` (all real tokens) or one token category.
        ci, n_boot, seed
            Bootstrap interval over sequences, as for :func:`mixing_table`.

        Returns
        -------
        pandas.DataFrame
            Index ``layer``, one column per field; with ``ci``, MultiIndex
            columns ``(field, stat)``, ``stat`` in :data:`CI_LEVELS`.
        """
        import pandas as pd

        names = list(self.ratios) if names is None else list(names)
        if percent is None:
            percent = all(n in self.ratios for n in names)
        real = self.attention_mask.bool().numpy()
        sel = real if category == OVERALL else (self.categories == category) & real
        count = sel.sum(axis=1)
        present = count > 0
        if not present.any():
            raise ValueError(f"no sequence has a token of category {category!r}.")
        scale = 100.0 if percent else 1.0
        parts = {}
        for n in names:
            t = layer_means(self.get(n), real, select=sel, ci=ci, n_boot=n_boot, seed=seed) * scale
            t.index = pd.Index(list(self.layers), name="layer")
            parts[n] = t
        if ci is None:
            return pd.DataFrame({n: t["estimate"] for n, t in parts.items()})
        out = pd.concat(parts, axis=1)
        out.columns.names = ["field", "stat"]
        return out


def mixing_conventions(enc: Any, batch: Any, *, layers: Any = None, batch_size: int = 32, max_length: int | None = None) -> MixingVariants:
    """The mixing ratio under other bias conventions, and step by step through the LayerNorm.

    The ratio ``||mix|| / (||mix|| + ||keep||)`` is a convention-dependent
    number: eq. (1) of :mod:`mixlib.mixing` is exact whichever side the value
    bias ``b_V W_O`` and the output bias ``b_O`` are put on, but the ratio is
    not. This function recomputes, from one forward pass and without sharing
    code with :func:`decompose`, the ratio under each of :data:`CONVENTIONS`,
    and after each step of the LayerNorm separately (:data:`LN_STEPS`): a
    uniform scale cannot change a ratio of norms, so only the centring and
    gamma can move it.

    Parameters
    ----------
    enc : mixlib.Encoder
    batch : texts, pairs or a tokenized batch
        As for :func:`decompose`.
    layers : int or list of int, optional
        Default all.
    batch_size : int, default 32
    max_length : int, optional

    Returns
    -------
    MixingVariants
        ``.table()`` gives the per-layer means.

    Examples
    --------
    >>> v = mixing_conventions(enc, mask_tokens(enc, texts))
    >>> v.table(["book", "bv_to_bias", "bo_to_keep"])  # layer x convention, percent
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is not allowed; give a positive int.")
    check_precision(enc, "mixing_conventions")
    layer_idx = enc.check_layers(layers)
    inputs = _as_batch(enc, batch, max_length)
    ids, am = inputs["input_ids"], inputs["attention_mask"]
    B, N = ids.shape
    L, D, H = len(layer_idx), enc.d_model, enc.n_heads
    dh = D // H
    row_of = {layer: li for li, layer in enumerate(layer_idx)}
    nan = float("nan")
    ratio_names = (*CONVENTIONS, *LN_STEPS)
    norm_names = ("mix_raw", "keep_raw", "mix_centred", "keep_centred", "mix_centred_gamma", "keep_centred_gamma",
                  "mix_ln", "keep_ln", "bias_ln", "out_ln")
    ratios = {k: np.full((L, B, N), nan) for k in ratio_names}
    norms = {k: np.full((L, B, N), nan) for k in norm_names}
    cosines = {k: np.full((L, B, N), nan) for k in ("mix_keep", "mix_keep_raw")}
    state: dict[str, Any] = {}
    dev = enc.device

    def nrm(z: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(z, dim=-1).double()

    def rat(mix: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        a, b = nrm(mix), nrm(keep)
        return a / (a + b)

    def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cosine_similarity(a, b, dim=-1).double()

    for b0 in range(0, B, int(batch_size)):
        b1 = min(B, b0 + int(batch_size))
        n = int(torch.nonzero(am[b0:b1].any(0)).flatten().max()) + 1
        chunk = {k: v[b0:b1, :n].to(dev) for k, v in inputs.items()}
        real = am[b0:b1, :n].bool()  # (b, n)
        state.clear()

        def finish(layer: int, ln_in: torch.Tensor, ln_out: torch.Tensor, real=real, b0=b0, b1=b1, n=n) -> None:
            li = row_of[layer]
            got = state.pop(layer)
            x, q, k, v = (got[key].detach().float() for key in ("x", "q", "k", "v"))
            b = x.shape[0]
            out_mod, v_mod, ln = enc.module(layer, "attn_out"), enc.module(layer, "value"), enc.module(layer, "attn_norm")
            w_o = out_mod.weight.detach().float()  # (D, D), out x in
            b_o = out_mod.bias.detach().float() if out_mod.bias is not None else torch.zeros(D, device=x.device)
            b_v = v_mod.bias.detach().float() if v_mod.bias is not None else torch.zeros(D, device=x.device)
            gamma, beta = ln.weight.detach().float(), ln.bias.detach().float()
            # attention weights, straightforwardly: (b, H, n, n), query j on rows
            qh = q.view(b, n, H, dh).transpose(1, 2)
            kh = k.view(b, n, H, dh).transpose(1, 2)
            scores = qh @ kh.transpose(-1, -2) / math.sqrt(dh)
            scores = scores.masked_fill(~real.to(x.device)[:, None, None, :], float("-inf"))
            alpha = torch.softmax(scores, dim=-1)
            a_self = alpha.diagonal(dim1=-2, dim2=-1)  # (b, H, n)
            vh = v.view(b, n, H, dh)
            ctx_all = (alpha @ vh.transpose(1, 2)).transpose(1, 2)  # (b, n, H, dh): sum_i alpha_ji v_i
            ctx_self = vh * a_self.transpose(1, 2)[..., None]  # (b, n, H, dh)
            f_all = ctx_all.reshape(b, n, D) @ w_o.t()  # sum_i f_j(x_i), b_V included
            f_self = ctx_self.reshape(b, n, D) @ w_o.t()  # f_j(x_j)
            f_oth = f_all - f_self
            bv_self = (b_v.view(H, dh)[None, None] * a_self.transpose(1, 2)[..., None]).reshape(b, n, D) @ w_o.t()
            bv_all = (b_v @ w_o.t()).expand(b, n, D)  # sum_i alpha_ji = 1
            bv_oth = bv_all - bv_self
            y = x + f_all + b_o  # the LayerNorm input, rebuilt
            s = torch.sqrt(y.var(dim=-1, unbiased=False, keepdim=True) + ln.eps)  # (b, n, 1)

            def c(z):
                return z - z.mean(dim=-1, keepdim=True)

            def g(z):
                return c(z) / s * gamma

            mix, keep = g(f_oth), g(f_self) + g(x)
            g_bo = g(b_o.expand(b, n, D))
            r = {
                "book": rat(mix, keep),
                "bv_to_bias": rat(g(f_oth - bv_oth), g(f_self - bv_self) + g(x)),
                "bo_to_keep": rat(mix, keep + g_bo),
                "bo_to_mix": rat(mix + g_bo, keep),
                "bias_to_keep": rat(mix, keep + g_bo + beta),
                "before_ln": rat(f_oth, f_self + x),
                "scale_only": rat(f_oth / s, (f_self + x) / s),
                "centre_only": rat(c(f_oth), c(f_self + x)),
                "gamma_only": rat(f_oth * gamma, (f_self + x) * gamma),
                "full_ln": rat(mix, keep),
            }
            nm = {
                "mix_raw": nrm(f_oth), "keep_raw": nrm(f_self + x),
                "mix_centred": nrm(c(f_oth)), "keep_centred": nrm(c(f_self + x)),
                "mix_centred_gamma": nrm(c(f_oth) * gamma), "keep_centred_gamma": nrm(c(f_self + x) * gamma),
                "mix_ln": nrm(mix), "keep_ln": nrm(keep), "bias_ln": nrm(g_bo + beta), "out_ln": nrm(mix + keep + g_bo + beta),
            }
            cs = {"mix_keep": cos(mix, keep), "mix_keep_raw": cos(f_oth, f_self + x)}
            pad = ~real.numpy()
            for dst, src in ((ratios, r), (norms, nm), (cosines, cs)):
                for key, val in src.items():
                    arr = val.cpu().numpy()
                    arr[pad] = nan
                    dst[key][li, b0:b1, :n] = arr
            if layer == layer_idx[-1]:
                raise _StopForward

        try:
            _run_hooked(enc, chunk, (_register(enc, layer, state, finish) for layer in layer_idx))
        finally:
            state.clear()

    from .data import token_categories

    return MixingVariants(
        layers=layer_idx,
        attention_mask=am,
        categories=token_categories(enc, ids, am),
        ratios=ratios,
        norms=norms,
        cosines=cosines,
        model_name=enc.name,
    )
