"""User-defined metrics: the built-ins re-expressed as user metrics equal the C++ kernels bit for bit;
compiled == reference, errors included; hand-worked values; the on-disk cache; score_batch and benchmint score."""

import json
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmint import _core
from benchmint.cli import main
from benchmint.metrics import user_ref
from benchmint.metrics.batch import score_batch
from benchmint.metrics.pipeline import ScoreConfig, score_files
from benchmint.metrics.user import (
    ROWS_PER_THREAD,
    MetricCompileError,
    Run,
    UserMetric,
    evaluate,
    helper,
    load_metric,
    metric,
)

ALL_CORES = min(os.cpu_count() or 1, numba.config.NUMBA_NUM_THREADS)
BIG = 200_000  # rows: more than ROWS_PER_THREAD per thread on any core count this runs on
assert BIG // ROWS_PER_THREAD >= 32


# ---- the built-in metrics of spm-bench §3 and crystalxrd-bench §2.4, written as plain functions ----------------
# Float expressions in the order of csrc/metrics.hpp, so the values must match bit for bit.

@helper
def _exact(fp, fn):
    return fp == 0 and fn == 0


@metric
def em(tp, fp, fn, g):
    return 1.0 if _exact(fp, fn) else 0.0


@metric
def spc(tp, fp, fn, g):
    if _exact(fp, fn):
        return 1.0
    return (tp + fp) / g if fp == 0 and tp + fp > 0 else 0.0


def sip_f1_with(lam, gamma):
    def sip_f1(tp, fp, fn, g):
        if _exact(fp, fn):
            return 1.0
        return lam * (2.0 * tp) / ((tp + gamma * fp) + g) if tp > 0 else 0.0
    return sip_f1


@metric
def jaccard(tp, fp, fn, g):
    return 1.0 if _exact(fp, fn) else tp / ((tp + fp + g) - tp)


@metric
def precision(tp, fp, fn, g):
    return 1.0 if _exact(fp, fn) else (tp / (tp + fp) if tp + fp > 0 else 0.0)


@metric
def recall(tp, fp, fn, g):
    return 1.0 if _exact(fp, fn) else (tp / g if g > 0 else 0.0)


@metric
def f1(tp, fp, fn, g):
    return 1.0 if _exact(fp, fn) else (2.0 * tp / ((tp + fp) + g) if tp > 0 else 0.0)


@helper
def _penalty(tp, fp, g):
    return 1.0 if tp + fp <= g else g / (tp + fp)


@metric
def j_pen(tp, fp, fn, g):
    return 1.0 if _exact(fp, fn) else (tp / ((tp + fp + g) - tp)) * _penalty(tp, fp, g)


@metric
def f1_pen(tp, fp, fn, g):
    if _exact(fp, fn):
        return 1.0
    return (2.0 * tp / ((tp + fp) + g) if tp > 0 else 0.0) * _penalty(tp, fp, g)


PARAMS = [(0.6, 6.0), (0.3, 1.0), (0.8, 10.0), (1.0, 2.5), (0.0, 1.0)]
SIP = {prm: UserMetric("sip_f1", sip_f1_with(*prm)) for prm in PARAMS}
BUILT_INS = [em, spc, jaccard, precision, recall, f1, j_pen, f1_pen]


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def assert_bitwise(got, want, label=""):
    assert got.dtype == np.float64 and got.shape == want.shape, label
    np.testing.assert_array_equal(bits(got), bits(want), err_msg=label)


def counts_from(tp, n_pred, n_gold):
    tp, n_pred, n_gold = (np.asarray(a, dtype=np.int32) for a in (tp, n_pred, n_gold))
    return tp, n_pred - tp, n_gold - tp, n_gold


def compiled(m, tp, fp, fn, g, workers=1):
    values = evaluate(m, tp, fp, fn, g, workers=workers)
    assert m.last_run.path == "compiled" and m.last_run.rows == len(values)
    return values


def reference(m, tp, fp, fn, g):
    arrays = [np.asarray(a, dtype=np.int32) for a in (tp, fp, fn, g)]
    return user_ref.evaluate(m, *arrays, np.empty(len(arrays[0])))


def outcome(fn, *args, **kwargs):
    """(values, None) or (None, (exception type, message, notes))."""
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - compared between the two paths
        return None, (type(exc), str(exc), getattr(exc, "__notes__", []))


