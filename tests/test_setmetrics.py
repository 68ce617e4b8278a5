"""Set metrics: paper tables, edge cases, and compiled == reference."""

import math
import re

import numpy as np
import pytest
from harness import THREADED_ROWS, assert_metrics_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.metrics import batch_ref
from benchmint.metrics.batch import METRIC_NAMES, score_batch, score_counts, score_item

LETTERS = "ABCD"


# spm-bench Table 2: gold {A, B}.
@pytest.mark.parametrize(
    "choices, tp, fp, recall, pw, em, spc, sip",
    [
        ({"A", "B"}, 2, 0, 1.0, 1.00, 1.0, 1.0, 1.00),
        ({"A"}, 1, 0, 0.5, 1.00, 0.0, 0.5, 0.40),
        ({"A", "B", "C"}, 2, 1, 1.0, 0.25, 0.0, 0.0, 0.24),
        ({"A", "B", "C", "D"}, 2, 2, 1.0, 0.14, 0.0, 0.0, 0.15),
    ],
)
def test_spm_table2(choices, tp, fp, recall, pw, em, spc, sip):
    row = score_item(choices, {"A", "B"})
    assert (row["tp"], row["fp"]) == (tp, fp)
    assert row["recall"] == recall
    assert round(tp / (tp + 6 * fp), 2) == pw
    assert row["em"] == em and row["spc"] == spc
    assert round(row["sip_f1"], 2) == sip


# spm-bench Table 4 (Appendix B), rows as the equations give them.
# Each entry: |Sc|, TP, FP, Γ, scores for λ = 0.3 ... 0.8.
TABLE4 = [
    (1, 1, 1, 1, [0.200, 0.267, 0.333, 0.400, 0.467, 0.533]),
    (1, 1, 1, 2, [0.150, 0.200, 0.250, 0.300, 0.350, 0.400]),
    (1, 1, 1, 4, [0.100, 0.133, 0.167, 0.200, 0.233, 0.267]),
    (1, 1, 1, 6, [0.075, 0.100, 0.125, 0.150, 0.175, 0.200]),
    (1, 1, 1, 8, [0.060, 0.080, 0.100, 0.120, 0.140, 0.160]),
    (1, 1, 1, 10, [0.050, 0.067, 0.083, 0.100, 0.117, 0.133]),
    (2, 1, 0, 6, [0.200, 0.267, 0.333, 0.400, 0.467, 0.533]),  # Γ plays no part without FP
    (2, 2, 1, 1, [0.240, 0.320, 0.400, 0.480, 0.560, 0.640]),
    (2, 2, 1, 2, [0.200, 0.267, 0.333, 0.400, 0.467, 0.533]),
    (2, 2, 1, 4, [0.150, 0.200, 0.250, 0.300, 0.350, 0.400]),
    (2, 2, 1, 6, [0.120, 0.160, 0.200, 0.240, 0.280, 0.320]),
    (2, 2, 1, 8, [0.100, 0.133, 0.167, 0.200, 0.233, 0.267]),
    (2, 2, 1, 10, [0.086, 0.114, 0.143, 0.171, 0.200, 0.229]),
    (3, 2, 0, 6, [0.240, 0.320, 0.400, 0.480, 0.560, 0.640]),
    (3, 1, 0, 6, [0.150, 0.200, 0.250, 0.300, 0.350, 0.400]),
    (3, 3, 1, 1, [0.257, 0.343, 0.429, 0.514, 0.600, 0.686]),
    # The paper prints 0.214 0.286 0.357 0.429 0.500 0.571 for Γ = 2, which
    # corresponds to F1γ = 5/7. Eq. (4)-(5) give Pw = 3/5, R = 1, F1γ = 0.75.
    (3, 3, 1, 2, [0.225, 0.300, 0.375, 0.450, 0.525, 0.600]),
    (3, 3, 1, 4, [0.180, 0.240, 0.300, 0.360, 0.420, 0.480]),
    (3, 3, 1, 6, [0.150, 0.200, 0.250, 0.300, 0.350, 0.400]),
    # The paper prints 0.130 0.173 0.217 0.261 0.304 0.348 for Γ = 8
    # (F1γ = 10/23). Eq. (4)-(5) give Pw = 3/11, R = 1, F1γ = 3/7.
    (3, 3, 1, 8, [0.129, 0.171, 0.214, 0.257, 0.300, 0.343]),
    (3, 3, 1, 10, [0.113, 0.150, 0.188, 0.225, 0.263, 0.300]),
]


