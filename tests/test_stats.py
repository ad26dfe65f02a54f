"""mixlib.stats (chapter 13's intervals and permutation test) against independent computations and by simulation,
and mixlib.mixing.sequence_means against mixing_table."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from mixlib import stats
from mixlib.mixing.tables import bootstrap_counts, layer_means, sequence_means


def test_bootstrap_means_are_the_means_of_explicit_resamples():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 17))
    values[1, 4] = np.nan  # sequence 4 is left out in every layer
    got = stats.bootstrap_means(values, n_boot=50, seed=7)
    kept = np.delete(values, 4, axis=1)
    counts = bootstrap_counts(16, 50, 7)
    for r in range(50):  # each resample: the sequences drawn, with repetition, then averaged
        drawn = np.repeat(np.arange(16), counts[r])
        np.testing.assert_allclose(got[:, r], kept[:, drawn].mean(axis=1), rtol=1e-12)


def test_cluster_bootstrap_draws_whole_clusters():
    """Each resample is the mean of the sequences of the clusters drawn, with repetition (clusters of unequal size)."""
    rng = np.random.default_rng(11)
    labels = np.array(list("aaabbcccccddde"))
    values = rng.normal(size=(2, labels.size))
    values[0, 3] = np.nan  # one 'b' sequence is left out; 'b' keeps one
    got = stats.bootstrap_means(values, n_boot=40, seed=3, clusters=labels)
    keep = ~np.isnan(values).any(axis=0)
    kept, kl = values[:, keep], labels[keep]
    names = np.unique(kl)
    counts = bootstrap_counts(names.size, 40, 3)
    for r in range(40):
        cols = np.concatenate([np.flatnonzero(kl == names[c]) for c in np.repeat(np.arange(names.size), counts[r])])
        np.testing.assert_allclose(got[:, r], kept[:, cols].mean(axis=1), rtol=1e-12)


def test_cluster_bootstrap_covers_where_the_plain_one_does_not():
    """Thirty topics of ten alike pairs: the plain bootstrap's 95% interval of the mean covers the true mean far less
    often than 95%; the cluster bootstrap's comes close to it."""
    rng = np.random.default_rng(12)
    topics = np.repeat(np.arange(30), 10)
    plain = clustered = 0
    runs = 300
    for _ in range(runs):
        data = rng.normal(size=30)[topics] + 0.5 * rng.normal(size=300)  # within-topic correlation 0.8
        seed = int(rng.integers(1 << 30))
        lo, hi = stats.percentile_interval(stats.bootstrap_means(data, 400, seed), 0.95)
        plain += bool(lo[0] <= 0 <= hi[0])
        lo, hi = stats.percentile_interval(stats.bootstrap_means(data, 400, seed, clusters=topics), 0.95)
        clustered += bool(lo[0] <= 0 <= hi[0])
    assert plain / runs < 0.6, plain
    assert 0.88 <= clustered / runs <= 0.99, clustered


def test_cluster_bootstrap_errors_before_work():
    with pytest.raises(ValueError, match="one label per sequence"):
        stats.bootstrap_means(np.ones((2, 5)), clusters=[0, 1])
    with pytest.raises(ValueError, match="at least 2"):
        stats.bootstrap_means(np.arange(6.0), clusters=np.zeros(6))


def test_percentile_interval_matches_layer_means_interval():
    """The same draws and the same percentiles as layer_means (what mixing_table uses) for per-sequence values."""
    rng = np.random.default_rng(2)
    tokens = rng.normal(size=(4, 30, 9))
    real = rng.random((30, 9)) < 0.8
    real[:, 0] = True
    per_seq = sequence_means(tokens, real)
    low, high = stats.percentile_interval(stats.bootstrap_means(per_seq, 300, 5), 0.9)
    ref = layer_means(tokens, real, ci=0.9, n_boot=300, seed=5)
    np.testing.assert_allclose(low, ref["low"], rtol=1e-10)
    np.testing.assert_allclose(high, ref["high"], rtol=1e-10)


def test_sequence_means_is_the_first_step_of_mixing_table():
    rng = np.random.default_rng(3)
    vals = rng.random((2, 5, 6))
    real = np.ones((5, 6), bool)
    real[2, 4:] = False
    sel = np.zeros((5, 6), bool)
    sel[[0, 2], 1] = True
    got = sequence_means(vals, real, select=sel)
    assert np.isnan(got[:, [1, 3, 4]]).all()  # no selected token
    np.testing.assert_allclose(got[:, 0], vals[:, 0, 1])
    np.testing.assert_allclose(sequence_means(vals, real)[:, 2], vals[:, 2, :4].mean(axis=1))
    np.testing.assert_allclose(layer_means(vals, real, select=sel)["estimate"], np.nanmean(got, axis=1))