def assert_same_outcome(m, tp, fp, fn, g, workers=1):
    comp, comp_err = outcome(compiled, m, tp, fp, fn, g, workers)
    ref, ref_err = outcome(reference, m, tp, fp, fn, g)
    assert comp_err == ref_err
    if ref_err is None:
        np.testing.assert_array_equal(comp, ref)  # NaN == NaN here; bitwise where no NaN
        finite = ~np.isnan(ref)
        assert_bitwise(comp[finite], ref[finite])
    return ref, ref_err


# ---- built-ins as user metrics == the C++ kernels -----------------------------------------------------------

def _random_triples(n, seed, high=12):
    rng = np.random.default_rng(seed)
    n_gold = rng.integers(0, high, n)
    n_pred = rng.integers(0, high, n)
    tp = (np.minimum(n_gold, n_pred) * rng.random(n)).astype(np.int64)
    return tp, n_pred, n_gold


def test_built_ins_equal_cpp_kernels_on_many_rows():
    tp, n_pred, n_gold = _random_triples(BIG, seed=1)
    counts = counts_from(tp, n_pred, n_gold)
    for lam, gamma in PARAMS:
        cpp = _core.batch.from_counts(*(np.asarray(a, dtype=np.int32) for a in (tp, n_pred, n_gold)), lam, gamma, -1)
        for m in BUILT_INS + [SIP[(lam, gamma)]]:
            got = compiled(m, *counts, workers=-1)
            assert m.last_run.chunks == ALL_CORES and m.last_run.threads == ALL_CORES
            assert_bitwise(got, cpp[m.name], m.name)
    # Every row kind occurs: exact, subsets, over-prediction, empty sets.
    assert {0, 1} <= set(np.unique(cpp["em"])) and (n_pred == 0).any() and (n_gold == 0).any()


def test_built_ins_through_score_batch_user_metrics():
    rng = np.random.default_rng(2)
    pred = rng.integers(0, 2**12, BIG, dtype=np.uint64)
    gold = rng.integers(0, 2**12, BIG, dtype=np.uint64) & rng.integers(0, 2**12, BIG, dtype=np.uint64)
    as_user = [UserMetric(f"user_{m.name}", m.fn) for m in BUILT_INS + [SIP[(0.6, 6.0)]]]
    out = score_batch(pred, gold, workers=-1, user_metrics=as_user)
    for m in as_user:
        assert m.last_run == Run("compiled", BIG, ALL_CORES, ALL_CORES)
        assert_bitwise(out[m.name], out[m.name.removeprefix("user_")], m.name)
    # A reused out dict keeps its user columns' buffers.
    again = score_batch(pred[::-1].copy(), gold[::-1].copy(), workers=-1, out=out, user_metrics=as_user)
    assert again is out or np.shares_memory(again["user_jaccard"], out["user_jaccard"])
    assert_bitwise(again["user_jaccard"], again["jaccard"])


def test_score_batch_user_metrics_every_input_form():
    pred = [{"A", "C"}, set(), {"B"}, {"A", "B", "C", "D"}, set()]
    gold = [{"A"}, {"A"}, {"B"}, {"A", "B"}, set()]
    sip = UserMetric("user_sip", sip_f1_with(0.6, 6.0))
    masks = lambda sets: np.array([sum(1 << (ord(c) - 65) for c in s) for s in sets], dtype=np.uint64)  # noqa: E731
    for args in ((pred, gold), (masks(pred), masks(gold))):
        out = score_batch(*args, task="mcq" if isinstance(args[0], list) else None, user_metrics=[sip])
        assert_bitwise(out["user_sip"], out["sip_f1"])
    assert out["user_sip"][0] == 0.6 * 2 / (1 + 6 + 1)
    with pytest.raises(ValueError, match="differ from the built-in metrics"):
        score_batch(pred, gold, user_metrics=[UserMetric("jaccard", jaccard.fn)])
    with pytest.raises(ValueError, match="unique"):
        score_batch(pred, gold, user_metrics=[sip, sip])


counts_32 = st.one_of(st.integers(0, 40), st.integers(0, 2**30 - 1))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(counts_32, counts_32, counts_32), max_size=60), st.sampled_from(PARAMS),
       st.sampled_from([1, -1]))
