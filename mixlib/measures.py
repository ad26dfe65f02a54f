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

Memory: the (n, n, D) tensor of all ``T_{j,i}`` never exists for a whole batch;
it is built for one sequence and a block of receiving tokens at a time
(:data:`BLOCK_ELEMENTS` floats), so memory is O(B*H*N^2 + block*D) besides the
(L, B, N, N) results.

The attention weights are the model's own (its eager self-attention returns
them; recomputed from Q and K where it returns none), and the per-block
scratch is reused from block to block and layer to layer.

Self-checks on every layer (``RuntimeError`` otherwise, within ``atol``):
the attention weights reproduce the model's attention output and their rows
sum to 1 (the check of :func:`mixlib.decompose`);
``sum_i T_{j,i}`` reproduces ``attn_out - b_O``; ``sum_i G_{j,i} + g1(b_O) + beta1``
reproduces the model's first LayerNorm output.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .mixing import _StopForward, _as_batch, _chunks, _first, _register, _run_hooked, check_precision
from .mixing.kernel import _check_attention, _Workspace

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
#: Floats per block of T_{j,i} (one sequence x a block of receiving tokens x N x D).
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


def _block_maps(
    alpha: torch.Tensor, f: torch.Tensor, x: torch.Tensor, scale1: torch.Tensor, gamma2: torch.Tensor,
    inv_s2: torch.Tensor, real: torch.Tensor, out: dict[str, torch.Tensor], j0: int, j1: int, ln1_out: torch.Tensor,
    ws: _Workspace,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows j0:j1 of one sequence's maps; returns (sum_i T_{j,i}, sum_i G_{j,i}) for the self-checks.

    alpha (H, n, n), f (n, H, D) the heads' f^h(x_i) sender by sender, x (n, D), scale1 (n, D) = gamma1 / s1(j),
    inv_s2 (n, 1), real (n,) bool, ln1_out (blk, D) the first LayerNorm's own output for rows j0:j1 (ALTI's
    resultant); ``ws`` holds the (blk, n, D) scratch. One step function per map, in the order they build on each other.
    """
    t = _contributions(alpha, f, j0, j1, ws)  # (blk, n, D): T_{j,i}
    out["norm"][j0:j1] = torch.linalg.vector_norm(t, dim=-1)
    t_sum = t.sum(1)  # (blk, D)
    _to_attn_res_ln(t, x, scale1, real, j0, j1)  # t becomes G_{j,i}
    out["attn_res_ln"][j0:j1] = torch.linalg.vector_norm(t, dim=-1)
    y = t.sum(1)  # (blk, D): sum_i G_{j,i}, checked by the caller: + g1(b_O) + beta1 = ln1_out
    out["alti"][j0:j1] = _alti(t, ln1_out, real, ws)
    out["globenc"][j0:j1] = _globenc(t, gamma2, inv_s2[j0:j1])
    return t_sum, y


def _contributions(alpha: torch.Tensor, f: torch.Tensor, j0: int, j1: int, ws: _Workspace) -> torch.Tensor:
    """``T_{j,i} = sum_h alpha^h_{j,i} f^h(x_i)`` for rows j0:j1, ``(blk, n, D)`` (a view of scratch).

    One (blk, H) x (H, D) product per sender i, batched over the senders.
    """
    n, H, D = f.shape
    blk = j1 - j0
    a = ws.get("a", (n, blk, H)).copy_(alpha[:, j0:j1].permute(2, 1, 0))  # (n, blk, H): alpha^h_{j,i}, senders first
    return torch.bmm(a, f, out=ws.get("t", (n, blk, D))).transpose(0, 1)


def _to_attn_res_ln(t: torch.Tensor, x: torch.Tensor, scale1: torch.Tensor, real: torch.Tensor, j0: int, j1: int) -> None:
    """In place: ``T_{j,i}`` -> ``G_{j,i} = g1(T_{j,i})``, with ``x_j`` added to the token's own part first."""
    rows = torch.arange(j1 - j0)
    t[rows, rows + j0] += x[j0:j1]  # the residual goes to the token itself
    t -= t.mean(-1, keepdim=True)
    t *= scale1[j0:j1, None, :]
    if not bool(real.all()):
        t.masked_fill_(~real[None, :, None], 0.0)  # padding senders contribute nothing