def test_simultaneous_interval_covers_all_layers_at_its_level():
    """Twelve layers, no difference anywhere: the band covers 0 in every layer in about 95% of the data sets, where
    twelve separate 95% intervals all cover far less often."""
    rng = np.random.default_rng(4)
    all_covered = separately_covered = 0
    runs = 200
    for _ in range(runs):
        data = rng.normal(size=(12, 40)) + rng.normal(size=(1, 40))  # correlated layers, as real layers are
        samples = stats.bootstrap_means(data, 400, int(rng.integers(1 << 30)))
        est = data.mean(axis=1)
        lo, hi = stats.simultaneous_interval(samples, est, 0.95)
        all_covered += bool(((lo <= 0) & (hi >= 0)).all())
        plo, phi = stats.percentile_interval(samples, 0.95)
        separately_covered += bool(((plo <= 0) & (phi >= 0)).all())
        assert ((lo <= plo + 1e-12) & (hi >= phi - 1e-12)).mean() > 0.9  # wider than the layer-by-layer interval
    assert 0.88 <= all_covered / runs <= 0.99, all_covered
    assert separately_covered < all_covered


def test_permutation_p_matches_scipy_for_one_layer():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=25), rng.normal(0.6, 1, size=30)
    res = stats.permutation_test(a, b, n_perm=4000, seed=1, statistic="mean")
    ref = sps.permutation_test((b, a), lambda x, y: x.mean() - y.mean(), permutation_type="independent",
                               n_resamples=4000, alternative="two-sided", random_state=2)
    assert abs(res.p[0] - ref.pvalue) < 0.02, (res.p, ref.pvalue)
    welch = stats.permutation_test(a, b, n_perm=4000, seed=1)  # the default: Welch's t, against scipy's own
    ref_t = sps.permutation_test((b, a), lambda x, y: sps.ttest_ind(x, y, equal_var=False).statistic,
                                 permutation_type="independent", n_resamples=4000, alternative="two-sided", random_state=2)
    assert welch.statistic == "welch" and abs(welch.p[0] - ref_t.pvalue) < 0.02, (welch.p, ref_t.pvalue)
    assert welch.sd_a[0] == pytest.approx(a.std(ddof=1)) and welch.sd_b[0] == pytest.approx(b.std(ddof=1))
    assert res.difference[0] == pytest.approx(b.mean() - a.mean())  # without strata: the observed difference itself
    assert res.p_max[0] == pytest.approx(res.p[0])  # one layer: nothing to correct
    assert (res.n_a, res.n_b) == (25, 30)


def test_max_over_layers_keeps_false_positives_near_five_percent():
    rng = np.random.default_rng(6)
    any_layer = corrected = 0
    runs = 150
    for k in range(runs):
        a = rng.normal(size=(12, 20)) + rng.normal(size=(1, 20))
        b = rng.normal(size=(12, 20)) + rng.normal(size=(1, 20))
        res = stats.permutation_test(a, b, n_perm=200, seed=k)
        assert (res.p_max >= res.p - 1e-12).all()
        any_layer += bool((res.p < 0.05).any())
        corrected += bool((res.p_max < 0.05).any())
    assert corrected / runs <= 0.11, corrected
    assert any_layer > corrected


def _false_positive_rate(statistic, var_ratio, runs=200):
    """How often the corrected test finds a difference between two groups of equal means: 300 sequences against
    100 whose values spread var_ratio times as much (12 correlated layers), as chapter 13's modern pairs and poems."""
    rng = np.random.default_rng(11)
    hits = 0
    for k in range(runs):
        a = rng.normal(size=(12, 300)) + rng.normal(size=(1, 300))
        b = np.sqrt(var_ratio) * (rng.normal(size=(12, 100)) + rng.normal(size=(1, 100)))
        hits += bool((stats.permutation_test(a, b, n_perm=200, seed=k, statistic=statistic).p_max < 0.05).any())
    return hits / runs


def test_welch_keeps_its_level_where_the_bare_difference_does_not():
    """Unequal sizes and spreads (the smaller group the more variable): permuting the bare difference of means
    rejects a true null far more often than 5%; Welch's t stays near 5%. Exchangeable groups: both near 5%."""
    bare, welch = _false_positive_rate("mean", 4.0), _false_positive_rate("welch", 4.0)
    assert bare > 0.12, bare
    assert welch <= 0.09, welch
    assert _false_positive_rate("welch", 1.0, runs=100) <= 0.1