def test_built_ins_equal_cpp_hypothesis(rows, prm, workers):
    # Huge counts too: |P| and |G| up to 2^31 - 2.
    tp = np.array([r[0] for r in rows], dtype=np.int32)
    n_pred = tp + np.array([r[1] for r in rows], dtype=np.int32)
    n_gold = tp + np.array([r[2] for r in rows], dtype=np.int32)
    cpp = _core.batch.from_counts(tp, n_pred, n_gold, *prm, workers)
    counts = counts_from(tp, n_pred, n_gold)
    for m in BUILT_INS + [SIP[prm]]:
        assert_bitwise(compiled(m, *counts, workers=workers), cpp[m.name], m.name)
        assert_bitwise(reference(m, *counts), cpp[m.name], m.name)


# ---- hand-worked values --------------------------------------------------------------------------------------

@metric
def weighted_jaccard(tp, fp, fn, g):
    """Jaccard with false positives counted twice: TP / (TP + 2·FP + FN); 1 when both sets are empty."""
    if tp + fp + fn == 0:
        return 1.0
    return tp / (tp + 2.0 * fp + fn)


@pytest.mark.parametrize("tp, fp, fn, want", [
    (2, 1, 1, Fraction(2, 5)),    # 2 / (2 + 2 + 1)
    (1, 2, 3, Fraction(1, 8)),    # 1 / (1 + 4 + 3)
    (3, 0, 0, Fraction(1)),
    (0, 3, 2, Fraction(0)),
    (0, 0, 0, Fraction(1)),       # P = G = ∅
    (5, 0, 15, Fraction(1, 4)),   # 5 / 20
])
def test_weighted_jaccard_by_hand(tp, fp, fn, want):
    counts = [np.array([x], dtype=np.int32) for x in (tp, fp, fn, tp + fn)]
    for values in (compiled(weighted_jaccard, *counts), reference(weighted_jaccard, *counts)):
        assert values[0] == pytest.approx(float(want), abs=1e-15)


# SIP-F1 at other λ, Γ (spm-bench eq. (3)-(5)): Pw = TP/(TP + Γ·FP), R = TP/|G|, score λ·2·Pw·R/(Pw + R).
@pytest.mark.parametrize("lam, gamma, tp, fp, g, want", [
    ("1/2", 2, 2, 1, 2, Fraction(1, 3)),    # gold {A,B}, pred {A,B,C}: Pw = 2/4, R = 1, F1γ = 2/3
    ("4/5", 10, 3, 1, 3, Fraction(3, 10)),  # spm-bench Table 4: |Sc| 3, TP 3, FP 1, Γ 10, λ 0.8 -> 0.300
    ("1/2", 2, 1, 0, 2, Fraction(1, 3)),    # conservative: Pw = 1, R = 1/2, F1γ = 2/3
    ("3/10", 4, 1, 1, 1, Fraction(1, 10)),  # Table 4: |Sc| 1, TP 1, FP 1, Γ 4, λ 0.3 -> 0.100
    ("7/10", 3, 2, 0, 2, Fraction(1)),      # P = G scores 1 whatever λ
    ("7/10", 3, 0, 2, 2, Fraction(0)),      # no TP
])
def test_sip_f1_variant_by_hand(lam, gamma, tp, fp, g, want):
    if tp and (fp or g - tp):  # the hand value follows from the equations
        pw, r = Fraction(tp, tp + gamma * fp), Fraction(tp, g)
        assert want == Fraction(lam) * 2 * pw * r / (pw + r)
    m = UserMetric("sip_variant", sip_f1_with(float(Fraction(lam)), float(gamma)))
    counts = [np.array([x], dtype=np.int32) for x in (tp, fp, g - tp, g)]
    for values in (compiled(m, *counts), reference(m, *counts)):
        assert values[0] == pytest.approx(float(want), abs=1e-15)


# ---- compiled == reference, errors included ------------------------------------------------------------------

@metric
def fp_ratio(tp, fp, fn, g):
    return tp / fp  # ZeroDivisionError when fp = 0, in Python and (error_model="python") in compiled code


@metric
def floor_ratio(tp, fp, fn, g):
    return (tp + fn) // fp - g % (fp + 1)


@metric
def picky(tp, fp, fn, g):
    if tp > 1000:
        raise ValueError("tp above 1000 is not expected")
    return tp - 0.5 * fp


@metric
def infinite(tp, fp, fn, g):
    if g == 0:
        return math.inf if fp else -math.inf
    if tp == 0 and fp == 0:
        return math.nan
    return float(tp) / g


@metric
def as_bool(tp, fp, fn, g):
    return fp > fn


@metric
def as_int(tp, fp, fn, g):
    return tp * 3 - fp


@metric
def sometimes_none(tp, fp, fn, g):
    if tp > 3:
        return None
    return 1.0