@pytest.mark.parametrize("size, tp, fp, gamma, expected", TABLE4)
def test_spm_table4(size, tp, fp, gamma, expected):
    gold = set(range(size))
    pred = set(range(tp)) | {100 + k for k in range(fp)}
    for lam, want in zip([0.3, 0.4, 0.5, 0.6, 0.7, 0.8], expected):
        got = score_item(pred, gold, sip_lambda=lam, sip_gamma=gamma)["sip_f1"]
        assert abs(got - want) <= 5e-4 + 1e-12, (lam, got, want)


def test_appendix_b_statements():
    # "selecting two correct answers with zero errors yields 0.480, while selecting all
    # three correct answers but including one error results in ... 0.300"
    assert round(score_item({1, 2}, {1, 2, 3})["sip_f1"], 3) == 0.480
    assert round(score_item({1, 2, 3, 9}, {1, 2, 3})["sip_f1"], 3) == 0.300


def test_crystalxrd_edge_cases():
    empty_pred = score_item([], [(1, 0, 0)], task="hkl")
    assert all(empty_pred[m] == 0.0 for m in ("jaccard", "precision", "recall", "f1", "j_pen", "f1_pen", "em"))
    empty_gold = score_item([(1, 0, 0)], [], task="hkl")
    assert all(empty_gold[m] == 0.0 for m in ("jaccard", "precision", "recall", "f1", "j_pen", "f1_pen", "em", "sip_f1", "spc"))
    both = score_item([], [], task="hkl")
    assert all(both[m] == 1.0 for m in batch_ref.METRIC_FLOATS)
    # (000) filtered and duplicates removed before scoring.
    row = score_item([(0, 0, 0), (1, 1, 0), [1, 1, 0]], [(1, 1, 0)], task="hkl")
    assert row["em"] == 1.0 and row["tp"] == 1 and row["fp"] == 0


def test_crystalxrd_penalty():
    # |P| = 4, |G| = 2, T = 2: J = 2/4, penalty = 2/4, F1 = 2·2/6.
    row = score_item({1, 2, 3, 4}, {1, 2})
    assert row["jaccard"] == 0.5 and row["j_pen"] == 0.25
    assert row["f1"] == pytest.approx(2 / 3) and row["f1_pen"] == pytest.approx(1 / 3)
    assert row["over_predicted"]
    # No penalty when |P| <= |G|.
    row = score_item({1, 9}, {1, 2, 3})
    assert row["j_pen"] == row["jaccard"] == 0.25


def test_spc_definition():
    assert score_item({"A"}, {"A", "B", "C"})["spc"] == pytest.approx(1 / 3)
    assert score_item({"A", "D"}, {"A", "B", "C"})["spc"] == 0.0
    assert score_item(set(), {"A"})["spc"] == 0.0


@pytest.mark.parametrize("lam, gamma", [(-0.1, 6), (1.5, 6), (float("nan"), 6), (0.6, 0.5), (0.6, float("inf"))])
def test_param_range(lam, gamma):
    with pytest.raises(ValueError, match="sip_"):
        score_item({1}, {1}, sip_lambda=lam, sip_gamma=gamma)
    with pytest.raises(ValueError, match="sip_"):
        score_batch([{1}], [{1}], sip_lambda=lam, sip_gamma=gamma)


