"""XRD profile stage: hand-checked values, compiled kernel == dense reference, real structures.

The compiled results come from the public ``pattern``/``patterns`` under
BENCHMINT_IMPL=compiled (the whole module runs so), checked to have run the
kernel; the reference ones from ``profile_ref`` called directly.
"""

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmint import _dispatch
from benchmint.xrd import ProfileParams, kalpha2_sticks, pattern, patterns, profile_ref

DEFAULT = ProfileParams()
NO_KA2 = ProfileParams(ka2_ratio=0.0)


@pytest.fixture(autouse=True, scope="module")
def _compiled(forced_impl):
    with forced_impl("compiled"):
        yield


def compiled(tt, inten, params):
    """The public pattern() on the compiled path, as (curve, argmax index, max, window stick indices).

    Stick i is labelled (i + 1, 0, 0), so the ground truth names the sticks in the window."""
    tt, inten = np.asarray(tt, dtype=float), np.asarray(inten, dtype=float)
    _dispatch.reset_counts()
    res = pattern(tt, inten, [[(i + 1, 0, 0)] for i in range(len(tt))], params)
    assert _dispatch.counts("profile") == {"compiled": 1, "reference": 0, "fallback": 0}
    star = int(np.flatnonzero(res.grid == res.two_theta_star)[0])
    return res.curve, star, res.peak_intensity, np.array([h[0] - 1 for h in res.ground_truth], dtype=np.int64)


def dense(tt, inten, params):
    return profile_ref.broaden(np.asarray(tt, dtype=float), np.asarray(inten, dtype=float), params)


def assert_equivalent(tt, inten, params, pointwise=1e-11):
    """Curve within 1e-9 of the max everywhere (the requirement) and within `pointwise` of the
    dense value at each point plus 1e-14 of the max (the bound profile.py states); same 2θ*, max
    and window sticks."""
    c_curve, c_star, c_peak, c_truth = compiled(tt, inten, params)
    r_curve, r_star, r_peak, r_truth = dense(tt, inten, params)
    err = np.abs(c_curve - r_curve)
    assert err.max() <= 1e-9 * r_peak
    assert np.all(err <= pointwise * r_curve + 1e-14 * r_peak)
    top2 = np.sort(r_curve)[-2:]
    if top2[1] - top2[0] > 1e-12 * r_peak:
        # Only an exact tie in the dense curve (two grid values equal up to rounding) may
        # legitimately resolve differently; random inputs never produce one.
        assert c_star == r_star
        assert c_truth.tolist() == r_truth.tolist()
    assert c_peak == pytest.approx(r_peak, rel=1e-9)
    return err.max() / r_peak


def assert_same_error(tt, inten, params):
    with pytest.raises(ValueError) as ref_exc:
        dense(tt, inten, params)
    with pytest.raises(ValueError) as comp_exc:
        compiled(tt, inten, params)
    assert str(comp_exc.value) == str(ref_exc.value)
    return str(ref_exc.value)


# --- hand-checked values ---------------------------------------------------------------------

def test_single_stick_peak_height():
    x = DEFAULT.grid()
    at = x[2800]  # 30.00
    res = pattern([at], [7.0], [[(1, 1, 1)]], NO_KA2)
    gamma, eta = 0.15, 0.4
    expected = 7.0 * (eta * 2 / (math.pi * gamma) + (1 - eta) * (2 / gamma) * math.sqrt(math.log(2) / math.pi))
    assert expected == pytest.approx(38.1878, abs=1e-4)  # 7 × (0.4 × 4.24413 + 0.6 × 6.26292)
    assert res.peak_intensity == pytest.approx(expected, rel=1e-12)
    assert res.two_theta_star == at == pytest.approx(30.0)
    assert res.ground_truth == [(1, 1, 1)]
    assert res.n_sticks == 1
    assert res.grid.shape == (8801,) and res.grid[0] == 2.0 and res.grid[-1] == pytest.approx(90.0, abs=1e-12)