@metric
def text(tp, fp, fn, g):
    return "many"


@metric
def uses_fraction(tp, fp, fn, g):
    return float(Fraction(tp, g))


ERROR_METRICS = [fp_ratio, floor_ratio, picky, infinite, as_bool, as_int, sometimes_none]
small = st.integers(0, 6)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(small, small, small, st.integers(-1, 1)), max_size=40),
       st.sampled_from(ERROR_METRICS), st.sampled_from([1, -1]))
def test_compiled_equals_reference_hypothesis(rows, m, workers):
    # The last field shifts g off tp + fn, or a count below 0, on a few rows: invalid counts.
    tp = np.array([r[0] for r in rows], dtype=np.int32)
    fp = np.array([r[1] for r in rows], dtype=np.int32)
    fn = np.array([r[2] if r[3] >= 0 else -1 for r in rows], dtype=np.int32)
    g = tp + np.array([r[2] for r in rows], dtype=np.int32) + np.array([r[3] == 1 for r in rows], dtype=np.int32)
    assert_same_outcome(m, tp, fp, fn, g, workers)


def _big_counts(seed=3):
    tp, n_pred, n_gold = _random_triples(BIG, seed)
    tp, fp, fn, g = counts_from(tp, n_pred, n_gold)
    fp = fp + 1  # no zero denominators for fp_ratio unless a test puts them in
    return tp, fp, fn, g


@pytest.mark.parametrize("zeros, lowest", [
    ([170_000, 60_000, 199_999], 60_000),  # the first chunk's error wins
    ([150_000, 100_001], 100_001),        # only the second chunk fails
    ([0], 0),
    ([BIG - 1], BIG - 1),
])
def test_lowest_failing_row_wins_across_threads(zeros, lowest):
    tp, fp, fn, g = _big_counts()
    fp[zeros] = 0
    tp[zeros] = 7
    g[zeros] = 7 + fn[zeros]
    _, err = assert_same_outcome(fp_ratio, tp, fp, fn, g, workers=-1)
    assert fp_ratio.last_run.chunks == ALL_CORES
    assert err[0] is ZeroDivisionError and err[1] == "division by zero"
    assert err[2] == [f"raised by user metric 'fp_ratio' at row {lowest} (tp=7, fp=0, fn={fn[lowest]}, g={g[lowest]})"]


def test_invalid_counts_and_raising_rows_interleaved():
    tp, fp, fn, g = _big_counts(seed=4)
    fp[120_000] = 0
    g[130_000] += 1  # invalid after the raising row: the ZeroDivisionError wins
    _, err = assert_same_outcome(fp_ratio, tp, fp, fn, g, workers=-1)
    assert err[0] is ZeroDivisionError and "row 120000" in err[2][0]
    fn[90_000] = -1  # invalid before it: the ValueError wins
    _, err = assert_same_outcome(fp_ratio, tp, fp, fn, g, workers=-1)
    assert err[0] is ValueError and err[1].startswith("row 90000: counts must satisfy tp, fp, fn >= 0 and g = tp + fn")


def test_user_raise_and_non_numeric_rows():
    tp, fp, fn, g = _big_counts(seed=5)
    tp[150_000], fn[150_000] = 2000, 0
    g[150_000] = 2000
    _, err = assert_same_outcome(picky, tp, fp, fn, g, workers=-1)
    assert err[:2] == (ValueError, "tp above 1000 is not expected")
    tp[:] = 1
    g[:] = fn + 1
    tp[140_001] = 4
    g[140_001] = fn[140_001] + 4
    _, err = assert_same_outcome(sometimes_none, tp, fp, fn, g, workers=-1)
    assert err[:2] == (TypeError, "user metric 'sometimes_none' must return a number (int, float or bool); "
                                  "row 140001 returned NoneType")