def test_wrong_kind_answers():
    from benchmint.tasks import AnswerError

    with pytest.raises(AnswerError, match="option letters"):
        score_item(["AB"], ["A"], task="mcq")
    with pytest.raises(AnswerError, match="3 .* or 4"):
        score_item([(1, 0)], [(1, 0, 0)], task="hkl")
    with pytest.raises(AnswerError, match="integers"):
        score_item([(1, 0, True)], [(1, 0, 0)], task="hkl")


# ---- compiled == reference ------------------------------------------------
# The reference is batch_ref called directly; the compiled result comes from the public
# functions under BENCHMINT_IMPL=compiled, which must have run the compiled kernel. Batches
# reach above THREADED_ROWS, so the threaded kernels and their merge of row errors run.

def _csr(rows):
    """CSR of rows given as key lists, taken as they are (unsorted rows stay unsorted)."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    keys = np.fromiter((k for r in rows for k in r), dtype=np.int64, count=int(offsets[-1]))
    return offsets, keys


sets = st.frozensets(st.integers(0, 40), max_size=12).map(sorted)
params = st.tuples(st.floats(0, 1), st.floats(1, 50))
workers_choice = st.sampled_from([1, 2, -1])


@st.composite
def big_batches(draw, row, bad_row=None):
    """Drawn rows tiled to n >= THREADED_ROWS rows; with ``bad_row``, up to three invalid rows at drawn
    places (often on both sides of the two-thread split), so the lowest row's error must win."""
    rows = draw(st.lists(row, min_size=1, max_size=40))
    n = draw(st.integers(THREADED_ROWS, THREADED_ROWS + 4000))
    out = [rows[i % len(rows)] for i in range(n)]
    if bad_row is not None:
        for at in draw(st.lists(st.integers(0, n - 1), max_size=3)):
            out[at] = draw(bad_row)
    return out


# Rows whose keys are not strictly increasing.
unsorted_keys = st.lists(st.integers(0, 40), min_size=2, max_size=6).filter(
    lambda r: any(b <= a for a, b in zip(r, r[1:])))


@settings(max_examples=25, deadline=None)
@given(big_batches(st.tuples(sets, sets), bad_row=st.tuples(unsorted_keys, sets)), params, workers_choice)
def test_csr_equivalence(compare_forms, pairs, prm, workers):
    po, pk = _csr([p for p, _ in pairs])
    go, gk = _csr([g for _, g in pairs])
    compare_forms("batch", lambda: batch_ref.from_csr(po, pk, go, gk, *prm, workers=workers),
                  lambda: score_batch((po, pk), (go, gk), sip_lambda=prm[0], sip_gamma=prm[1], workers=workers),
                  assert_metrics_equal)


@settings(max_examples=25, deadline=None)
@given(big_batches(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))), params, workers_choice)
def test_bitmask_equivalence(compare_forms, pairs, prm, workers):
    p = np.array([a for a, _ in pairs], dtype=np.uint64)
    g = np.array([b for _, b in pairs], dtype=np.uint64)
    compare_forms("batch", lambda: batch_ref.from_bitmasks(p, g, *prm, workers=workers),
                  lambda: score_batch(p, g, sip_lambda=prm[0], sip_gamma=prm[1], workers=workers),
                  assert_metrics_equal)


valid_counts = st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)).map(
    lambda r: (min(r), r[1], r[2]))
any_counts = st.tuples(st.integers(-2, 30), st.integers(-2, 30), st.integers(-2, 30))


@settings(max_examples=25, deadline=None)
@given(big_batches(valid_counts, bad_row=any_counts), params, workers_choice)
def test_counts_equivalence_and_errors(compare_forms, rows, prm, workers):
    t, p, g = (np.array([r[k] for r in rows], dtype=np.int32) for k in range(3))
    compare_forms("batch", lambda: batch_ref.from_counts(t, p, g, *prm, workers=workers),
                  lambda: score_counts(t, p, g, sip_lambda=prm[0], sip_gamma=prm[1], workers=workers),
                  assert_metrics_equal)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(sets, sets), max_size=50), params)