def test_kalpha2_position_by_hand():
    # θ = 14.22°, sin θ = 0.2456626; × 1.54439/1.54056 = 0.2462734; asin = 14.25610° -> 2θ2 = 28.51220°.
    # First order: Δ2θ = 2·tanθ·Δλ/λ = 2 × 0.253427 × 0.0024861 rad = 0.072176°.
    pos, inten, src = kalpha2_sticks([28.44], [10.0])
    assert pos[0] == pytest.approx(28.51220, abs=2e-5)
    assert pos[0] - 28.44 == pytest.approx(0.072176, rel=2e-3)
    assert inten.tolist() == [5.0] and src.tolist() == [0]


def test_kalpha2_missing_above_the_limit():
    # (λ2/λ1)·sin 87.5° = 1.0015 > 1: the 175° stick has no Kα2 copy, the 170° one has.
    pos, _, src = kalpha2_sticks([30.0, 175.0, 170.0], [1.0, 1.0, 1.0])
    assert src.tolist() == [0, 2]
    assert pos[1] > 170.0
    assert_equivalent([30.0, 175.0, 170.0], [1.0, 50.0, 50.0], DEFAULT)


def test_area_of_an_isolated_profile():
    res = pattern([46.0], [3.0], [[(1, 0, 0)]], NO_KA2)
    # The Gaussian lies wholly on the grid; the Lorentzian loses its tails beyond ±44°.
    lorentz_on_grid = (2 / math.pi) * math.atan(2 * 44.0 / 0.15)
    expected = 3.0 * (0.4 * lorentz_on_grid + 0.6)
    assert res.curve.sum() * 0.01 == pytest.approx(expected, rel=1e-7)
    assert expected == pytest.approx(3.0 * (1 - 0.4 * 0.15 / (math.pi * 44)), rel=1e-6)


def test_ground_truth_union_window_and_filtering():
    # Strongest peak near 30.00 (the 30.25 neighbour and the Kα2 copies move the maximum by a
    # step or two), 30.25 inside the 0.30° window, 30.35 outside; duplicate and (000)/(0000) labels.
    tt = [30.0, 30.25, 30.35, 40.0]
    inten = [100.0, 20.0, 5.0, 50.0]
    hkls = [[(2, 0, 0), (0, 0, 0)], [(1, 1, 1), (2, 0, 0)], [(3, 1, 1)], [(0, 0, 0, 0), (1, 0, -1, 1)]]
    res = pattern(tt, inten, hkls)
    assert abs(res.two_theta_star - 30.0) <= 0.021
    assert res.ground_truth == [(1, 1, 1), (2, 0, 0)]
    wide = pattern(tt, inten, hkls, ProfileParams(gt_window=0.4))
    assert wide.ground_truth == [(1, 1, 1), (2, 0, 0), (3, 1, 1)]
    assert pattern([40.0], [1.0], [hkls[3]]).ground_truth == [(1, 0, -1, 1)]