def test_nan_inf_bool_int_results():
    tp = np.array([0, 0, 0, 3, 0, 2], dtype=np.int32)
    fp = np.array([0, 2, 0, 1, 0, 5], dtype=np.int32)
    fn = np.array([0, 0, 0, 1, 4, 0], dtype=np.int32)
    g = tp + fn
    ref, _ = assert_same_outcome(infinite, tp, fp, fn, g)
    np.testing.assert_array_equal(ref, [-math.inf, math.inf, -math.inf, 0.75, math.nan, 1.0])
    ref, _ = assert_same_outcome(as_bool, tp, fp, fn, g)
    np.testing.assert_array_equal(ref, [0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    ref, _ = assert_same_outcome(as_int, tp, fp, fn, g)
    np.testing.assert_array_equal(ref, [0.0, -2.0, 0.0, 8.0, 0.0, 1.0])


def test_non_numeric_return_and_uncompilable_function():
    counts = [np.array([1, 2], dtype=np.int32)] * 2 + [np.array([0, 0], dtype=np.int32), np.array([1, 2], dtype=np.int32)]
    with pytest.raises(TypeError, match=r"^user metric 'text' must return a number \(int, float or bool\); compiled"):
        evaluate(text, *counts)
    with pytest.raises(TypeError, match=r"^user metric 'text' must return a number \(int, float or bool\); row 0"):
        reference(text, *counts)
    # No fallback: the reference loop can run it, the compiled path says why it cannot.
    np.testing.assert_array_equal(reference(uses_fraction, *counts), [1.0, 1.0])
    with pytest.raises(MetricCompileError, match=r"user metric 'uses_fraction' \(.*:uses_fraction, .*test_user_metrics"
                                                 r"\.py:\d+\) cannot be compiled by Numba in nopython mode"):
        evaluate(uses_fraction, *counts)


def test_numba_semantics_where_python_differs():
    # Documented: math-domain errors give NaN and int64 arithmetic wraps in compiled code.
    sqrt = UserMetric("sqrt", lambda tp, fp, fn, g: math.sqrt(tp - fp))
    product = UserMetric("product", lambda tp, fp, fn, g: tp * fp * fn * g)
    counts = [np.array([x], dtype=np.int32) for x in (1, 2, 0, 1)]
    assert math.isnan(compiled(sqrt, *counts)[0])
    with pytest.raises(ValueError, match="math domain error"):
        reference(sqrt, *counts)
    tp, fp, fn = 2**30, 2**30, 2**30 - 1
    huge = [np.array([x], dtype=np.int32) for x in (tp, fp, fn, tp + fn)]
    assert reference(product, *huge)[0] == float(tp * fp * fn * (tp + fn))
    wrapped = (tp * fp * fn * (tp + fn)) % 2**64
    assert compiled(product, *huge)[0] == float(wrapped - 2**64 if wrapped >= 2**63 else wrapped)


def test_empty_input_and_argument_checks():
    empty = [np.array([], dtype=np.int32)] * 4
    for values in (compiled(jaccard, *empty, workers=-1), evaluate(jaccard, [], [], [], [])):
        assert values.dtype == np.float64 and values.shape == (0,)
    assert jaccard.last_run.chunks == 1
    one = [np.array([1]), np.array([0]), np.array([0]), np.array([1])]
    with pytest.raises(ValueError, match="different lengths"):
        evaluate(jaccard, [1, 2], [0], [0], [1])
    with pytest.raises(TypeError, match="tp must be an array of integers"):
        evaluate(jaccard, [1.0], [0], [0], [1])
    with pytest.raises(ValueError, match="g holds counts outside the int32 range"):
        evaluate(jaccard, [1], [0], [0], [2**31])
    with pytest.raises(ValueError, match="workers must be"):
        evaluate(jaccard, *one, workers=0)
    with pytest.raises(ValueError, match="out must be a writable contiguous 1-D float64 array of length 1"):
        evaluate(jaccard, *one, out=np.empty(2))
    with pytest.raises(TypeError, match="must be a UserMetric"):
        evaluate(jaccard.fn, *one)
    buffer = np.full(1, 9.0)
    assert evaluate(jaccard, *one, out=buffer) is buffer and buffer[0] == 1.0
    with pytest.raises(TypeError, match="four positional arguments"):
        UserMetric("three", lambda tp, fp, fn: 0.0)
    with pytest.raises(TypeError, match="a Python function"):
        UserMetric("builtin", max)
    with pytest.raises(ValueError, match="Python identifier"):
        UserMetric("not a name", jaccard.fn)


def test_reference_switch_forces_the_loop(forced_impl):
    fresh = UserMetric("fresh_jaccard", jaccard.fn)  # never compiled
    counts = counts_from(*_random_triples(BIG, seed=6))
    with forced_impl("reference"):
        ref = evaluate(fresh, *counts, workers=-1)
    assert fresh.last_run == Run("reference", BIG, 1, 1)
    assert fresh.compile_seconds is None  # Numba never ran
    with forced_impl("compiled"):
        comp = evaluate(fresh, *counts, workers=-1)
    assert fresh.last_run.path == "compiled" and fresh.compile_seconds is not None
    assert_bitwise(comp, ref)


def test_workers_one_is_one_chunk():
    counts = counts_from(*_random_triples(BIG, seed=7))
    serial = compiled(f1, *counts, workers=1)
    assert f1.last_run.chunks == 1
    assert_bitwise(serial, compiled(f1, *counts, workers=-1))


# ---- the on-disk cache ---------------------------------------------------------------------------------------

METRICS_FILE = '''
from benchmint.metrics.user import UserMetric, metric
from user_helper_file import bonus

SCALE = {scale}


@metric
def scaled(tp, fp, fn, g):
    return SCALE * tp / (tp + fp + fn) if tp else 0.0


@metric
def with_bonus(tp, fp, fn, g):
    return bonus(tp) - fp


def sip_with(lam, gamma):
    def sip(tp, fp, fn, g):
        return lam * (2.0 * tp) / ((tp + gamma * fp) + g) if tp else 0.0
    return sip


low = UserMetric("low", sip_with(0.3, 2.0))
high = UserMetric("high", sip_with(0.9, 8.0))
'''

HELPER_FILE = '''
from benchmint.metrics.user import helper


@helper
def bonus(tp):
    return {factor} * tp
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import user_metrics_file as f
from benchmint.metrics.user import evaluate
counts = [np.array([2, 1, 0], np.int32), np.array([1, 0, 3], np.int32), np.array([0, 1, 2], np.int32),
          np.array([2, 2, 2], np.int32)]
out = {}
for m in (f.scaled, f.with_bonus, f.low, f.high):
    values = evaluate(m, *counts).tolist()
    out[m.name] = [m.cached, m.cache_hit, values]
print(json.dumps(out))
'''


def _run_driver(tmp_path, script=DRIVER, *args):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    env.pop("BENCHMINT_IMPL", None)
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path), *args], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_cache_is_used_by_the_next_process_and_follows_the_code(tmp_path):
    source = tmp_path / "user_metrics_file.py"
    source.write_text(METRICS_FILE.format(scale=1.0))
    (tmp_path / "user_helper_file.py").write_text(HELPER_FILE.format(factor=10))
    want = {
        "scaled": [2 / 3, 1 / 2, 0.0],
        "with_bonus": [19.0, 10.0, -3.0],
        "low": [0.3 * 4 / (2 + 2 + 2), 0.3 * 2 / 3, 0.0],
        "high": [0.9 * 4 / (2 + 8 + 2), 0.9 * 2 / 3, 0.0],
    }
    first = _run_driver(tmp_path)
    second = _run_driver(tmp_path)
    for name, values in want.items():
        assert first[name][:2] == [True, False] and second[name][:2] == [True, True], name
        # The two closures of one factory share code, file and line but not their cache entry.
        assert first[name][2] == second[name][2] == pytest.approx(values, abs=1e-15), name
    # A helper in another file changed: the metric that calls it is compiled again, the others are loaded.
    (tmp_path / "user_helper_file.py").write_text(HELPER_FILE.format(factor=100))
    third = _run_driver(tmp_path)
    assert third["with_bonus"] == [True, False, [199.0, 100.0, -3.0]]
    assert all(third[name][:2] == [True, True] for name in ("scaled", "low", "high"))
    source.write_text(METRICS_FILE.format(scale=2.0))  # the metric's own file changed: compiled again
    fourth = _run_driver(tmp_path)
    assert fourth["scaled"][:2] == [True, False]
    assert fourth["scaled"][2] == pytest.approx([4 / 3, 1.0, 0.0], abs=1e-15)