def test_strata_remove_a_difference_that_the_strata_explain():
    """Group b sits mostly in the long stratum, whose values are higher: the plain test finds a difference, the
    test within strata does not; a real group effect within the strata is still found."""
    rng = np.random.default_rng(7)
    stratum_a = np.r_[np.zeros(40, int), np.ones(10, int)]
    stratum_b = np.r_[np.zeros(10, int), np.ones(40, int)]
    a = 3.0 * stratum_a + rng.normal(size=50)
    b = 3.0 * stratum_b + rng.normal(size=50)
    strata = np.r_[stratum_a, stratum_b]
    assert stats.permutation_test(a, b, 1000, 0).p[0] < 0.01
    within = stats.permutation_test(a, b, 1000, 0, strata=strata)
    assert within.p[0] > 0.05 and abs(within.difference[0]) < 0.5
    shifted = stats.permutation_test(a, b + 1.0, 1000, 0, strata=strata)
    assert shifted.p[0] < 0.01 and 0.6 < shifted.difference[0] < 1.4


def test_permutations_keep_group_sizes_within_strata():
    a, b = np.arange(6.0), np.arange(6.0, 12.0)
    strata = np.array([0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1])  # a: 3+3, b: 1+5
    res = stats.permutation_test(a, b, 300, 3, strata=strata)
    both = np.r_[a, b]
    # every permuted difference is (mean of a b-sized draw) - (the rest) with 1 from stratum 0 and 5 from stratum 1
    s0, s1 = both[strata == 0], both[strata == 1]
    possible = set()
    from itertools import combinations
    for i in range(len(s0)):
        for js in combinations(range(len(s1)), 5):
            pick = np.r_[s0[i], s1[list(js)]]
            possible.add(round(pick.mean() - (both.sum() - pick.sum()) / 6, 9))
    assert {round(x, 9) for x in res.null[:, 0]} <= possible


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="layers"):
        stats.permutation_test(np.zeros((2, 5)), np.zeros((3, 5)))
    with pytest.raises(ValueError, match="strata has 3 labels for 10"):
        stats.permutation_test(np.zeros(5), np.ones(5), strata=[0, 1, 2])
    with pytest.raises(ValueError, match="n_perm"):
        stats.permutation_test(np.zeros(5), np.ones(5), n_perm=0)
    with pytest.raises(ValueError, match="at least 2 sequences without NaN for Welch"):
        stats.permutation_test(np.zeros(5), np.ones(1))
    with pytest.raises(ValueError, match="statistic='median'"):
        stats.permutation_test(np.zeros(5), np.ones(5), statistic="median")
    assert stats.permutation_test(np.zeros(5), np.ones(1), statistic="mean").n_b == 1  # the bare difference needs one
    with pytest.raises(ValueError, match="at least 2"):
        stats.bootstrap_means(np.array([[1.0, np.nan, np.nan]]))
    with pytest.raises(ValueError, match="ci="):
        stats.percentile_interval(np.zeros((1, 10)), ci=95)
    with pytest.raises(ValueError, match="estimate has 2 layers"):
        stats.simultaneous_interval(np.zeros((3, 10)), np.zeros(2))