def test_pymatgen_dict_labels():
    hkls = [[{"hkl": (1, 1, 1), "multiplicity": 8}], [{"hkl": (2, 0, 0), "multiplicity": 6}]]
    assert pattern([28.44, 32.9], [100.0, 50.0], hkls).ground_truth == [(1, 1, 1)]


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tt, inten, message", [
    ([30.0, 40.0], [1.0], "two_theta and intensity differ in length (2 vs 1)"),
    ([], [], "no sticks: two_theta is empty"),
    ([30.0, float("nan")], [1.0, 1.0], "two_theta[1] is not finite"),
    ([30.0, float("inf")], [1.0, 1.0], "two_theta[1] is not finite"),
    ([30.0, 0.0], [1.0, 1.0], "two_theta[1] = 0.0 is outside (0, 180) degrees"),
    ([30.0, 180.5], [1.0, 1.0], "two_theta[1] = 180.5 is outside (0, 180) degrees"),
    ([30.0, 40.0], [1.0, float("nan")], "intensity[1] is not finite"),
    ([30.0, 40.0], [1.0, -0.5], "intensity[1] = -0.5 is negative"),
    ([1.0, 95.0], [1.0, 1.0], "no stick lies on the grid [2.0, 90.0] degrees"),
    ([30.0, 40.0], [0.0, 0.0], "the curve is zero on the whole grid"),
    ([30.0], [1e308], "the curve overflowed float64; scale the intensities down"),
])
def test_errors_are_equal(tt, inten, message, forced_impl):
    assert assert_same_error(tt, inten, DEFAULT) == message
    for impl in ("reference", "compiled"):
        with forced_impl(impl):
            with pytest.raises(ValueError, match=re.escape("pattern 1: " + message)):
                patterns([([30.0], [1.0], [[]]), (tt, inten, [[]] * len(tt))], workers=2)
    with pytest.raises(ValueError, match=re.escape("pattern 1: " + message)):
        profile_ref.broaden_batch([(np.array([30.0]), np.array([1.0])),
                                   (np.asarray(tt, dtype=float), np.asarray(inten, dtype=float))], DEFAULT)


def test_label_and_param_errors():
    with pytest.raises(ValueError, match="hkls has 1 entries but two_theta has 2"):
        pattern([30.0, 40.0], [1.0, 1.0], [[(1, 1, 1)]])
    with pytest.raises(ValueError, match="labels are 3 or 4 integers"):
        pattern([30.0], [1.0], [[(1, 1)]])
    with pytest.raises(ValueError, match="workers"):
        patterns([([30.0], [1.0], [[]])], workers=0)
    bad = [dict(fwhm=0.0), dict(fwhm=float("nan")), dict(eta=1.5), dict(ka2_ratio=-1.0),
           dict(wavelength_ka1=0.0), dict(grid_step=0.0), dict(grid_stop=1.0),
           dict(grid_stop=90.005), dict(caglioti=(1.0, 2.0)), dict(caglioti=(0.0, float("inf"), 1.0)),
           dict(window_deg=0.0), dict(gt_window=-0.3)]
    for kwargs in bad:
        with pytest.raises(ValueError):
            ProfileParams(**kwargs)
    assert ProfileParams(grid_start=10.0, grid_stop=20.0, grid_step=0.05).n_grid == 201


def pseudo_voigt_by_hand(tt, inten, p):
    """The curve written out once more, independently of both forms: Kα1 sticks and their Kα2 copies,
    area-normalised Lorentzian and Gaussian of one FWHM, every stick at every grid point."""
    x = p.grid()
    curve = np.zeros_like(x)
    for t, v in zip(tt, inten):
        sin2 = (p.wavelength_ka2 / p.wavelength_ka1) * math.sin(math.radians(t / 2))
        for pos, amp in ((t, v), (2 * math.degrees(math.asin(sin2)), v * p.ka2_ratio)):
            hw = p.fwhm / 2
            lorentz = hw / math.pi / ((x - pos) ** 2 + hw * hw)
            gauss = math.sqrt(4 * math.log(2) / math.pi) / p.fwhm * np.exp(-4 * math.log(2) * (x - pos) ** 2 / p.fwhm**2)
            curve += amp * (p.eta * lorentz + (1 - p.eta) * gauss)
    return curve


def test_implementation_switch(impl, dispatch_counts):
    res = pattern([30.0, 31.0], [1.0, 2.0], [[(1, 1, 1)], [(2, 0, 0)]])
    assert dispatch_counts("profile") == {"compiled": int(impl == "compiled"), "reference": int(impl == "reference"),
                                          "fallback": 0}
    assert res.ground_truth == [(2, 0, 0)]
    want = pseudo_voigt_by_hand([30.0, 31.0], [1.0, 2.0], DEFAULT)
    assert np.abs(res.curve - want).max() <= 1e-9 * want.max()
    assert res.two_theta_star == DEFAULT.grid()[int(np.argmax(want))]