def test_function_without_a_source_file_compiles_without_cache(tmp_path):
    script = textwrap.dedent('''
        import json
        import numpy as np
        from benchmint.metrics.user import UserMetric, evaluate
        m = UserMetric("typed_here", lambda tp, fp, fn, g: tp / (g + 1))
        values = evaluate(m, np.array([1, 3], np.int32), np.array([0, 0], np.int32), np.array([1, 0], np.int32),
                          np.array([2, 3], np.int32))
        print(json.dumps([m.cached, m.cache_reason, m.last_run.path, values.tolist()]))
    ''')
    cached, reason, path, values = _run_driver(tmp_path, script)
    assert cached is False and "no locator available" in reason and path == "compiled"
    assert values == [1 / 3, 3 / 4]


def test_concurrent_calls_from_threads(tmp_path):
    # Under Numba's workqueue threading layer (no TBB, no OpenMP) concurrent launches abort the process.
    script = textwrap.dedent('''
        import json, sys
        from concurrent.futures import ThreadPoolExecutor
        import numba
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from metric_file import m
        from benchmint.metrics.user import evaluate
        rng = np.random.default_rng(0)
        g = rng.integers(1, 7, 200_000).astype(np.int32)
        tp = (g * rng.random(len(g))).astype(np.int32)
        fp = rng.integers(0, 4, len(g)).astype(np.int32)
        want = evaluate(m, tp, fp, g - tp, g)
        with ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(lambda _: evaluate(m, tp, fp, g - tp, g, workers=-1), range(40)))
        print(json.dumps([numba.threading_layer(), all(np.array_equal(r, want) for r in runs)]))
    ''')
    (tmp_path / "metric_file.py").write_text("from benchmint.metrics.user import UserMetric\n"
                                              "m = UserMetric('ratio', lambda tp, fp, fn, g: tp / (tp + fp + 1))\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "NUMBA_THREADING_LAYER": "workqueue"}
    env.pop("BENCHMINT_IMPL", None)
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.splitlines()[-1]) == ["workqueue", True]


