"""Uncertainty for per-layer means over sequences: bootstrap samples, intervals over all layers at once, and a
permutation test between two groups of sequences (optionally within strata).

Chapter 13 compares per-layer means of two kinds: the same sequences' values of two token kinds (paired, e.g.
句読点 minus the whole sequence) and two groups of sequences (Japanese vs English pairs, 百人一首 vs modern pairs).
Every function takes per-sequence values as an ``(L, B)`` array (layers x sequences), as
:func:`mixlib.mixing.sequence_means` gives them; a sequence with a NaN in any layer (one without the token kind
asked for) is left out.

* :func:`bootstrap_means` -- the per-layer mean of sequences drawn with replacement, ``n_boot`` times (the same
  draws as :func:`mixlib.mixing.bootstrap_counts`, so the same seed resamples as :func:`mixlib.mixing_table`);
  with ``clusters``, whole clusters of alike sequences are drawn (a cluster bootstrap);
* :func:`percentile_interval` -- the interval of each layer on its own;
* :func:`simultaneous_interval` -- an interval that holds for all layers at once (max-t over layers): checking
  12 layers with 12 separate 95% intervals finds some layer outside by chance far more often than 5%;
* :func:`difference_interval` -- the difference of two groups (or of two measurements of the same sequences) with
  that interval, resampling clusters of alike sequences whole: a check of a permutation test that assumes independence;
* :func:`paired_permutation_test` -- the same sequences measured twice (e.g. a text and its rewriting): the mean of
  the per-sequence differences, with signs flipped at random (a sign-flip test), per layer and corrected over layers;
* :func:`match_lengths` -- a control group of the same lengths: for each sequence of one group, a different
  sequence of another with the nearest length (the assignment with the least total difference);
* :func:`permutation_test` -- the difference of group means per layer, with a two-sided p-value per layer and one
  corrected for the number of layers (max-t over layers); with ``strata``, labels move only within a stratum
  (e.g. a bin of sequence lengths), so a difference in how the groups spread over the strata cannot make a
  difference by itself. The statistic permuted is Welch's t by default: permuting the bare difference of means
  is too liberal when the groups differ in size and in spread (the smaller group the more variable), because
  shuffling labels then mixes the two spreads (Janssen 1997; Chung and Romano 2013).

``tests/test_stats.py`` checks them against independent computations (scipy's permutation test, explicit
resampling) and by simulation (coverage, the rate of false positives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["bootstrap_means", "percentile_interval", "simultaneous_interval", "difference_interval", "PermutationResult",
           "permutation_test", "paired_permutation_test", "match_lengths"]


def _per_sequence(values: Any, what: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2:
        raise ValueError(f"{what} must be (L, B): layers x sequences (or (B,) for one layer); got shape {arr.shape}.")
    return arr


def _complete(arr: np.ndarray, what: str) -> np.ndarray:
    """The sequences (columns) without a NaN; at least two of them."""
    keep = ~np.isnan(arr).any(axis=0)
    if keep.sum() < 2:
        raise ValueError(f"{what} holds {int(keep.sum())} sequence(s) without NaN; at least 2 are needed.")
    return arr[:, keep]


def _check_count(n: Any, name: str, least: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < least:
        raise ValueError(f"{name}={n!r} is not allowed: give an int >= {least}.")
    return int(n)


def _check_level(ci: Any) -> float:
    if isinstance(ci, bool) or not isinstance(ci, (float, int, np.floating)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci={ci!r} is not allowed: give the confidence level as a float in (0, 1), e.g. 0.95.")
    return float(ci)


def bootstrap_means(values: Any, n_boot: int = 1000, seed: int = 0, clusters: Any = None) -> np.ndarray:
    """Per-layer means of ``n_boot`` bootstrap resamples of the sequences: ``(L, n_boot)``.

    Parameters
    ----------
    values : array-like, (L, B) or (B,)
        One value per layer and sequence; sequences with a NaN are left out first.
    n_boot, seed : int
        Resamples draw the kept sequences with replacement, as :func:`mixlib.mixing.bootstrap_counts` does.
    clusters : array-like, (B,), optional
        A label per sequence (e.g. the topic a sentence pair was written for). Sequences of one cluster are alike,
        so resampling them one by one treats them as independent and makes intervals too narrow; with
        ``clusters`` whole clusters are drawn with replacement (a cluster bootstrap) and each resample's mean is
        its sequences' mean (clusters of different sizes weigh by their size). Needs at least two clusters.
    """
    from .mixing.tables import bootstrap_counts

    arr = _per_sequence(values)
    n_boot = _check_count(n_boot, "n_boot", 10)
    if clusters is None:
        arr = _complete(arr, "values")
        counts = bootstrap_counts(arr.shape[1], n_boot, seed).astype(np.float64)  # (R, B)
        return arr @ counts.T / arr.shape[1]
    labels = np.asarray(clusters).reshape(-1)
    if labels.shape[0] != arr.shape[1]:
        raise ValueError(f"clusters has {labels.shape[0]} labels for {arr.shape[1]} sequences: give one label per sequence.")
    keep = ~np.isnan(arr).any(axis=0)
    arr, labels = _complete(arr, "values"), labels[keep]
    names, index = np.unique(labels, return_inverse=True)
    if names.size < 2:
        raise ValueError(f"clusters holds {names.size} cluster among the sequences without NaN; a cluster bootstrap "
                         "needs at least 2 (or leave clusters=None).")
    member = np.zeros((arr.shape[1], names.size))
    member[np.arange(arr.shape[1]), index] = 1.0
    sums, sizes = arr @ member, member.sum(axis=0)  # (L, C), (C,)
    counts = bootstrap_counts(names.size, n_boot, seed).astype(np.float64)  # (R, C): how often each cluster is drawn
    return sums @ counts.T / (counts @ sizes)[None]


def percentile_interval(samples: Any, ci: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of each row of ``samples`` (``(L, n)``) at level ``ci``: ``(low, high)``, each ``(L,)``."""
    level = _check_level(ci)
    arr = _per_sequence(samples, "samples")
    return tuple(np.percentile(arr, [50 * (1 - level), 50 * (1 + level)], axis=1))