# --- compiled == dense reference -------------------------------------------------------------

GRID = DEFAULT.grid()

positions = st.one_of(
    st.floats(0.05, 120.0),                                   # on and off the grid
    st.integers(0, 8800).map(lambda k: float(GRID[k])),       # exactly on grid points
    st.sampled_from([2.0, 90.0, 1.99, 90.01, 0.5, 179.9, 30.005]),  # edges, far outside, midpoints
)
# Both forms divide the intensities by a power of two near their maximum, so the extremes of the
# float64 range keep full relative accuracy.
intensities = st.one_of(st.floats(0.0, 1000.0), st.sampled_from([0.0, 1.0, 100.0, 1e-310, 1e300]))


@st.composite
def stick_sets(draw):
    n = draw(st.integers(1, 40))
    tt = draw(st.lists(positions, min_size=n, max_size=n))
    inten = draw(st.lists(intensities, min_size=n, max_size=n))
    if draw(st.booleans()):  # repeated sticks and pairs mirrored about 45° make ties
        mirrored = [(90.0 - t, v) for t, v in zip(tt, inten) if 0.0 < 90.0 - t < 180.0]
        tt, inten = tt + tt[: n // 2] + [t for t, _ in mirrored], inten + inten[: n // 2] + [v for _, v in mirrored]
    tt.append(draw(st.floats(2.0, 90.0)))  # at least one stick on the grid
    inten.append(draw(st.floats(0.1, 1000.0)))
    return tt, inten


@st.composite
def params(draw):
    cag = draw(st.sampled_from([None, (0.004, -0.002, 0.01), (0.0, 0.0, 0.0004), (0.05, 0.0, 0.001)]))
    return ProfileParams(fwhm=draw(st.sampled_from([0.15, 0.02, 0.5, 1.3])),
                         eta=draw(st.sampled_from([0.4, 0.0, 1.0, 0.93])),
                         ka2_ratio=draw(st.sampled_from([0.5, 0.0, 1.0])),
                         window_deg=draw(st.sampled_from([2.0, 0.3, 0.05, 7.0])),
                         gt_window=draw(st.sampled_from([0.3, 0.05])),
                         caglioti=cag)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stick_sets(), params())
def test_compiled_equals_dense(sticks, p):
    assert_equivalent(*sticks, p)


@st.composite
def maybe_invalid(draw):
    n = draw(st.integers(0, 6))
    tt = draw(st.lists(st.one_of(positions, st.sampled_from([float("nan"), float("inf"), -3.0, 200.0])),
                       min_size=n, max_size=n))
    inten = draw(st.lists(st.one_of(intensities, st.sampled_from([float("nan"), -1.0, 1e308])),
                          min_size=n, max_size=n))
    return tt, inten[: draw(st.integers(n - 1, n)) if n else 0]


@settings(max_examples=60, deadline=None)
@given(maybe_invalid(), params())
def test_errors_equal_on_random_input(sticks, p):
    # Often invalid (bad values, lengths, nothing on the grid, Caglioti radicand <= 0): both
    # forms fail with the same message or succeed with the same result.
    try:
        dense(*sticks, p)
    except ValueError:
        assert_same_error(*sticks, p)
    else:
        assert_equivalent(*sticks, p)


def test_thousands_of_sticks_edges_and_outside():
    rng = np.random.default_rng(7)
    tt = np.concatenate([rng.uniform(2, 90, 2000),
                         rng.uniform(0.1, 2.0, 300), rng.uniform(90.0, 170.0, 300),   # off the grid
                         np.full(50, 2.0), np.full(50, 90.0), GRID[rng.integers(0, 8801, 300)]])
    inten = rng.exponential(10.0, tt.size)
    inten[:2300] *= 0.01  # strong sticks off the grid: their tails carry a large share of the curve
    worst = assert_equivalent(tt, inten, DEFAULT)
    assert worst < 1e-12
    # Narrow, purely Lorentzian peaks: the largest node count of the far-field interpolant.
    assert assert_equivalent(tt[:1500], inten[:1500], ProfileParams(fwhm=0.01, eta=1.0)) < 1e-12


