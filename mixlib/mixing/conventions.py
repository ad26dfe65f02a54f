"""The conventions the decomposition leaves free -- where the biases go, what the LayerNorm does to the ratio -- measured."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .forward import _as_batch, _chunks, _each_layer
from .kernel import check_precision
from .result import OVERALL
from .tables import layer_means

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
        A post-LN BERT-family encoder (:func:`mixlib.load_encoder`).
    batch : texts, pairs or a tokenized batch
        As for :func:`decompose`.
    layers : int or list of int, optional
        Layers to analyse, 0-based; default all.
    batch_size : int, default 32
        Sequences per forward pass.
    max_length : int, optional
        For texts: longest sequence in tokens (default: the model's limit).

    Returns
    -------
    MixingVariants
        The per-token ratios, norms and cosines, each ``(L, B, N)``; ``.table()`` gives the per-layer means.

    Raises
    ------
    ValueError, TypeError
        Bad input, as for :func:`decompose` (empty texts, a layer out of range, a malformed batch, a
        ``batch_size`` that is not a positive int).

    Examples
    --------
    >>> v = mixlib.mixing_conventions(enc, mixlib.mask_tokens(enc, ["The cat sat on the mat.", "A dog ran away."]))
    >>> t = v.table(["book", "bv_to_bias", "before_ln", "scale_only"])  # layer x convention, percent
    >>> t.shape
    (6, 4)
    >>> t.loc[0].round(1).tolist()  # layer 0: a uniform scale (scale_only) never moves the ratio
    [24.5, 23.6, 26.3, 26.3]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is not allowed; give a positive int.")
    check_precision(enc, "mixing_conventions")
    layer_idx = enc.check_layers(layers)
    inputs = _as_batch(enc, batch, max_length)
    ids, am = inputs["input_ids"], inputs["attention_mask"]
    B, N = ids.shape
    L = len(layer_idx)
    row_of = {layer: li for li, layer in enumerate(layer_idx)}
    nan = float("nan")
    ratio_names = (*CONVENTIONS, *LN_STEPS)
    norm_names = ("mix_raw", "keep_raw", "mix_centred", "keep_centred", "mix_centred_gamma", "keep_centred_gamma",
                  "mix_ln", "keep_ln", "bias_ln", "out_ln")
    ratios = {k: np.full((L, B, N), nan) for k in ratio_names}
    norms = {k: np.full((L, B, N), nan) for k in norm_names}
    cosines = {k: np.full((L, B, N), nan) for k in ("mix_keep", "mix_keep_raw")}
    for b0, chunk, real in _chunks(inputs, batch_size, enc.device):

        def finish(layer: int, got: dict, ln_in: torch.Tensor, ln_out: torch.Tensor, real=real, b0=b0) -> None:
            pad = ~real.numpy()
            n = pad.shape[1]
            for dst, src in zip((ratios, norms, cosines), _variants(enc, layer, got, real)):
                for key, val in src.items():
                    arr = val.cpu().numpy()
                    arr[pad] = nan
                    dst[key][row_of[layer], b0:b0 + arr.shape[0], :n] = arr

        _each_layer(enc, chunk, layer_idx, finish)

    from ..data import token_categories

    return MixingVariants(
        layers=layer_idx,
        attention_mask=am,
        categories=token_categories(enc, ids, am),
        ratios=ratios,
        norms=norms,
        cosines=cosines,
        model_name=enc.name,
    )


def _variants(enc: Any, layer: int, got: dict[str, torch.Tensor], real: torch.Tensor) -> tuple[dict, dict, dict]:
    """Ratios, norms and cosines of one layer for :func:`mixing_conventions`, computed straightforwardly.

    ``got`` holds the layer's captured ``x``, ``q``, ``k``, ``v`` (b, n, D);
    ``real`` (b, n) marks real tokens. Shares no code with :func:`decompose`:
    the attention weights come from Q and K, the LayerNorm input is rebuilt.
    Returns three dicts of (b, n) float64 tensors.
    """
    x, q, k, v = (got[key].detach().float() for key in ("x", "q", "k", "v"))
    b, n, D = x.shape
    H = enc.n_heads
    dh = D // H
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
        "book": _ratio(mix, keep),
        "bv_to_bias": _ratio(g(f_oth - bv_oth), g(f_self - bv_self) + g(x)),
        "bo_to_keep": _ratio(mix, keep + g_bo),
        "bo_to_mix": _ratio(mix + g_bo, keep),
        "bias_to_keep": _ratio(mix, keep + g_bo + beta),
        "before_ln": _ratio(f_oth, f_self + x),
        "scale_only": _ratio(f_oth / s, (f_self + x) / s),
        "centre_only": _ratio(c(f_oth), c(f_self + x)),
        "gamma_only": _ratio(f_oth * gamma, (f_self + x) * gamma),
        "full_ln": _ratio(mix, keep),
    }
    nm = {
        "mix_raw": _norm(f_oth), "keep_raw": _norm(f_self + x),
        "mix_centred": _norm(c(f_oth)), "keep_centred": _norm(c(f_self + x)),
        "mix_centred_gamma": _norm(c(f_oth) * gamma), "keep_centred_gamma": _norm(c(f_self + x) * gamma),
        "mix_ln": _norm(mix), "keep_ln": _norm(keep), "bias_ln": _norm(g_bo + beta), "out_ln": _norm(mix + keep + g_bo + beta),
    }
    cs = {"mix_keep": _cos(mix, keep), "mix_keep_raw": _cos(f_oth, f_self + x)}
    return r, nm, cs


def _norm(z: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(z, dim=-1).double()


def _ratio(mix: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    a, b = _norm(mix), _norm(keep)
    return a / (a + b)


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a, b, dim=-1).double()
