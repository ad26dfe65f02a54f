"""The result of :func:`mixlib.decompose`: the :class:`Mixing` record and the names of its per-token fields."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


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
#: Field names of the four vectors of eq. (1).
VECTOR_FIELDS = ("mix", "keep_attn", "keep_res", "bias")


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
        Largest ``|mix + keep_attn + keep_res + bias - LN output|`` over the real
        tokens of each layer (the self-check; at most ``atol``).
    max_attention_error : numpy.ndarray, (L,)
        Largest ``|(alpha V - the model's attention output) r_h|`` per layer, r_h
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
