"""Tables of a :class:`Mixing` result: per-layer means by token category, with seeded bootstrap intervals over sequences."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from .result import METRICS, OVERALL, RATIO_METRICS, SUMMARY_ROWS, Mixing

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


#: An interval resting on fewer sequences than this is left out (NaN, with a warning): a bootstrap over one
#: sequence draws it every time, and its "95%" interval has zero width.
MIN_SEQUENCES = 2


def _warn_thin(cells: list[str], ci: float) -> None:
    if cells:
        warnings.warn(f"the {float(ci):.0%} interval of {', '.join(cells[:6])}{' ...' if len(cells) > 6 else ''} rests "
                      f"on fewer than {MIN_SEQUENCES} sequences and is left out (NaN): a bootstrap cannot measure how "
                      "the number would move with other texts; analyse more texts.", UserWarning, stacklevel=3)


def _with_ci(estimate: Any, low: Any, high: Any, name: str) -> Any:
    import pandas as pd

    out = pd.concat({lvl: t for lvl, t in zip(CI_LEVELS, (estimate, low, high))}, axis=1)  # (level, column)
    out = out.swaplevel(0, 1, axis=1)
    cols = list(estimate.columns)
    out = out.reindex(columns=pd.MultiIndex.from_product([cols, list(CI_LEVELS)], names=[name, "stat"]))
    return out


def sequence_means(values: Any, real: Any, *, select: Any = None) -> np.ndarray:
    """Per-layer mean of a per-token quantity within each sequence: ``(L, B)`` float64.

    The first step of :func:`mixing_table` and :func:`layer_means`, kept per sequence for statistics over sequences
    (:mod:`mixlib.stats`): ``values`` averaged over the real tokens that ``select`` picks; NaN where a sequence has
    none (a sequence without ``[MASK]`` for the ``[MASK]`` tokens).

    Parameters
    ----------
    values : array-like, (L, B, N)
        NaN allowed where ``real`` or ``select`` is False.
    real : array-like of bool, (B, N)
    select : array-like of bool, (B, N) or (L, B, N), optional
        Tokens to average (default: all real tokens).
    """
    vals = np.asarray(values.numpy() if isinstance(values, torch.Tensor) else values, dtype=float)
    real = np.asarray(real.numpy() if isinstance(real, torch.Tensor) else real, dtype=bool)
    if vals.ndim != 3 or vals.shape[1:] != real.shape:
        raise ValueError(f"values must be (L, B, N) with (B, N) = real.shape {real.shape}; got {vals.shape}.")
    sel = real if select is None else np.asarray(select.numpy() if isinstance(select, torch.Tensor) else select, dtype=bool) & real
    sel = np.broadcast_to(sel, vals.shape)  # (L, B, N)
    count = sel.sum(axis=2)  # (L, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sel, vals, 0.0).sum(axis=2) / count  # (L, B); 0/0 = NaN where none is selected


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
    values, real, select
        As for :func:`sequence_means` (``values`` (L, B, N), ``real`` (B, N), ``select`` optional).
    ci, n_boot, seed
        As for :func:`mixing_table`.

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (0..L-1), column ``estimate`` (and ``low``, ``high`` with ``ci``).
    """
    import pandas as pd

    per_seq = sequence_means(values, real, select=select)  # (L, B)
    present = ~np.isnan(per_seq)
    filled = np.where(present, per_seq, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = filled.sum(axis=1) / present.sum(axis=1)
    out = {"estimate": est}
    if ci is not None:
        _check_ci(ci, n_boot, seed)
        w = bootstrap_counts(per_seq.shape[1], n_boot, seed).astype(float)  # (R, B)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.einsum("lb,rb->lr", filled, w) / np.einsum("lb,rb->lr", present.astype(float), w)  # (L, R)
        out["low"], out["high"] = _interval(boot, ci)
        thin = (present.sum(axis=1) < MIN_SEQUENCES) & (present.sum(axis=1) > 0)  # (L,): an absent cell is NaN anyway
        out["low"][thin] = out["high"][thin] = np.nan
        _warn_thin([f"layer {li}" for li in np.flatnonzero(thin)], ci)
    return pd.DataFrame(out, index=pd.Index(range(per_seq.shape[0]), name="layer"))


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

    Raises
    ------
    ValueError
        ``by`` is not ``"category"``, ``metric`` is not one of :data:`METRICS`,
        or (with ``ci``) ``ci`` is not in (0, 1), ``n_boot`` is not an int >= 10
        or ``seed`` is not a non-negative int.

    Warns
    -----
    UserWarning
        With ``ci``, a category found in only one sequence: its interval is left out (NaN).

    Examples
    --------
    >>> m = mixlib.decompose(enc, mixlib.mask_tokens(enc, ["The cat sat on the mat.", "A dog ran away."]))
    >>> t = mixlib.mixing_table(m)
    >>> t.columns.tolist()
    ['全体', '[CLS]', '[SEP]', '[MASK]', '句読点', 'その他']
    >>> round(float(t.loc[0, "全体"]), 1)  # layer 0, all tokens: percent of mixed context
    24.5
    >>> t = mixlib.mixing_table(m, ci=0.95, n_boot=100, seed=0)
    >>> t.columns[:3].tolist()
    [('全体', 'estimate'), ('全体', 'low'), ('全体', 'high')]
    """
    import pandas as pd

    from ..data import category_names

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
    table, low, high, thin = {}, {}, {}, []
    for name, sel in groups.items():
        per_seq = sequence_means(vals, real, select=sel)  # (L, B); NaN where the category is absent
        present = sel.any(axis=1)  # (B,)
        table[name] = per_seq[:, present].mean(axis=1) if present.any() else np.full(L, np.nan)
        if counts is not None:
            w = counts * present[None]  # (R, B): draws of sequences that have the category
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = (np.where(present[None], per_seq, 0.0) @ w.T) / w.sum(axis=1)[None]  # (L, R)
            low[name], high[name] = _interval(boot, ci)
            if 0 < present.sum() < MIN_SEQUENCES:
                low[name], high[name] = np.full(L, np.nan), np.full(L, np.nan)
                thin.append(name)
    if ci is not None:
        _warn_thin(thin, ci)
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
        this level (see :func:`mixing_table`) -- for the mean only. Max and min
        get none (``low`` and ``high`` are NaN): a resample can never pass the
        sample's own extreme, so a percentile bootstrap of an extreme always
        ends at the estimate and would claim a certainty it does not have.
        With fewer than two sequences the mean gets none either (NaN and a
        warning).
    n_boot : int, default 1000
        Bootstrap resamples (with ``ci``).
    seed : int, default 0
        Seed of the resampling (with ``ci``).

    Returns
    -------
    pandas.DataFrame
        Index: Attn-W, Attn-N, AttnRes-W, AttnRes-N, AttnResLn-N (``variant``);
        columns ``mean``, ``max``, ``min``. Pooled means every real token of
        every analysed layer counts once. With ``ci``, MultiIndex columns
        ``(statistic, stat)`` with ``stat`` in :data:`CI_LEVELS`.

    Raises
    ------
    ValueError
        With ``ci``: ``ci`` is not in (0, 1), ``n_boot`` is not an int >= 10 or
        ``seed`` is not a non-negative int.

    Examples
    --------
    >>> m = mixlib.decompose(enc, mixlib.mask_tokens(enc, ["The cat sat on the mat.", "A dog ran away."]))
    >>> s = mixlib.mixing_summary(m)
    >>> s.index.tolist(), s.columns.tolist()
    (['Attn-W', 'Attn-N', 'AttnRes-W', 'AttnRes-N', 'AttnResLn-N'], ['mean', 'max', 'min'])
    >>> round(float(s.loc["AttnResLn-N", "mean"]), 1)  # percent, all tokens and layers
    21.0
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
            lo, hi = _interval((counts @ sums) / (counts @ n_tok), ci)
            if mixing.n_sequences < MIN_SEQUENCES:
                lo = hi = np.nan
            lows[RATIO_METRICS[name]] = {"mean": float(lo), "max": np.nan, "min": np.nan}  # no honest bootstrap of an extreme
            highs[RATIO_METRICS[name]] = {"mean": float(hi), "max": np.nan, "min": np.nan}
    if counts is not None and mixing.n_sequences < MIN_SEQUENCES:
        _warn_thin(["the mean"], ci)
    scale = 100.0 if percent else 1.0

    def frame(d: dict) -> Any:
        df = pd.DataFrame.from_dict(d, orient="index")[["mean", "max", "min"]]
        df.index.name = "variant"
        return df * scale

    if counts is None:
        return frame(rows)
    return _with_ci(frame(rows), frame(lows), frame(highs), "statistic")