def test_small_batches_equal(compare_forms, pairs, prm):
    # Short batches, the empty one included: the serial path of every kernel.
    po, pk = _csr([p for p, _ in pairs])
    go, gk = _csr([g for _, g in pairs])
    compare_forms("batch", lambda: batch_ref.from_csr(po, pk, go, gk, *prm),
                  lambda: score_batch((po, pk), (go, gk), sip_lambda=prm[0], sip_gamma=prm[1]),
                  assert_metrics_equal)


@pytest.mark.parametrize("bad_rows, first", [
    ((9_999, 10_000), 9_999),        # the last row of the first thread's chunk and the first of the second's
    ((15_000, 10_001), 10_001),      # both in the second chunk
    ((19_999, 3, 12_000), 3),        # the first chunk's error, though the second chunk fails too
    ((19_999,), 19_999),             # only the last row
])
@pytest.mark.parametrize("workers", [2, -1])
def test_lowest_row_error_wins(compare_forms, bad_rows, first, workers):
    n = 20_000
    t, p, g = np.ones(n, np.int32), np.full(n, 2, np.int32), np.full(n, 3, np.int32)
    for at in bad_rows:
        t[at] = 5  # tp > n_pred
    ref, _ = compare_forms("batch", lambda: batch_ref.from_counts(t, p, g, 0.6, 6.0, workers=workers),
                        lambda: score_counts(t, p, g, workers=workers), assert_metrics_equal)
    assert ref[2].startswith(f"row {first}: counts must satisfy")
    rows = [[1, 2]] * n
    for at in bad_rows:
        rows[at] = [2, 1]
    po, pk = _csr(rows)
    go, gk = _csr([[1]] * n)
    ref, _ = compare_forms("batch", lambda: batch_ref.from_csr(po, pk, go, gk, 0.6, 6.0, workers=workers),
                        lambda: score_batch((po, pk), (go, gk), workers=workers), assert_metrics_equal)
    assert ref[2].startswith(f"pred row {first}: keys are not strictly increasing")


def test_large_batch_threads(compare_forms):
    rng = np.random.default_rng(7)
    n = 200_000
    p = rng.integers(0, 2**16, n, dtype=np.uint64)
    g = rng.integers(0, 2**16, n, dtype=np.uint64)
    compare_forms("batch", lambda: batch_ref.from_bitmasks(p, g, 0.6, 6.0), lambda: score_batch(p, g, workers=-1),
                  assert_metrics_equal)


@pytest.mark.parametrize(
    "po, pk, go, gk, message",
    [
        ([0, 1], [3], [0, 1, 2], [1, 2], "different lengths"),
        ([1, 1], [3], [0, 1], [1], "pred offsets must start at 0"),
        ([0, 2], [3], [0, 1], [1], "pred offsets must start at 0"),
        ([0, 1], [3], [0, 2], [1], "gold offsets must start at 0"),
        ([0, 2, 1, 3], [1, 2, 3], [0, 0, 0, 0], [], "pred row 1: offsets decrease"),
        ([0, 2, 2], [2, 1], [0, 1, 2], [1, 5], "pred row 0: keys are not strictly increasing"),
        ([0, 1, 2], [1, 2], [0, 0, 2], [4, 4], "gold row 1: keys are not strictly increasing"),
        ([], [], [0], [], "length n \\+ 1"),
    ],
)
def test_csr_errors_same(compare_forms, po, pk, go, gk, message):
    arrays = [np.array(a, dtype=np.int64) for a in (po, pk, go, gk)]
    ref, _ = compare_forms("batch", lambda: batch_ref.from_csr(*arrays, 0.6, 6.0),
                        lambda: score_batch(tuple(arrays[:2]), tuple(arrays[2:])), assert_metrics_equal)
    assert ref[0] == "error" and re.search(message, ref[2])