def window_only_curve(tt, inten, p, window=2.0):
    """What a ±window cut of each profile gives (the shortcut this stage must not take)."""
    x = p.grid()
    pos, val, fw = profile_ref.all_sticks(np.asarray(tt), np.asarray(inten), p)
    curve = np.zeros_like(x)
    for t, v, w in zip(pos, val, fw):
        near = np.abs(x - t) <= window
        curve[near] += profile_ref.dense_curve([t], [v], [w], p)[near]
    return curve


def test_near_tie_needs_the_lorentzian_tails():
    # A at 30°, B slightly weaker at 60°; ten sticks 2.5-7° above B lift it through their
    # Lorentzian tails (~5e-4 of the peak) which a ±2° window drops.
    tt = [30.0, 60.0] + [62.5 + 0.5 * i for i in range(10)]
    inten = [1.0, 1.0 - 2e-4] + [0.5] * 10
    hkls = [[(1, 1, 1)], [(2, 0, 0)]] + [[(3, 1, 1)]] * 10
    x = NO_KA2.grid()
    windowed = window_only_curve(tt, inten, NO_KA2)
    r_curve, r_star, _, _ = dense(tt, inten, NO_KA2)
    assert x[int(np.argmax(windowed))] == pytest.approx(30.0)
    assert x[r_star] == pytest.approx(60.0)
    assert_equivalent(tt, inten, NO_KA2)
    res = pattern(tt, inten, hkls, NO_KA2)
    assert res.two_theta_star == pytest.approx(60.0) and res.ground_truth == [(2, 0, 0)]


def test_window_changes_speed_not_results():
    rng = np.random.default_rng(3)
    tt, inten = rng.uniform(1, 95, 400), rng.exponential(1.0, 400)
    curves = [compiled(tt, inten, ProfileParams(window_deg=w))[0] for w in (0.05, 0.5, 2.0, 10.0, 100.0)]
    for c in curves[1:]:
        assert np.abs(c - curves[0]).max() <= 1e-12 * curves[0].max()


# --- Caglioti widths -------------------------------------------------------------------------

def half_max_width(curve, x, centre):
    near = np.abs(x - centre) < 3.0
    above = x[near][curve[near] >= curve[near].max() / 2]
    return above[-1] - above[0]


def test_caglioti_constant_equals_fixed_width():
    tt, inten = [20.0, 45.0, 80.0], [1.0, 3.0, 2.0]
    fixed = compiled(tt, inten, DEFAULT)[0]
    cag = compiled(tt, inten, ProfileParams(caglioti=(0.0, 0.0, 0.15 ** 2)))[0]
    assert np.abs(fixed - cag).max() <= 1e-12 * fixed.max()


def test_caglioti_width_grows_with_angle():
    p = ProfileParams(ka2_ratio=0.0, caglioti=(0.02, -0.01, 0.005))
    x = p.grid()
    curve = pattern([20.0, 80.0], [1.0, 1.0], [[(1, 0, 0)], [(2, 0, 0)]], p).curve
    for centre in (20.0, 80.0):
        t = math.tan(math.radians(centre / 2))
        expected = math.sqrt(0.02 * t * t - 0.01 * t + 0.005)
        assert half_max_width(curve, x, centre) == pytest.approx(expected, abs=0.021)
    assert_equivalent([20.0, 80.0, 45.0, 150.0], [1.0, 1.0, 0.5, 9.0], p)