def simultaneous_interval(samples: Any, estimate: Any, ci: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """An interval for every layer that holds for all layers at once at level ``ci`` (max-t over layers).

    Each layer's bootstrap samples are measured from the estimate in units of that layer's bootstrap standard
    error; the ``ci`` quantile ``c`` of the largest such distance over the layers, resample by resample, gives
    ``estimate ± c * se``. With one layer it is the symmetric standard-error interval of the bootstrap.

    Parameters
    ----------
    samples : array-like, (L, n_boot)
        From :func:`bootstrap_means`.
    estimate : array-like, (L,)
        The per-layer estimate (the mean over all sequences).
    """
    level = _check_level(ci)
    arr = _per_sequence(samples, "samples")
    est = np.asarray(estimate, dtype=np.float64).reshape(-1)
    if est.shape[0] != arr.shape[0]:
        raise ValueError(f"estimate has {est.shape[0]} layers, samples {arr.shape[0]}.")
    se = arr.std(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        worst = np.nanmax(np.abs(arr - est[:, None]) / se[:, None], axis=0)  # (n_boot,); a layer with se 0 is exact
    c = float(np.quantile(worst, level))
    return est - c * se, est + c * se


def difference_interval(a: Any, b: Any, n_boot: int = 1000, seed: int = 0, ci: float = 0.95, *, paired: bool = False,
                        clusters: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The difference ``mean(b) - mean(a)`` per layer, with a bootstrap interval that holds for all layers at once.

    A check of a permutation test that does not need the sequences to be independent: with ``clusters`` (a label per
    sequence of ``a``, e.g. the topic a sentence pair was written for) whole clusters are resampled
    (:func:`bootstrap_means`), so sequences that are alike are not counted as separate evidence.

    Parameters
    ----------
    a, b : array-like, (L, Ba) and (L, Bb)
        Per-sequence values. With ``paired=True`` the same sequences measured twice (``Ba == Bb``): the per-sequence
        differences ``b - a`` are resampled, by ``clusters`` when given. Otherwise the groups are resampled apart,
        ``a`` by ``clusters`` when given, ``b`` one sequence at a time.
    n_boot, seed, ci
        As for :func:`bootstrap_means` and :func:`simultaneous_interval`.

    Returns
    -------
    estimate, low, high : numpy.ndarray, each (L,)
    """
    A, B = _per_sequence(a, "a"), _per_sequence(b, "b")
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"a has {A.shape[0]} layers and b {B.shape[0]}; give both as (L, sequences).")
    if clusters is not None and np.asarray(clusters).reshape(-1).shape[0] != A.shape[1]:
        raise ValueError(f"clusters has {np.asarray(clusters).size} labels for a's {A.shape[1]} sequences.")
    if paired:
        if A.shape != B.shape:
            raise ValueError(f"a is {A.shape} and b {B.shape}: paired=True needs the same sequences in both.")
        d = B - A
        samples = bootstrap_means(d, n_boot, seed, clusters=clusters)
        estimate = _complete(d, "b - a").mean(axis=1)
    else:
        samples = bootstrap_means(B, n_boot, seed) - bootstrap_means(A, n_boot, seed + 1, clusters=clusters)
        estimate = _complete(B, "b").mean(axis=1) - _complete(A, "a").mean(axis=1)
    low, high = simultaneous_interval(samples, estimate, ci)
    return estimate, low, high


@dataclass(frozen=True, eq=False)
class PermutationResult:
    """The difference of two groups' per-layer means and its permutation p-values.

    Attributes
    ----------
    difference : numpy.ndarray, (L,)
        Mean of ``b`` minus mean of ``a`` per layer; with strata, less the mean of the permutation distribution
        (the part the strata explain).
    p : numpy.ndarray, (L,)
        Two-sided p-value of each layer on its own.
    p_max : numpy.ndarray, (L,)
        Two-sided p-value corrected for the number of layers (max-t: the largest studentised distance over the
        layers in each permutation); ``p_max >= p``.
    null : numpy.ndarray, (n_perm, L)
        The permutation distribution of the raw difference.
    sd_a, sd_b : numpy.ndarray, (L,)
        Each group's standard deviation over its sequences, per layer (``ddof=1``).
    statistic : str
        ``"welch"`` or ``"mean"``: what was permuted.
    n_a, n_b, n_perm, seed : int
    """

    difference: np.ndarray
    p: np.ndarray
    p_max: np.ndarray
    null: np.ndarray = field(repr=False)
    n_a: int
    n_b: int
    n_perm: int
    seed: int
    sd_a: np.ndarray = field(repr=False, default=None)
    sd_b: np.ndarray = field(repr=False, default=None)
    statistic: str = "welch"


def permutation_test(a: Any, b: Any, n_perm: int = 2000, seed: int = 0, strata: Any = None,
                     statistic: str = "welch") -> PermutationResult:
    """Do groups ``a`` and ``b`` of sequences differ in their per-layer means? A permutation test.

    The group labels are shuffled ``n_perm`` times (``numpy.random.default_rng(seed)``); each shuffle keeps the
    group sizes (and, with ``strata``, the group sizes within every stratum). Distances are measured from the
    permutation distribution's mean in units of its standard deviation, layer by layer, so that a stratified
    null that is not centred at 0 is still read correctly; the p-values count permutations at least as far
    out, with the observed one included (``(1 + k) / (1 + n_perm)``).

    The statistic permuted is Welch's t, ``(mean_b - mean_a) / sqrt(var_a / n_a + var_b / n_b)`` per layer
    (``statistic="welch"``, the default), or the bare difference of means (``statistic="mean"``). The bare
    difference is exact only when the groups are exchangeable; with unequal sizes and unequal spreads it rejects
    a true null far too often (at 300 against 100 sequences and a variance ratio of 4, about a quarter of the time
    at the 5% level over 12 layers; ``tests/test_stats.py`` measures it). Welch's t keeps the test close to its
    level in that case and is as good as the bare difference when the groups are exchangeable.

    Parameters
    ----------
    a, b : array-like, (L, Ba) and (L, Bb), or (Ba,) and (Bb,)
        Per-sequence values; sequences with a NaN are left out (with their stratum).
    n_perm, seed : int
    strata : array-like, (Ba + Bb,), optional
        A label per sequence, ``a``'s first: labels move only among sequences of the same stratum.
    statistic : {"welch", "mean"}
        What is permuted (see above). ``"welch"`` needs at least two sequences in each group.

    Returns
    -------
    PermutationResult
    """
    if statistic not in ("welch", "mean"):
        raise ValueError(f"statistic={statistic!r}: use 'welch' (Welch's t, the default) or 'mean' (the bare difference).")
    A, B = _per_sequence(a, "a"), _per_sequence(b, "b")
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"a has {A.shape[0]} layers and b {B.shape[0]}; give both as (L, sequences).")
    n_perm = _check_count(n_perm, "n_perm", 1)
    both = np.concatenate([A, B], axis=1)
    is_b = np.r_[np.zeros(A.shape[1], bool), np.ones(B.shape[1], bool)]
    if strata is None:
        labels = np.zeros(both.shape[1], dtype=np.int64)
    else:
        labels = np.asarray(strata).reshape(-1)
        if labels.shape[0] != both.shape[1]:
            raise ValueError(f"strata has {labels.shape[0]} labels for {both.shape[1]} sequences (a's first, then b's).")
    keep = ~np.isnan(both).any(axis=0)
    both, is_b, labels = both[:, keep], is_b[keep], labels[keep]
    least = 2 if statistic == "welch" else 1
    if is_b.sum() < least or (~is_b).sum() < least:
        raise ValueError(f"each group needs at least {least} sequence{'s' if least > 1 else ''} without NaN"
                         + (" for Welch's t (or use statistic='mean')." if least > 1 else "."))
    groups = [np.flatnonzero(labels == s) for s in np.unique(labels)]
    rng = np.random.default_rng(int(seed))
    labs = np.empty((n_perm + 1, both.shape[1]), dtype=bool)  # row 0: the observed labels; then the permutations
    labs[0] = is_b
    for k in range(n_perm):
        lab = is_b.copy()
        for g in groups:
            lab[g] = rng.permutation(lab[g])
        labs[k + 1] = lab
    # every permutation's group sums at once: (n_perm + 1, L)
    nb, na = int(is_b.sum()), int((~is_b).sum())
    w = labs.astype(np.float64)
    centred = both - both.mean(axis=1, keepdims=True)  # sums of squares about the pooled mean: no cancellation
    sum_b, sq_b = w @ centred.T, w @ (centred**2).T
    sum_a, sq_a = centred.sum(axis=1) - sum_b, (centred**2).sum(axis=1) - sq_b
    mean_b, mean_a = sum_b / nb, sum_a / na
    diffs = mean_b - mean_a  # (n_perm + 1, L)
    if statistic == "welch":
        var_b = np.clip(sq_b - nb * mean_b**2, 0, None) / (nb - 1)
        var_a = np.clip(sq_a - na * mean_a**2, 0, None) / (na - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            stat = np.where(var_a / na + var_b / nb > 0, diffs / np.sqrt(var_a / na + var_b / nb), 0.0)
    else:
        stat = diffs
    observed, null = diffs[0], diffs[1:]
    t_obs, t_null = stat[0], stat[1:]
    centre, sd = t_null.mean(axis=0), t_null.std(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.where(sd > 0, sd, np.inf)  # a layer the permutations cannot move: never significant
        z_obs, z_null = np.abs(t_obs - centre) / sd, np.abs(t_null - centre) / sd
    p = (1 + (z_null >= z_obs).sum(axis=0)) / (1 + n_perm)
    p_max = (1 + (z_null.max(axis=1)[:, None] >= z_obs[None]).sum(axis=0)) / (1 + n_perm)
    spread = lambda x: x.std(axis=1, ddof=1) if x.shape[1] > 1 else np.full(x.shape[0], np.nan)  # noqa: E731
    sd_a, sd_b = spread(both[:, ~is_b]), spread(both[:, is_b])
    # with strata the null is centred where the strata put it: report the part the strata do not explain; without
    # strata it is centred at 0, and subtracting its Monte-Carlo mean would only add noise to the observed difference
    shift = null.mean(axis=0) if strata is not None else 0.0
    return PermutationResult(difference=observed - shift, p=p, p_max=p_max, null=null, n_a=na, n_b=nb,
                             n_perm=n_perm, seed=int(seed), sd_a=sd_a, sd_b=sd_b, statistic=statistic)


def match_lengths(pool: Any, targets: Any, *, at_least: bool = False) -> np.ndarray:
    """For each target length, a different item of ``pool`` with a length as close as possible.

    Returns the indices into ``pool`` (one per target, in the targets' order, all different) of the assignment
    that makes the total absolute difference of lengths smallest (``scipy.optimize.linear_sum_assignment``).
    Chapter 13 uses it to draw, from the modern sentence pairs, a control group as long as the poems.

    Parameters
    ----------
    pool, targets : array-like of numbers, (P,) and (T,), T <= P; or (P, k) and (T, k)
        With k columns (e.g. the two sentences of a pair), the cost of a match is summed over the columns.
    at_least : bool, default False
        Prefer items at least as long as their target, column by column: any shortfall costs more than every excess
        together, so an item shorter than its target is taken only when no assignment avoids it. For a control that
        is then cut to the targets' lengths (:func:`mixlib.truncate_text`), which can shorten but not lengthen.
    """
    from scipy.optimize import linear_sum_assignment

    P, T = np.asarray(pool, dtype=np.float64), np.asarray(targets, dtype=np.float64)
    P, T = (P.reshape(-1, 1) if P.ndim <= 1 else P), (T.reshape(-1, 1) if T.ndim <= 1 else T)
    if P.ndim != 2 or T.ndim != 2 or P.shape[1] != T.shape[1]:
        raise ValueError(f"pool {P.shape} and targets {T.shape} must both be (n,) or both (n, k) with the same k.")
    if T.shape[0] == 0:
        raise ValueError("targets is empty: give at least one length to match.")
    if P.shape[0] < T.shape[0]:
        raise ValueError(f"pool has {P.shape[0]} items for {T.shape[0]} targets: each target needs a different item.")
    if not (np.isfinite(P).all() and np.isfinite(T).all()):
        raise ValueError("lengths must be finite numbers (no NaN or inf).")
    diff = P[None, :, :] - T[:, None, :]  # (T, P, k)
    if at_least:
        excess, short = np.clip(diff, 0, None).sum(axis=2), np.clip(-diff, 0, None).sum(axis=2)
        cost = excess + short * (excess.sum() + 1.0)
    else:
        cost = np.abs(diff).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    out = np.empty(T.shape[0], dtype=np.int64)
    out[rows] = cols
    return out


def paired_permutation_test(a: Any, b: Any, n_perm: int = 2000, seed: int = 0) -> PermutationResult:
    """Do two measurements of the same sequences differ (``b - a``, per layer)? A sign-flip permutation test.

    Under the null each sequence's difference is as likely to have either sign, so the signs are flipped at random
    ``n_perm`` times; the statistic is the paired t (the mean difference over its standard error, recomputed after
    every flip), two-sided, per layer (``p``) and corrected over layers by the largest one in each flip (``p_max``),
    as :func:`permutation_test` does. Pairing removes what the two measurements share (the sentence's own level),
    so it sees a smaller difference than the unpaired test would.

    Parameters
    ----------
    a, b : array-like, (L, B) both, or (B,) both
        The same B sequences, measured twice; a sequence with a NaN in either is left out.
    """
    A, B = _per_sequence(a, "a"), _per_sequence(b, "b")
    if A.shape != B.shape:
        raise ValueError(f"a is {A.shape} and b {B.shape}: a paired test needs the same sequences in both (L, B).")
    n_perm = _check_count(n_perm, "n_perm", 1)
    d = B - A
    d = d[:, ~np.isnan(d).any(axis=0)]
    if d.shape[1] < 2:
        raise ValueError("a paired test needs at least 2 sequences without NaN in both a and b.")
    rng = np.random.default_rng(int(seed))
    signs = np.vstack([np.ones(d.shape[1]), rng.choice([-1.0, 1.0], size=(n_perm, d.shape[1]))])  # row 0: observed
    n = d.shape[1]
    means = signs @ d.T / n  # (n_perm + 1, L)
    sq = (d**2).sum(axis=1) / n  # the same for every flip: sign^2 = 1
    var = np.clip(sq[None] - means**2, 0, None) * n / (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(var > 0, means / np.sqrt(var / n), 0.0)
    t_obs, t_null = np.abs(t[0]), np.abs(t[1:])
    p = (1 + (t_null >= t_obs).sum(axis=0)) / (1 + n_perm)
    p_max = (1 + (t_null.max(axis=1)[:, None] >= t_obs[None]).sum(axis=0)) / (1 + n_perm)
    return PermutationResult(difference=means[0], p=p, p_max=p_max, null=means[1:], n_a=n, n_b=n, n_perm=n_perm,
                             seed=int(seed), sd_a=A.std(axis=1, ddof=1), sd_b=B.std(axis=1, ddof=1), statistic="paired")