def test_implementation_switch(impl, dispatch_counts):
    got = score_batch([{"A"}, {"B", "C"}], [{"A"}, {"B"}], task="mcq")
    assert dispatch_counts("batch") == {"compiled": int(impl == "compiled"), "reference": int(impl == "reference"),
                                        "fallback": 0}
    # P = G scores 1 everywhere; {B, C} against {B}: tp 1, fp 1, Jaccard 1/2, SIP-F1 0.6·2/(1 + 6 + 1).
    assert got["em"].tolist() == [1.0, 0.0] and got["jaccard"].tolist() == [1.0, 0.5]
    assert got["fp"].tolist() == [0, 1] and got["sip_f1"][1] == 0.6 * 2 / 8


def test_unknown_implementation_is_an_error(forced_impl):
    with forced_impl("fast"), pytest.raises(ValueError, match="BENCHMINT_IMPL"):
        score_batch([{1}], [{1}])


def test_batch_input_forms_agree():
    pred = [{"A", "C"}, set(), {"B"}, {"A", "B", "C", "D"}]
    gold = [{"A"}, {"A"}, {"B"}, {"A", "B"}]
    from_lists = score_batch(pred, gold, task="mcq")
    masks = lambda sets: np.array([sum(1 << (ord(c) - 65) for c in s) for s in sets], dtype=np.uint64)  # noqa: E731
    from_masks = score_batch(masks(pred), masks(gold))
    from_counts = score_counts(from_lists["tp"], [len(s) for s in pred], [len(s) for s in gold])
    generic = score_batch([list(s) for s in pred], [sorted(s) for s in gold])
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(from_lists[name], from_masks[name])
        np.testing.assert_array_equal(from_lists[name], from_counts[name])
        np.testing.assert_array_equal(from_lists[name], generic[name])
    assert from_lists["sip_f1"][0] == pytest.approx(0.6 * 2 / (1 + 6 + 1))
    assert not math.isnan(from_lists["precision"][1])


def test_out_buffers_reused_and_checked():
    p = np.array([3, 1, 0], dtype=np.uint64)
    g = np.array([1, 1, 0], dtype=np.uint64)
    for impl in (batch_ref, _core.batch):
        fresh = impl.from_bitmasks(p, g, 0.6, 6.0)
        out = {k: np.full_like(v, 7) for k, v in fresh.items()}
        again = impl.from_bitmasks(p, g, 0.6, 6.0, 1, out)
        assert again["jaccard"] is out["jaccard"] or np.shares_memory(again["jaccard"], out["jaccard"])
        for name in METRIC_NAMES:
            np.testing.assert_array_equal(out[name], fresh[name])
    bad_cases = [
        ({k: v for k, v in fresh.items() if k != "spc"}, "out is missing the array 'spc'"),
        ({**fresh, "em": np.zeros(3, dtype=np.float32)}, r"out\['em'\] must be a writable contiguous 1-D float64 array of length 3"),
        ({**fresh, "tp": np.zeros(4, dtype=np.int32)}, r"out\['tp'\] must be .* int32 array of length 3"),
        ({**fresh, "f1": np.zeros(6)[::2]}, r"out\['f1'\] must be"),
    ]
    for bad, message in bad_cases:
        for impl in (batch_ref, _core.batch):
            with pytest.raises(ValueError, match=message):
                impl.from_bitmasks(p, g, 0.6, 6.0, 1, bad)


@pytest.mark.parametrize("workers", [0, -2])
def test_workers_checked_alike(workers):
    for impl in (batch_ref, _core.batch):
        with pytest.raises(ValueError, match="workers must be"):
            impl.from_counts(np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32), 0.6, 6.0, workers)