# ---- benchmint score --metric ----------------------------------------------------------------------------------

def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _dataset(tmp_path, task="mcq"):
    from benchmint.metrics.synthetic import hkl_dataset, mcq_dataset

    records = list((mcq_dataset if task == "mcq" else hkl_dataset)(300, ["wise-model", "bold-model"], seed=11))
    gold = _write(tmp_path / "gold.jsonl", [r for k, r in records if k == "gold"])
    pred = _write(tmp_path / "pred.jsonl", [r for k, r in records if k != "gold"] + [{"id": "nope", "answer": ["A"]}])
    return gold, pred


def _strip(row_text, names):
    row = json.loads(row_text)
    return {k: v for k, v in row.items() if k not in names}


@pytest.mark.parametrize("task, by", [("mcq", ("domain", "level")), ("hkl", ("db", "union_size"))])
def test_score_files_user_columns(tmp_path, impl, task, by):
    gold, pred = _dataset(tmp_path, task)
    # Names that land before the first key, between two keys and after the last one.
    user = (UserMetric("Jacc_user", jaccard.fn), UserMetric("a_wj", weighted_jaccard.fn),
            UserMetric("sip_user", sip_f1_with(0.6, 6.0)), UserMetric("zz_sip", sip_f1_with(0.6, 6.0)))
    names = {m.name for m in user}
    score_files(pred, gold, tmp_path / "plain", ScoreConfig(task=task, by=by))
    extra = score_files(pred, gold, tmp_path / "extra", ScoreConfig(task=task, by=by, user_metrics=user))
    assert all(m.last_run.path == impl for m in user)
    plain_rows = (tmp_path / "plain" / "scores.jsonl").read_text("utf-8").splitlines()
    extra_rows = (tmp_path / "extra" / "scores.jsonl").read_text("utf-8").splitlines()
    assert len(plain_rows) == len(extra_rows) == 600
    for a, b in zip(plain_rows, extra_rows):
        row = json.loads(b)
        assert list(row) == sorted(row)
        # The other bytes are untouched: removing the inserted fields gives the plain row.
        cut = b
        for name in names:
            cut = cut.replace(f'"{name}":{json.dumps(row[name])},', "").replace(f',"{name}":{json.dumps(row[name])}', "")
        assert cut == a
        assert row["Jacc_user"] == row["jaccard"] and row["zz_sip"] == row["sip_user"] == row["sip_f1"]
        want = weighted_jaccard(row["tp"], row["fp"], row["fn"], row["tp"] + row["fn"])
        assert row["a_wj"] == want
    assert (tmp_path / "plain" / "errors.jsonl").read_bytes() == (tmp_path / "extra" / "errors.jsonl").read_bytes()
    summary = json.loads((tmp_path / "extra" / "summary.json").read_text("utf-8"))
    assert summary["params"].pop("user_metrics") == {m.name: m.source for m in user}
    for model in summary["models"].values():
        blocks = [model] + [b for values in model["by"].values() for b in values.values()]
        for block in blocks:
            # Same values, same resamples: identical means and intervals.
            assert block["metrics"].pop("Jacc_user") == block["metrics"]["jaccard"]
            assert block["metrics"].pop("zz_sip") == block["metrics"].pop("sip_user") == block["metrics"]["sip_f1"]
            assert 0 <= block["metrics"].pop("a_wj")["mean"] <= block["metrics"]["jaccard"]["mean"]
    assert summary == json.loads((tmp_path / "plain" / "summary.json").read_text("utf-8"))
    assert extra.summary["models"]["wise-model"]["metrics"]["a_wj"]["mean"] > 0