def _alti(g: torch.Tensor, ln1_out: torch.Tensor, real: torch.Tensor, ws: _Workspace) -> torch.Tensor:
    """ALTI's rows: ``max(0, ||y_j||_1 - ||y_j - G_{j,i}||_1)``, normalised; ``y_j`` the real LayerNorm output."""
    dist = torch.sub(ln1_out[:, None, :], g, out=ws.get("dist", g.shape)).abs_().sum(-1)  # (blk, n)
    c = (ln1_out.abs().sum(-1, keepdim=True) - dist).clamp_min_(0.0) * real[None, :]
    return c / c.sum(-1, keepdim=True).clamp_min(1e-30)


def _globenc(g: torch.Tensor, gamma2: torch.Tensor, inv_s2: torch.Tensor) -> torch.Tensor:
    """GlobEnc's rows: ``||g2(G_{j,i})||``, the second LayerNorm linearised at its own s2 (``g`` is overwritten)."""
    g -= g.mean(-1, keepdim=True)
    g *= gamma2
    g *= inv_s2[:, None, :]
    return torch.linalg.vector_norm(g, dim=-1)


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
    >>> cm = mixlib.context_maps(enc, ["The cat sat on the mat."])
    >>> cm.map("alti", layer=0).sum(1)  # rows of ALTI sum to 1
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is not allowed; give a positive int.")
    from .data import check_atol

    atol = check_atol(atol)
    check_precision(enc, "context_maps")
    layer_idx = enc.check_layers(layers)
    inputs = _as_batch(enc, batch, max_length)
    ids, am = inputs["input_ids"], inputs["attention_mask"]
    B, N = ids.shape
    L, D, H = len(layer_idx), enc.d_model, enc.n_heads
    dh = D // H
    nan = float("nan")
    maps = {name: torch.full((L, B, N, N), nan) for name in MEASURES}
    max_err = np.zeros(L)
    row_of = {layer: li for li, layer in enumerate(layer_idx)}
    dev = enc.device

    params = {}
    for layer in layer_idx:
        w_o, b_o = enc.projection(layer, "attn_out")
        ln1, ln2 = enc.module(layer, "attn_norm"), enc.module(layer, "ffn_norm")
        params[layer] = (w_o, b_o, ln1.weight.detach(), ln1.bias.detach(), float(ln1.eps), ln2.weight.detach(), float(ln2.eps))

    ws = _Workspace(dev, check_precision(enc, "context_maps"))  # scratch reused from layer to layer (no fresh large blocks)
    for b0, chunk, real in _chunks(inputs, batch_size, dev):
        n = real.shape[1]
        real = real.to(dev)  # (b, n)
        additive = torch.zeros(real.shape, device=dev).masked_fill_(~real, torch.finfo(torch.float32).min)
        state: dict[int, dict[str, Any]] = {}

        def finish_attn(layer: int, ln_in: torch.Tensor, ln_out: torch.Tensor) -> None:
            state[layer]["ln1_in"], state[layer]["ln1_out"] = ln_in, ln_out

        def make_ffn_hook(layer: int):
            def on_ffn_norm(module, args, kwargs, output):
                got = state.pop(layer)
                try:
                    _layer_maps(layer, got, _first(args, kwargs))
                finally:
                    got.clear()  # the hooks hold this dict until the pass ends: let the layer's tensors go now
                if layer == layer_idx[-1]:
                    raise _StopForward

            return on_ffn_norm

        def _layer_maps(layer: int, got: dict, ln2_in: torch.Tensor) -> None:
            li = row_of[layer]
            w_o, b_o, g1, beta1, eps1, g2, eps2 = params[layer]
            nb = got["x"].shape[0]
            v = got["v"].view(nb, n, H, dh).transpose(1, 2)  # (b, H, n, dh)
            alpha = got.get("alpha")  # (b, H, n, n): the model's own weights (eager attention returns them)
            if alpha is None:
                q = got["q"].view(nb, n, H, dh).transpose(1, 2)
                k = got["k"].view(nb, n, H, dh).transpose(1, 2)
                alpha = torch.softmax(q @ k.transpose(-1, -2) * dh**-0.5 + additive[:, None, None, :], dim=-1)
            err = float(_check_attention(alpha, got["v"], got["context"], ws.directions(H, dh), ~real, ws))
            if not err <= atol:
                raise RuntimeError(f"context_maps: layer {layer}: the attention weights do not reproduce the model's attention "
                                   f"output or do not sum to 1 (max abs error {err:.3e} > atol={atol:g}); is the model in "
                                   "train mode (call enc.model.eval())?")
            w_heads = w_o.t().reshape(H, dh, D)  # (H, dh, D): W_O^h
            v_heads = v.transpose(0, 1).reshape(H, nb * n, dh)  # (H, b*n, dh)
            f = torch.bmm(v_heads, w_heads, out=ws.get("f", (H, nb * n, D))).view(H, nb, n, D)  # f^h(x_i)
            bo = b_o if b_o is not None else torch.zeros(D, device=dev)

            def inv_std(y: torch.Tensor, eps: float) -> torch.Tensor:
                return torch.rsqrt(y.var(-1, unbiased=False, keepdim=True) + eps)

            inv_s1, inv_s2 = inv_std(got["ln1_in"], eps1), inv_std(ln2_in, eps2)  # (b, n, 1)
            layer_err = err
            for bi in range(nb):
                nr = int(real[bi].sum())
                out = {name: torch.zeros((n, n), device=dev) for name in ("norm", "attn_res_ln", "alti", "globenc")}
                scale1 = g1 * inv_s1[bi]  # (n, D)
                f_seq = ws.get("f_seq", (n, H, D)).copy_(f[:, bi].transpose(0, 1))  # (n, H, D), contiguous
                step = max(1, BLOCK_ELEMENTS // max(1, n * D))
                for j0 in range(0, nr, step):
                    j1 = min(nr, j0 + step)
                    t_sum, y = _block_maps(alpha[bi], f_seq, got["x"][bi], scale1, g2, inv_s2[bi], real[bi], out, j0, j1,
                                           got["ln1_out"][bi, j0:j1], ws)
                    e1 = float((t_sum - (got["attn_out"][bi, j0:j1] - bo)).abs().max())
                    bias = (bo - bo.mean()) * scale1[j0:j1] + beta1
                    e2 = float((y + bias - got["ln1_out"][bi, j0:j1]).abs().max())
                    layer_err = max(layer_err, e1, e2)
                    if not max(e1, e2) <= atol:
                        raise RuntimeError(
                            f"context_maps: layer {layer}: the token-to-token pieces do not add up to the model's "
                            f"{'attention output' if e1 > atol else 'LayerNorm output'} (max abs error {max(e1, e2):.3e} > atol={atol:g})."
                        )
                gb = b0 + bi
                maps["attention"][li, gb, :nr, :nr] = alpha[bi, :, :nr, :nr].mean(0).cpu()
                for name, m in out.items():
                    maps[name][li, gb, :nr, :nr] = m[:nr, :nr].cpu()
            max_err[li] = max(max_err[li], layer_err)

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
    measures : list of str, optional
        Default: all of ``cm.maps`` (with ``rollout=True``: :data:`ROLLOUT_MEASURES`).
    rollout : bool
        Compare the aggregated maps (:meth:`ContextMaps.rollout`) instead of the per-layer ones.
    offdiag : bool
        Leave out each token's own entry (i = j). The diagonal dominates the
        residual-aware maps, so the agreement over all pairs is partly just
        "the token itself is the largest source"; the off-diagonal agreement is
        about *which other* tokens matter.

    Returns
    -------
    pandas.DataFrame
        Rows: layers (0-based); columns: a MultiIndex (``"A vs B"``, ``mean``/``sd``).
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
