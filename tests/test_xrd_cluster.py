"""The KMeans selection's restarts and silhouette on several threads (benchmint.xrd.cluster) against scikit-learn
called by hand on one thread, against the plain forms, and against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from benchmint.xrd import cluster, cluster_ref


@st.composite
def data_sets(draw):
    """Rows of 1-6 features, many repeated (as repeated structures give), and k up to the distinct rows."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(2, 160))
    d = draw(st.integers(1, 6))
    kind = draw(st.sampled_from(["normal", "integers", "blobs"]))
    if kind == "normal":
        x = rng.normal(size=(n, d))
    elif kind == "integers":  # coded features (union size, crystal system) repeat a lot
        x = rng.integers(0, 4, size=(n, d)).astype(np.float64)
    else:
        centres = rng.normal(scale=5, size=(draw(st.integers(1, 6)), d))
        x = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.3, size=(n, d))
    repeats = draw(st.integers(0, n // 2))
    x[rng.integers(0, n, repeats)] = x[rng.integers(0, n, repeats)]
    distinct = len(np.unique(x, axis=0))
    k = draw(st.integers(1, min(25, distinct)))
    return x, k, draw(st.integers(0, 2**31 - 1)), draw(st.sampled_from([2, 3]))


def plain_kmeans(x, k, seed):
    from sklearn.cluster import KMeans

    with threadpool_limits(limits=1):
        km = KMeans(n_clusters=k, random_state=seed, n_init=10).fit(x)
    return km.labels_, km.cluster_centers_


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_sets())
def test_restarts_side_by_side_give_scikit_learns_kmeans_bit_for_bit(case):
    x, k, seed, workers = case
    labels, centres = plain_kmeans(x, k, seed)
    with threadpool_limits(limits=1, user_api="blas"):
        got_labels, got_centres = cluster.kmeans(x, k, seed, workers, threads_from=0)
    assert np.array_equal(got_labels, labels)
    assert np.array_equal(got_centres, centres)  # bit for bit, not to a tolerance


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_starts_are_drawn_in_turn_when_the_draw_count_is_not_scikit_learns(monkeypatch):
    """Should a scikit-learn release draw another count of uniforms per start, the states do not chain: the
    starts are drawn again one after the other, and the result is still KMeans's."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 4))
    expected = plain_kmeans(x, 7, 11)
    monkeypatch.setattr(cluster, "draws_per_start", lambda k: 3)  # wrong on purpose
    labels, centres = cluster.kmeans(x, 7, 11, 2, threads_from=0)
    assert np.array_equal(labels, expected[0]) and np.array_equal(centres, expected[1])


def test_draws_per_start_is_what_kmeans_plusplus_draws():
    from sklearn.cluster import kmeans_plusplus

    x = np.random.default_rng(0).normal(size=(100, 3))
    for k in (1, 2, 7, 25, 60):
        used = np.random.RandomState(4)
        kmeans_plusplus(x, k, random_state=used)
        skipped = np.random.RandomState(4)
        skipped.random_sample(cluster.draws_per_start(k))
        assert cluster._same_state(used.get_state(), skipped.get_state()), k


# Worked by hand on a line. A = {0, 1}, B = {4, 6}: row 0: a = 1, b = (4 + 6)/2 = 5, s = 4/5; row 1: a = 1,
# b = (3 + 5)/2 = 4, s = 3/4; row 4: a = 2, b = (4 + 3)/2 = 7/2, s = 3/7; row 6: a = 2, b = 11/2, s = 7/11.
TWO_PAIRS = (np.array([[0.0], [1.0], [4.0], [6.0]]), np.array([0, 0, 1, 1]), (4 / 5 + 3 / 4 + 3 / 7 + 7 / 11) / 4)
# A = {0} alone: s = 0; B = {1, 3}: row 1: a = 2, b = 1, s = -1/2; row 3: a = 2, b = 3, s = 1/3.
WITH_A_SINGLETON = (np.array([[0.0], [1.0], [3.0]]), np.array([5, 9, 9]), (0 - 1 / 2 + 1 / 3) / 3)
# In two dimensions, labels not 0..m-1: A = {(0,0), (3,4)}, B = {(0,4)}: (0,0): a = 5, b = 4, s = -1/5;
# (3,4): a = 5, b = 3, s = -2/5; (0,4) alone: 0.
PLANE = (np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 4.0]]), np.array([7, 7, 2]), (-1 / 5 - 2 / 5) / 3)


# TWO_PAIRS with each row three times: the kernel takes each distinct row once, weighted 3. Row 0: a = (0 + 0 + 1 +
# 1 + 1)/5 = 3/5, b = (3*4 + 3*6)/6 = 5, s = 22/25; row 1: a = 3/5, b = (3*3 + 3*5)/6 = 4, s = 17/20; row 4: a =
# 3*2/5 = 6/5, b = (3*4 + 3*3)/6 = 7/2, s = 23/35; row 6: a = 6/5, b = (3*6 + 3*5)/6 = 11/2, s = 43/55.
TRIPLED = (np.repeat(TWO_PAIRS[0], 3, axis=0), np.repeat(TWO_PAIRS[1], 3), (22 / 25 + 17 / 20 + 23 / 35 + 43 / 55) / 4)


def test_repeated_rows_count_by_their_weight():
    x, labels, expected = TRIPLED
    codes, rows, counts = cluster.distinct_rows(x, labels)
    assert codes.tolist() == [0, 0, 1, 1] and rows.ravel().tolist() == [0, 1, 4, 6] and counts.tolist() == [3] * 4
    for workers in (1, 2):
        assert cluster.silhouette(x, labels, workers, kernel_from=0) == pytest.approx(expected, abs=1e-15)
    assert cluster_ref.silhouette(x, labels) == pytest.approx(expected, abs=1e-15)
    # Equal rows in different clusters stay apart (their own cluster differs, so do their silhouettes).
    split = np.array([0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2])
    assert cluster.distinct_rows(x, split)[2].tolist() == [2, 1, 3, 3, 3]  # 0 | 0, 1 | 4, 6
    assert cluster.silhouette(x, split, 2, kernel_from=0) == pytest.approx(cluster_ref.silhouette(x, split), abs=1e-15)


@pytest.mark.parametrize("case", [TWO_PAIRS, WITH_A_SINGLETON, PLANE])
def test_silhouette_by_hand(case):
    x, labels, expected = case
    for workers in (1, 2):
        assert cluster.silhouette(x, labels, workers, kernel_from=0) == pytest.approx(expected, abs=1e-15)
    assert cluster_ref.silhouette(x, labels) == pytest.approx(expected, abs=1e-15)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data_sets(), st.integers(2, 9))
def test_silhouette_agrees_with_scikit_learn_and_the_plain_form(case, clusters):
    """scikit-learn takes each distance from |x|² - 2x·y + |y|² (BLAS), so equal rows (the data sets repeat many)
    come out up to ~1e-7 apart, the root of a rounding error: its silhouette is within 1e-6 of the exact one the
    kernel and the plain form take, which agree to 1e-12 (their sums differ in order only)."""
    from sklearn.metrics import silhouette_score

    x, _, seed, workers = case
    labels = np.random.default_rng(seed).integers(0, clusters, len(x)) * 3  # codes need not be 0..m-1
    if not 2 <= len(np.unique(labels)) < len(x):
        return
    got = cluster.silhouette(x, labels, workers, kernel_from=0)
    assert got == pytest.approx(cluster_ref.silhouette(x, labels), abs=1e-12)
    with threadpool_limits(limits=1):
        assert got == pytest.approx(silhouette_score(x, labels), abs=1e-6)


@pytest.mark.parametrize("rows_per_unit", [None, 300])
def test_silhouette_is_the_same_on_any_thread_count(rows_per_unit, monkeypatch):
    """Each distance is computed once for both its rows, in fixed units over the threads; each sum is taken in
    one order whatever the split. With 300 rows a unit a cluster's rows come in several units, whose partial
    sums for the other cluster's rows are added in turn."""
    if rows_per_unit:
        monkeypatch.setattr(cluster, "ROWS_PER_UNIT", rows_per_unit)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 6))
    x[::7] = x[3]  # repeated rows
    labels = rng.integers(0, 13, len(x))
    labels[:900] = 4  # one cluster much larger than the others
    one = cluster.silhouette(x, labels, 1, kernel_from=0)
    assert [cluster.silhouette(x, labels, w, kernel_from=0) for w in (2, 3, 8)] == [one] * 3
    assert one == pytest.approx(cluster_ref.silhouette(x, labels), abs=1e-12)


def test_small_databases_take_the_plain_form_and_large_ones_the_kernel(dispatch_counts):
    """Loading the kernel costs more than the plain form below ``KERNEL_FROM_ROWS`` rows; the two agree."""
    rng = np.random.default_rng(8)
    small = rng.normal(size=(300, 6))
    labels = rng.integers(0, 5, 300)
    got = cluster.silhouette(small, labels, 2)
    assert dispatch_counts("cluster") == {"compiled": 0, "reference": 0, "fallback": 1}
    assert got == pytest.approx(cluster.silhouette(small, labels, 2, kernel_from=0), abs=1e-13)
    large = rng.normal(size=(cluster.KERNEL_FROM_ROWS, 2))
    cluster.silhouette(large, rng.integers(0, 3, len(large)), 2)
    assert dispatch_counts("cluster")["compiled"] == 2


def test_reference_form_runs_under_benchmint_impl_reference(forced_impl, dispatch_counts):
    x, labels, expected = TWO_PAIRS
    with forced_impl("reference"):
        assert cluster.silhouette(x, labels, 2, kernel_from=0) == pytest.approx(expected, abs=1e-15)
        cluster.kmeans(x, 2, 0, 2)
    assert dispatch_counts("cluster")["reference"] == 2