def test_score_files_user_columns_same_bytes_both_paths(forced_impl, tmp_path):
    gold, pred = _dataset(tmp_path)
    cfg = ScoreConfig(task="mcq", by=("domain",), user_metrics=(weighted_jaccard, UserMetric("sip_loose", SIP[(0.3, 1.0)].fn)))
    outputs = {}
    for impl in ("reference", "compiled"):
        with forced_impl(impl):
            score_files(pred, gold, tmp_path / impl, cfg)
        outputs[impl] = [(tmp_path / impl / f).read_bytes() for f in ("scores.jsonl", "summary.json", "errors.jsonl")]
    assert outputs["reference"] == outputs["compiled"]


def test_score_files_rejects_clashes_and_non_finite_values(tmp_path):
    gold, pred = _dataset(tmp_path)
    with pytest.raises(ValueError, match="differ from the columns of scores.jsonl"):
        ScoreConfig(task="mcq", user_metrics=(UserMetric("model", jaccard.fn),))
    with pytest.raises(ValueError, match="user metric 'infinite' gives"):
        score_files(pred, gold, tmp_path / "out", ScoreConfig(task="mcq", user_metrics=(infinite,)))
    # (an empty gold answer is a gold error, so the infinity comes from tp = 0)
    inverse_tp = UserMetric("inverse_tp", lambda tp, fp, fn, g: 1.0 / tp if tp else math.inf)
    gold = _write(tmp_path / "g.jsonl", [{"id": "a", "answer": ["A"]}, {"id": "e", "answer": ["C"]}])
    pred = _write(tmp_path / "p.jsonl", [{"id": "a", "answer": ["A"]}, {"id": "e", "answer": ["B"]}])
    with pytest.raises(ValueError, match="user metric 'inverse_tp' gives inf at tp=0, fp=1, fn=1, g=1"):
        score_files(pred, gold, tmp_path / "out", ScoreConfig(task="mcq", user_metrics=(inverse_tp,)))
    assert not (tmp_path / "out" / "scores.jsonl").exists()


def test_cli_metric_option(tmp_path, capsys):
    gold, pred = _dataset(tmp_path)
    file = tmp_path / "my_metrics.py"
    file.write_text(textwrap.dedent('''
        from fractions import Fraction

        def weighted(tp, fp, fn, g):
            return tp / (tp + 2.0 * fp + fn) if tp + fp + fn else 1.0

        def broken(tp, fp, fn, g):
            return float(Fraction(tp, g))
    '''))
    args = ["score", str(pred), "--gold", str(gold), "--task", "mcq", "--out", str(tmp_path / "cli"), "--quiet"]
    assert main(args + ["--metric", f"wj={file}:weighted"]) == 1  # the unknown id is an error row
    rows = [json.loads(x) for x in (tmp_path / "cli" / "scores.jsonl").read_text("utf-8").splitlines()]
    assert all(r["wj"] == weighted_jaccard(r["tp"], r["fp"], r["fn"], r["tp"] + r["fn"]) for r in rows)
    assert main(args + ["--metric", "wj=benchmint.metrics.batch_ref:metrics_from_counts"]) == 2
    assert "four positional arguments" in capsys.readouterr().err
    assert main(args + ["--metric", f"bad={file}:broken"]) == 2
    assert "user metric 'bad'" in capsys.readouterr().err
    for bad in ("wj", f"wj={file}", f"wj={file}:missing", "wj=no_such_module_here:f", f"jaccard={file}:weighted"):
        assert main(args + ["--metric", bad]) == 2, bad
        assert "benchmint score: error:" in capsys.readouterr().err


def test_load_metric_forms(tmp_path):
    m = load_metric(f"wj2={__name__}:weighted_jaccard")
    assert m.name == "wj2" and m.fn is weighted_jaccard.fn and m.source == f"{__name__}:weighted_jaccard"
    file = tmp_path / "more_metrics.py"
    file.write_text("def half(tp, fp, fn, g):\n    return tp / 2\n")
    m = load_metric(f"half={file}:half")
    assert m.name == "half" and m(3, 0, 0, 3) == 1.5 and m.source == f"{file}:half"
