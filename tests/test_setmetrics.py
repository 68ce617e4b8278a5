"""Set metrics: paper tables, edge cases, and compiled == reference."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.metrics import reference
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
    assert all(both[m] == 1.0 for m in reference.METRIC_FLOATS)
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

def _compare(kernel: str, *args, workers=1):
    lam, gamma = args[-2], args[-1]
    ref_err = comp_err = None
    try:
        ref = getattr(reference, kernel)(*args, workers=workers)
    except ValueError as exc:
        ref_err = str(exc)
    try:
        comp = getattr(_core.metrics, kernel)(*args, workers=workers)
    except ValueError as exc:
        comp_err = str(exc)
    assert ref_err == comp_err
    if ref_err is None:
        assert set(comp) == set(ref) == set(METRIC_NAMES)
        for name in METRIC_NAMES:
            assert comp[name].dtype == ref[name].dtype, name
            np.testing.assert_array_equal(comp[name], ref[name], err_msg=name)  # bit-exact


sets = st.frozensets(st.integers(0, 40), max_size=12)
params = st.tuples(st.floats(0, 1), st.floats(1, 50))


def _csr(rows):
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    keys = []
    for i, r in enumerate(rows):
        keys.extend(sorted(r))
        offsets[i + 1] = len(keys)
    return offsets, np.array(keys, dtype=np.int64)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(sets, sets), max_size=50), params, st.sampled_from([1, 2, -1]))
def test_csr_equivalence(pairs, prm, workers):
    po, pk = _csr([p for p, _ in pairs])
    go, gk = _csr([g for _, g in pairs])
    _compare("from_csr", po, pk, go, gk, *prm, workers=workers)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), max_size=50), params)
def test_bitmask_equivalence(pairs, prm):
    p = np.array([a for a, _ in pairs], dtype=np.uint64)
    g = np.array([b for _, b in pairs], dtype=np.uint64)
    _compare("from_bitmasks", p, g, *prm)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 30), st.integers(-2, 30), st.integers(-2, 30)), max_size=40), params)
def test_counts_equivalence_and_errors(rows, prm):
    t, p, g = (np.array([r[k] for r in rows], dtype=np.int32) for k in range(3))
    _compare("from_counts", t, p, g, *prm)


def test_large_batch_threads_equal_serial():
    rng = np.random.default_rng(7)
    n = 200_000
    p = rng.integers(0, 2**16, n, dtype=np.uint64)
    g = rng.integers(0, 2**16, n, dtype=np.uint64)
    one = _core.metrics.from_bitmasks(p, g, 0.6, 6.0, workers=1)
    many = _core.metrics.from_bitmasks(p, g, 0.6, 6.0, workers=-1)
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(one[name], many[name])


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
def test_csr_errors_same(po, pk, go, gk, message):
    arrays = [np.array(a, dtype=np.int64) for a in (po, pk, go, gk)]
    for impl in (reference, _core.metrics):
        with pytest.raises(ValueError, match=message):
            impl.from_csr(*arrays, 0.6, 6.0)


def test_reference_switch(monkeypatch):
    monkeypatch.setenv("BENCHMINT_IMPL", "reference")
    ref = score_batch([{"A"}, {"B", "C"}], [{"A"}, {"B"}], task="mcq")
    monkeypatch.setenv("BENCHMINT_IMPL", "compiled")
    comp = score_batch([{"A"}, {"B", "C"}], [{"A"}, {"B"}], task="mcq")
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(ref[name], comp[name])
    monkeypatch.setenv("BENCHMINT_IMPL", "fast")
    with pytest.raises(ValueError, match="BENCHMINT_IMPL"):
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
    for impl in (reference, _core.metrics):
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
        for impl in (reference, _core.metrics):
            with pytest.raises(ValueError, match=message):
                impl.from_bitmasks(p, g, 0.6, 6.0, 1, bad)


@pytest.mark.parametrize("workers", [0, -2])
def test_workers_checked_alike(workers):
    for impl in (reference, _core.metrics):
        with pytest.raises(ValueError, match="workers must be"):
            impl.from_counts(np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32), 0.6, 6.0, workers)