def test_caglioti_radicand_errors():
    # -tanθ + 0.1 <= 0 above 2θ = 11.4°.
    msg = assert_same_error([10.0, 30.0], [1.0, 1.0], ProfileParams(caglioti=(0.0, -1.0, 0.1)))
    assert msg.startswith("Caglioti width undefined at two_theta[1] = 30.0: ")
    # Positive at the Kα1 stick (tan 14.22° = 0.25343), negative at its Kα2 copy (tan 14.256° = 0.25408).
    msg = assert_same_error([28.44], [1.0], ProfileParams(caglioti=(0.0, -1.0, 0.2537)))
    assert msg.startswith("Caglioti width undefined at the Ka2 copy of two_theta[0] (2theta = 28.51")
    assert compiled([28.44], [1.0], ProfileParams(caglioti=(0.0, -1.0, 0.2537), ka2_ratio=0.0))[2] > 0


# --- batches ---------------------------------------------------------------------------------

def random_patterns(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 120))
        tt = rng.uniform(2, 90, k)
        hkls = [[tuple(int(v) for v in rng.integers(-3, 4, 3))] for _ in range(k)]
        out.append((tt, rng.exponential(1.0, k), hkls))
    return out


@pytest.mark.parametrize("workers", [1, 2, -1])
def test_batch_equals_one_by_one(dispatch_counts, workers):
    # The batch kernel (patterns on threads) against the one-pattern kernel and the dense reference.
    items = random_patterns(40, seed=workers + 5)
    batch = patterns(items, workers=workers)
    assert dispatch_counts("profile") == {"compiled": 1, "reference": 0, "fallback": 0}
    ref_batch = [profile_ref.broaden(tt, inten, DEFAULT) for tt, inten, _ in items[:10]]
    for item, got in zip(items, batch):
        one = pattern(*item)
        assert np.array_equal(got.curve, one.curve)
        assert (got.two_theta_star, got.peak_intensity, got.ground_truth, got.n_sticks) == \
               (one.two_theta_star, one.peak_intensity, one.ground_truth, one.n_sticks)
    for got, (item, (curve, star, peak, truth)) in zip(batch, zip(items, ref_batch)):
        assert np.abs(got.curve - curve).max() <= 1e-9 * peak
        hkls = item[2]
        want_truth = sorted({h for i in truth.tolist() for h in hkls[i] if any(h)})
        assert (got.two_theta_star, got.ground_truth) == (DEFAULT.grid()[star], want_truth)
    assert patterns([], workers=workers) == []


# --- real structures -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def structures():
    from pymatgen.core import Lattice, Structure
    return {
        "NaCl": Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]]),
        "Si": Structure.from_spacegroup("Fd-3m", Lattice.cubic(5.43), ["Si"], [[0, 0, 0]]),
        "Mg": Structure.from_spacegroup("P6_3/mmc", Lattice.hexagonal(3.21, 5.21), ["Mg"], [[1 / 3, 2 / 3, 0.25]]),
    }


def test_real_structures(structures):
    from pymatgen.analysis.diffraction.xrd import XRDCalculator

    calc = XRDCalculator(wavelength="CuKa1", symprec=0)
    sticks = {name: calc.get_pattern(s, two_theta_range=(2, 90)) for name, s in structures.items()}
    # Rock salt: (200) at 2·asin(λ/(2·5.64/2)) = 31.70°, the Kα2 shoulder pulls the maximum to 31.72.
    # Diamond Si: (111) at 28.44°. hcp Mg: (10-11) at 36.6°, 4-index labels.
    expected = {"NaCl": (31.70, [(2, 0, 0)]), "Si": (28.44, [(1, 1, 1)]), "Mg": (36.61, [(1, 0, -1, 1)])}
    results = patterns([(pat.x, pat.y, pat.hkls) for pat in sticks.values()], workers=2)
    for (name, pat), res in zip(sticks.items(), results):
        centre, truth = expected[name]
        assert res.ground_truth == truth, name
        assert abs(res.two_theta_star - centre) < 0.05, name
        assert res.n_sticks == len(pat.x)
        assert_equivalent(pat.x, pat.y, DEFAULT)
    assert 2 * math.degrees(math.asin(1.54056 / 5.64)) == pytest.approx(31.70, abs=0.01)