def test_match_lengths_finds_the_closest_assignment():
    """Against brute force over every way to give 4 targets different items of a pool of 6."""
    from itertools import permutations

    rng = np.random.default_rng(3)
    for _ in range(20):
        pool, targets = rng.integers(5, 40, size=6), rng.integers(5, 40, size=4)
        got = stats.match_lengths(pool, targets)
        assert len(set(got.tolist())) == 4
        best = min(sum(abs(pool[i] - t) for i, t in zip(p, targets)) for p in permutations(range(6), 4))
        assert sum(abs(pool[got] - targets)) == best
    assert stats.match_lengths([30, 10, 20], [20, 10]).tolist() == [2, 1]  # exact lengths are found
    with pytest.raises(ValueError, match="pool has 1 items for 2 targets"):
        stats.match_lengths([3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        stats.match_lengths([3, np.nan], [1])
    with pytest.raises(ValueError, match="empty"):
        stats.match_lengths([3], [])
    with pytest.raises(ValueError, match="same k"):
        stats.match_lengths(np.ones((5, 2)), np.ones((2, 3)))


def test_match_lengths_two_columns_and_at_least():
    """Two columns (a pair's two sentences) and at_least, against brute force: the fewest total tokens short of the
    targets first, then the least excess."""
    from itertools import permutations

    rng = np.random.default_rng(4)
    for _ in range(20):
        pool, targets = rng.integers(5, 40, size=(6, 2)), rng.integers(5, 30, size=(4, 2))
        assign = list(permutations(range(6), 4))
        got = stats.match_lengths(pool, targets)
        assert np.abs(pool[got] - targets).sum() == min(np.abs(pool[list(p)] - targets).sum() for p in assign)
        got = stats.match_lengths(pool, targets, at_least=True)
        key = lambda p: (np.clip(targets - pool[list(p)], 0, None).sum(), np.clip(pool[list(p)] - targets, 0, None).sum())  # noqa: E731
        assert key(got) == min(key(p) for p in assign)
    # the nearest item is shorter; at_least takes the longer one
    assert stats.match_lengths([9, 14, 30], [10]).tolist() == [0]
    assert stats.match_lengths([9, 14, 30], [10], at_least=True).tolist() == [1]


def test_paired_test_matches_scipy_and_sees_what_the_unpaired_test_misses():
    rng = np.random.default_rng(9)
    level = rng.normal(0, 5, size=40)  # each sentence's own level, shared by its two measurements
    a, b = level + rng.normal(size=40), level + 0.5 + rng.normal(size=40)
    res = stats.paired_permutation_test(a, b, n_perm=4000, seed=0)
    ref = sps.permutation_test((b - a,), lambda x: x.mean() / (x.std(ddof=1) / np.sqrt(len(x))), permutation_type="samples",
                               n_resamples=4000, alternative="two-sided", random_state=1)
    assert abs(res.p[0] - ref.pvalue) < 0.01 and res.p[0] < 0.01, (res.p, ref.pvalue)
    assert res.difference[0] == pytest.approx((b - a).mean()) and res.statistic == "paired"
    assert stats.permutation_test(a, b, n_perm=2000, seed=0).p[0] > 0.05  # unpaired: the sentences' spread hides it


def test_paired_test_keeps_its_level_over_layers():
    rng = np.random.default_rng(12)
    hits = 0
    for k in range(150):
        level = rng.normal(0, 3, size=(1, 60)) + rng.normal(size=(12, 60))
        a, b = level + rng.normal(size=(12, 60)), level + rng.normal(size=(12, 60))
        hits += bool((stats.paired_permutation_test(a, b, n_perm=200, seed=k).p_max < 0.05).any())
    assert hits / 150 <= 0.1, hits


def test_paired_test_bad_input():
    with pytest.raises(ValueError, match="same sequences"):
        stats.paired_permutation_test(np.zeros((2, 5)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="at least 2"):
        stats.paired_permutation_test([1.0, np.nan], [2.0, 3.0])


def test_difference_interval_is_the_bootstraps_composed():
    rng = np.random.default_rng(21)
    a, b = rng.normal(size=(3, 40)), rng.normal(0.5, 1, size=(3, 25))
    topics = np.repeat(np.arange(8), 5)
    est, lo, hi = stats.difference_interval(a, b, 200, 3, 0.9, clusters=topics)
    samples = stats.bootstrap_means(b, 200, 3) - stats.bootstrap_means(a, 200, 4, clusters=topics)
    ref = stats.simultaneous_interval(samples, b.mean(axis=1) - a.mean(axis=1), 0.9)
    np.testing.assert_allclose(est, b.mean(axis=1) - a.mean(axis=1))
    np.testing.assert_allclose(lo, ref[0]) and np.testing.assert_allclose(hi, ref[1])
    b2 = a + rng.normal(0.2, 0.1, size=a.shape)
    est, lo, hi = stats.difference_interval(a, b2, 200, 3, paired=True, clusters=topics)
    ref = stats.simultaneous_interval(stats.bootstrap_means(b2 - a, 200, 3, clusters=topics), (b2 - a).mean(axis=1))
    np.testing.assert_allclose(lo, ref[0]) and np.testing.assert_allclose(hi, ref[1])
    assert (lo > 0).all()  # a shift of 0.2 with little noise is seen in every layer
    with pytest.raises(ValueError, match="paired=True needs the same sequences"):
        stats.difference_interval(a, b, paired=True)
    with pytest.raises(ValueError, match="clusters has 3 labels"):
        stats.difference_interval(a, b, clusters=[0, 1, 2])


def test_difference_interval_holds_its_level_where_the_permutation_test_does_not():
    """300 modern pairs from 30 alike topics against 100 independent poems, no difference: the permutation test
    (which takes the pairs as independent) finds some layer far more often than 5%; the interval that resamples
    topics whole stays near its level."""
    rng = np.random.default_rng(22)
    topics = np.repeat(np.arange(30), 10)
    runs, perm_hits, interval_hits = 120, 0, 0
    for _ in range(runs):
        shared = rng.normal(size=(1, 30))[:, topics] * 0.8  # the topic's own level, in every layer
        a = shared + rng.normal(size=(3, 300)) * 0.6
        b = rng.normal(size=(1, 100)) * 0.8 + rng.normal(size=(3, 100)) * 0.6  # the same spread, nothing shared
        perm_hits += bool((stats.permutation_test(a, b, 199, int(rng.integers(1 << 30))).p_max < 0.05).any())
        _, lo, hi = stats.difference_interval(a, b, 300, int(rng.integers(1 << 30)), clusters=topics)
        interval_hits += bool(((lo > 0) | (hi < 0)).any())
    assert perm_hits / runs > 0.12, (perm_hits, interval_hits)  # 17.5% here, against a level of 5%
    assert interval_hits / runs < 0.12, (perm_hits, interval_hits)