# --- adaptive ground-truth window ------------------------------------------------------------

def test_adaptive_window_two_fwhms_is_the_default_window():
    assert 2 * DEFAULT.fwhm == DEFAULT.gt_window  # 2 x 0.15 is the float 0.30
    rng = np.random.default_rng(7)
    adaptive = ProfileParams(window_fwhms=2.0)
    for _ in range(20):
        tt = np.sort(rng.uniform(10, 80, 40))
        tt[1::2] = tt[::2] + rng.uniform(0.05, 0.5, 20)  # neighbours inside and outside 0.30
        inten = rng.uniform(1, 100, 40)
        assert compiled(tt, inten, adaptive)[3].tolist() == compiled(tt, inten, DEFAULT)[3].tolist()
        assert dense(tt, inten, adaptive)[3].tolist() == dense(tt, inten, DEFAULT)[3].tolist()


def test_adaptive_window_widens_with_caglioti_width():
    # A constant Caglioti width of 0.4° (U = V = 0, W = 0.16): the adaptive window is 2 x 0.4 = 0.8°,
    # so the weak sticks 0.5° away join the ground truth and those 1.0° away do not.
    tt, inten = [50.0, 50.5, 49.5, 51.0], [100.0, 1.0, 1.0, 1.0]
    hkls = [[(1, 1, 1)], [(2, 0, 0)], [(1, 1, 0)], [(2, 1, 0)]]
    fixed = ProfileParams(caglioti=(0.0, 0.0, 0.16), ka2_ratio=0.0)
    adaptive = ProfileParams(caglioti=(0.0, 0.0, 0.16), ka2_ratio=0.0, window_fwhms=2.0)
    assert pattern(tt, inten, hkls, fixed).ground_truth == [(1, 1, 1)]
    got = pattern(tt, inten, hkls, adaptive)
    assert got.two_theta_star == pytest.approx(50.0, abs=1e-9)
    assert got.ground_truth == [(1, 1, 0), (1, 1, 1), (2, 0, 0)]
    assert dense(tt, inten, adaptive)[3].tolist() == compiled(tt, inten, adaptive)[3].tolist() == [0, 1, 2]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(5, 88), st.floats(0.5, 100)), min_size=1, max_size=25),
       st.floats(0.5, 4.0), st.floats(0.0, 0.02), st.floats(-0.01, 0.01), st.floats(0.002, 0.03))
def test_adaptive_window_compiled_equals_reference(sticks, k, u, v, w):
    tt, inten = (list(t) for t in zip(*sticks))
    params = ProfileParams(caglioti=(u, v, w), window_fwhms=k)
    try:
        want = dense(tt, inten, params)
    except ValueError:
        assert_same_error(tt, inten, params)
        return
    got = compiled(tt, inten, params)
    top2 = np.sort(want[0])[-2:]
    if top2[1] - top2[0] > 1e-12 * want[2]:
        assert (got[1], got[3].tolist()) == (want[1], want[3].tolist())


def test_adaptive_window_width_undefined_at_the_peak():
    # The radicand tan θ - tan θ0 is positive at the stick (45.004°) and its Kα2 copy but negative
    # at the grid point 45.00° where the curve peaks: the adaptive window has no width there.
    t0 = math.tan(math.radians(0.5 * 45.002))
    params = ProfileParams(caglioti=(0.0, 1.0, -t0), window_fwhms=2.0)
    message = assert_same_error([45.004], [10.0], params)
    assert message.startswith("Caglioti width undefined at 2theta* = 45.0: ")
    no_adaptive = ProfileParams(caglioti=(0.0, 1.0, -t0))
    assert compiled([45.004], [10.0], no_adaptive)[3].tolist() == [0]


def test_window_fwhms_validated():
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="window_fwhms"):
            ProfileParams(window_fwhms=bad)
