// _core.profile: Kα1/Kα2 pseudo-Voigt broadening of diffraction sticks on a
// uniform 2θ grid, the first argmax of the curve and the Kα1 sticks within
// the ground-truth window of it.
//   broaden       one pattern  -> (curve, index of the first argmax, stick indices)
//   broaden_batch many patterns, `workers` threads, GIL released
// Inputs are checked with the same messages, in the same order, as the
// reference (benchmint/xrd/profile_ref.py); per-stick angles use the same libm
// calls in the same order, so every discrete decision (Kα2 copy or not,
// Caglioti radicand sign, window membership) is taken identically.
//
// The curve: each stick adds I·[η·L + (1-η)·G]. Evaluating every stick at
// every grid point costs n_sticks·n_grid exp() calls; here
//   * G is evaluated within ±c·FWHM of its stick (by exp() every 16 points
//     and geometric ratios between, see add_gauss). At u FWHMs from
//     it, (1-η)·G / (η·L) = (1-η)/η·sqrt(π·ln2)·(1 + 4u²)·2^(-4u²), which
//     falls for u >= 1; c is the smallest multiple of 0.5 (from 3) making it
//     <= 1e-16 (c = 4 for η = 0.4), so the dropped tails change the curve by
//     a relative 1e-16 at most. When no c <= 28 does (η = 0 or tiny), the
//     reach is 28·FWHM, where exp() underflows to exactly 0.
//   * L is split per block of grid points: sticks closer than `window` to
//     the block are evaluated directly at every point of the block; the sum
//     of the others (the far field) is smooth on the block and is replaced
//     by its Chebyshev interpolant on n first-kind nodes of the block, n
//     chosen from the bound below. Where n would not be smaller than the
//     block, the far field is evaluated directly.
//
// Far-field bound. Write a stick's Lorentzian as c·Im 1/(x - z), z = p + i·g
// (g = FWHM/2). For f(x) = 1/(x - z) the interpolation error on nodes t_j is
// exactly ω(x)/(ω(z)·(x - z)), ω(x) = Π(x - t_j). On a block of length D,
// first-kind Chebyshev nodes give |ω(x)| <= 2(D/4)^n, and a far stick at
// real distance d >= window from the block gives |ω(z)| >= d^n and
// |x - z| <= d + D + g. The Lorentzian is c·g/|x - z|^2, so the error of the
// stick's term, relative to the term itself, is at most
//     2·(D/(4d))^n·(1 + (d + D)/g) <= 2·(D/(4W))^n·(1 + (W + D)/g_min),
// the right side being the value at d = W (the left side decreases in d).
// All terms are positive, so the far-field error at any grid point is at
// most that bound times the curve at that point. n is the smallest count
// making the bound <= 1e-12 (16 nodes for the defaults: W = 2°, D = 1°,
// g = 0.075°), far below the 1e-9·max(curve) the pattern must meet.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "parallel.hpp"
#include "pyrepr.hpp"

namespace py = pybind11;

namespace bm {
namespace {

constexpr double kLn2 = 0.69314718055994530942;
// The constants of Python's math.radians / math.degrees, so that angles
// match the reference bit for bit.
constexpr double kDegToRad = kPi / 180.0;
constexpr double kRadToDeg = 180.0 / kPi;
constexpr double kFarTolerance = 1e-12;

struct Params {
    double fwhm, eta, ka2_ratio, wl1, wl2, start, step;
    int64_t n_grid;
    bool caglioti;
    double cu, cv, cw;
    double window, gt_window;
    double window_fwhms;  // > 0: the ground-truth window is this many FWHMs at 2θ* (adaptive)
};

// Python's repr(float), non-finite values included.
std::string repr(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    std::string s;
    append_py_float(s, v);
    return s;
}

// Every stick of the curve (Kα1, then the Kα2 copies), sorted by position.
struct Sticks {
    std::vector<double> pos, a_l, k_l, a_g, k_g, reach_g;
    double g_min = 0.0;
    int scale_exp = 0;  // intensities are divided by 2^scale_exp, the curve multiplied back
};

// Width of a stick: two_theta[index] itself, or its Kα2 copy at `two_theta`.
double stick_fwhm(double two_theta, const Params& p, int64_t index, bool ka2) {
    if (!p.caglioti) return p.fwhm;
    const double t = std::tan((0.5 * two_theta) * kDegToRad);
    const double r = p.cu * (t * t) + p.cv * t + p.cw;
    if (!(r > 0.0) || !std::isfinite(r)) {
        const std::string at = "two_theta[" + std::to_string(index) + "]";
        const std::string where =
            ka2 ? "the Ka2 copy of " + at + " (2theta = " + repr(two_theta) + ")" : at + " = " + repr(two_theta);
        throw std::invalid_argument("Caglioti width undefined at " + where + ": U*tan(theta)^2 + V*tan(theta) + W = " +
                                    repr(r) + " is not a finite positive number");
    }
    return std::sqrt(r);
}

// The profile width at the grid point 2θ* (for the adaptive window).
double width_at_star(double star, const Params& p) {
    if (!p.caglioti) return p.fwhm;
    const double t = std::tan((0.5 * star) * kDegToRad);
    const double r = p.cu * (t * t) + p.cv * t + p.cw;
    if (!(r > 0.0) || !std::isfinite(r))
        throw std::invalid_argument("Caglioti width undefined at 2theta* = " + repr(star) +
                                    ": U*tan(theta)^2 + V*tan(theta) + W = " + repr(r) +
                                    " is not a finite positive number");
    return std::sqrt(r);
}

// The Gaussian reach in FWHMs (see the bound at the top).
double gauss_reach(double eta) {
    if (eta > 0.0)
        for (double c = 3.0; c < 28.0; c += 0.5)
            if ((1.0 - eta) / eta * std::sqrt(kPi * kLn2) * (1.0 + 4.0 * c * c) * std::exp2(-4.0 * c * c) <= 1e-16)
                return c;
    return 28.0;
}

// Validates one pattern and builds its sticks. Errors are std::invalid_argument
// (ValueError in Python) with the reference's messages.
Sticks prepare(const double* tt, const double* in, int64_t n_tt, int64_t n_in, const Params& p) {
    if (n_tt != n_in)
        throw std::invalid_argument("two_theta and intensity differ in length (" + std::to_string(n_tt) + " vs " +
                                    std::to_string(n_in) + ")");
    if (n_tt == 0) throw std::invalid_argument("no sticks: two_theta is empty");
    for (int64_t i = 0; i < n_tt; ++i) {
        if (tt[i] > 0.0 && tt[i] < 180.0 && in[i] >= 0.0 && std::isfinite(in[i])) continue;
        const std::string at = "[" + std::to_string(i) + "]";
        if (!std::isfinite(tt[i])) throw std::invalid_argument("two_theta" + at + " is not finite");
        if (!(tt[i] > 0.0 && tt[i] < 180.0))
            throw std::invalid_argument("two_theta" + at + " = " + repr(tt[i]) + " is outside (0, 180) degrees");
        if (!std::isfinite(in[i])) throw std::invalid_argument("intensity" + at + " is not finite");
        if (in[i] < 0.0) throw std::invalid_argument("intensity" + at + " = " + repr(in[i]) + " is negative");
    }
    const double last = p.start + p.step * double(p.n_grid - 1);
    bool any_on_grid = false;
    for (int64_t i = 0; i < n_tt && !any_on_grid; ++i) any_on_grid = tt[i] >= p.start && tt[i] <= last;
    if (!any_on_grid)
        throw std::invalid_argument("no stick lies on the grid [" + repr(p.start) + ", " + repr(last) + "] degrees");

    struct Raw {
        double pos, inten, fwhm;
    };
    // Dividing by a power of two near the largest intensity is exact and keeps
    // every intermediate away from overflow and underflow.
    const double i_max = *std::max_element(in, in + n_tt);
    int e = 0;
    if (i_max > 0.0) std::frexp(i_max, &e);
    std::vector<Raw> raw;
    raw.reserve(size_t(2 * n_tt));
    const double ratio = p.wl2 / p.wl1;
    for (int64_t i = 0; i < n_tt; ++i) {
        const double v = std::ldexp(in[i], -e);
        raw.push_back({tt[i], v, stick_fwhm(tt[i], p, i, false)});
        if (p.ka2_ratio == 0.0) continue;
        // sin θ2 = (λ2/λ1)·sin θ1 has no solution when it exceeds 1: no copy.
        const double s = ratio * std::sin((0.5 * tt[i]) * kDegToRad);
        if (s > 1.0) continue;
        const double pos2 = 2.0 * (std::asin(s) * kRadToDeg);
        raw.push_back({pos2, v * p.ka2_ratio, stick_fwhm(pos2, p, i, true)});
    }
    std::stable_sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) { return a.pos < b.pos; });

    Sticks s;
    s.scale_exp = e;
    const size_t n = raw.size();
    for (auto* v : {&s.pos, &s.a_l, &s.k_l, &s.a_g, &s.k_g, &s.reach_g}) v->resize(n);
    const double gauss_norm = 2.0 * std::sqrt(kLn2 / kPi);
    const double reach = gauss_reach(p.eta);
    double fw_min = raw[0].fwhm;
    for (size_t j = 0; j < n; ++j) {
        const double w = raw[j].fwhm;
        fw_min = std::min(fw_min, w);
        s.pos[j] = raw[j].pos;
        s.a_l[j] = raw[j].inten * p.eta * (2.0 / (kPi * w));
        s.k_l[j] = 4.0 / (w * w);
        s.a_g[j] = raw[j].inten * (1.0 - p.eta) * (gauss_norm / w);
        s.k_g[j] = 4.0 * kLn2 / (w * w);
        s.reach_g[j] = reach * w;
    }
    s.g_min = 0.5 * fw_min;
    return s;
}

// Grid indices k with x_k in [lo, hi], widened by one point on each side so
// that rounding never drops a point; empty when hi < lo.
inline void index_span(double lo, double hi, const Params& p, int64_t& k0, int64_t& k1) {
    const double n = double(p.n_grid);
    const double a = std::clamp(std::floor((lo - p.start) / p.step) - 1.0, 0.0, n);
    const double b = std::clamp(std::ceil((hi - p.start) / p.step) + 2.0, 0.0, n);
    k0 = int64_t(a);
    k1 = std::max(k0, int64_t(b));
}

// The two division loops below carry most of the time; an AVX2 clone halves
// it where the CPU has AVX2 (same IEEE operations, FMA contraction stays off).
#if defined(__x86_64__) && defined(__GNUC__)
#define BM_HOT_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define BM_HOT_LOOP
#endif

// Lorentzians of sticks [j0, j1) added to curve[k0, k1) at the grid points.
BM_HOT_LOOP void add_lorentz(const Sticks& s, size_t j0, size_t j1, const double* x, double* curve, int64_t k0,
                             int64_t k1) {
    for (size_t j = j0; j < j1; ++j) {
        const double pj = s.pos[j], aj = s.a_l[j], kj = s.k_l[j];
        for (int64_t k = k0; k < k1; ++k) {
            const double dx = x[k] - pj;
            curve[k] += aj / (1.0 + kj * (dx * dx));
        }
    }
}

// Lorentzians of sticks [j0, j1) summed at the m points t into acc.
BM_HOT_LOOP void sum_lorentz_at(const Sticks& s, size_t j0, size_t j1, const double* t, double* acc, int m) {
    for (size_t j = j0; j < j1; ++j) {
        const double pj = s.pos[j], aj = s.a_l[j], kj = s.k_l[j];
        for (int i = 0; i < m; ++i) {
            const double dx = t[i] - pj;
            acc[i] += aj / (1.0 + kj * (dx * dx));
        }
    }
}

// Σ_{k<m} coef_k T_k(u_i), u_i = (x_i - mid)/half, added to out[i] for the
// n points of a block; per point the operations are those of the scalar
// Clenshaw recurrence, in the same order.
BM_HOT_LOOP void clenshaw_block(const double* x, int64_t n, double mid, double half, const double* coef, int m,
                                double* u, double* b1, double* b2, double* out) {
    for (int64_t i = 0; i < n; ++i) {
        u[i] = (x[i] - mid) / half;
        b1[i] = 0.0;
        b2[i] = 0.0;
    }
    for (int k = m - 1; k >= 1; --k) {
        const double ck = coef[k];
        for (int64_t i = 0; i < n; ++i) {
            const double b0 = 2.0 * u[i] * b1[i] - b2[i] + ck;
            b2[i] = b1[i];
            b1[i] = b0;
        }
    }
    for (int64_t i = 0; i < n; ++i) out[i] += u[i] * b1[i] - b2[i] + coef[0];
}

// Chebyshev nodes on [-1, 1] and the cos(π·k·(i + ½)/m) matrix, built once per node count.
struct ChebyshevTables {
    std::vector<double> unit, cosines;
};

const ChebyshevTables& chebyshev_tables(int m) {
    static std::mutex lock;
    static std::vector<std::unique_ptr<ChebyshevTables>> cache(65);
    std::lock_guard<std::mutex> guard(lock);
    auto& slot = cache.at(size_t(m));
    if (!slot) {
        auto t = std::make_unique<ChebyshevTables>();
        t->unit.resize(size_t(m));
        t->cosines.resize(size_t(m) * size_t(m));
        for (int i = 0; i < m; ++i) t->unit[i] = std::cos(kPi * (i + 0.5) / m);
        for (int k = 0; k < m; ++k)
            for (int i = 0; i < m; ++i) t->cosines[size_t(k) * m + i] = std::cos(kPi * k * (i + 0.5) / m);
        slot = std::move(t);
    }
    return *slot;
}

// A·exp(-K·(x_k - p)²) added to curve[k0, k1). On a uniform grid the ratio of
// neighbouring values is itself geometric: g_{k+1} = g_k·q_k, q_{k+1} = q_k·r,
// r = exp(-2K·h²). Each run of kGaussRun points starts from exp() at the true
// grid value, so the products carry at most ~kGaussRun²/2 roundings (< 1e-13
// relative) and the step h vs the rounded grid values moves a value by under
// 2K·|x - p|·1e-14 relative. Gaussians narrower than about a grid step
// (K·h² > 1) are evaluated directly.
constexpr int64_t kGaussRun = 16;

void add_gauss(double pos, double amp, double k, const double* x, double h, double* curve, int64_t k0, int64_t k1) {
    if (k * h * h > 1.0) {
        for (int64_t i = k0; i < k1; ++i) {
            const double dx = x[i] - pos;
            curve[i] += amp * std::exp(-k * (dx * dx));
        }
        return;
    }
    const double r = std::exp(-2.0 * k * h * h);
    for (int64_t b = k0; b < k1; b += kGaussRun) {
        const int64_t e = std::min(k1, b + kGaussRun);
        const double d = x[b] - pos;
        double g = std::exp(-k * (d * d));
        double q = std::exp(-k * (2.0 * d * h + h * h));
        for (int64_t i = b; i < e; ++i) {
            curve[i] += amp * g;
            g *= q;
            q *= r;
        }
    }
}

struct Layout {
    int64_t block;  // grid points per block
    int nodes;      // Chebyshev nodes per block; 0: far field evaluated directly
};

Layout layout(const Params& p, double g_min) {
    // Blocks about half a window long keep D/(4W) near 1/8.
    const int64_t block = std::max<int64_t>(2, int64_t(std::floor(p.window / (2.0 * p.step))) + 1);
    const double d = p.step * double(block - 1);
    const double rho = d / (4.0 * p.window);
    double bound = 2.0 * (1.0 + (p.window + d) / g_min);
    for (int n = 1; n < 64 && n < block; ++n) {
        bound *= rho;
        if (bound <= kFarTolerance) return {block, n};
    }
    return {block, 0};
}

void broaden_sticks(const Sticks& s, const Params& p, const double* x, double* curve) {
    const int64_t n_grid = p.n_grid;
    std::fill(curve, curve + n_grid, 0.0);
    const size_t n = s.pos.size();

    for (size_t j = 0; j < n; ++j) {
        int64_t k0, k1;
        index_span(s.pos[j] - s.reach_g[j], s.pos[j] + s.reach_g[j], p, k0, k1);
        add_gauss(s.pos[j], s.a_g[j], s.k_g[j], x, p.step, curve, k0, k1);
    }

    const Layout lay = layout(p, s.g_min);
    const int m = lay.nodes;
    const ChebyshevTables& cheb = chebyshev_tables(m);
    const std::vector<double>&cosines = cheb.cosines, &unit = cheb.unit;
    std::vector<double> t(m), vals(m), coef(m), u(size_t(lay.block)), b1(size_t(lay.block)), b2(size_t(lay.block));

    for (int64_t k0 = 0; k0 < n_grid; k0 += lay.block) {
        const int64_t k1 = std::min(n_grid, k0 + lay.block);
        const double a = x[k0], b = x[k1 - 1];
        // Near: a - W < p < b + W, evaluated exactly; the rest is at least W away.
        const size_t lo = size_t(std::upper_bound(s.pos.begin(), s.pos.end(), a - p.window) - s.pos.begin());
        const size_t hi = size_t(std::lower_bound(s.pos.begin() + lo, s.pos.end(), b + p.window) - s.pos.begin());
        add_lorentz(s, lo, hi, x, curve, k0, k1);
        if (m == 0 || k1 - k0 <= m) {
            add_lorentz(s, 0, lo, x, curve, k0, k1);
            add_lorentz(s, hi, n, x, curve, k0, k1);
            continue;
        }
        const double mid = 0.5 * (a + b), half = 0.5 * (b - a);
        for (int i = 0; i < m; ++i) t[i] = mid + half * unit[i];
        std::fill(vals.begin(), vals.end(), 0.0);
        sum_lorentz_at(s, 0, lo, t.data(), vals.data(), m);
        sum_lorentz_at(s, hi, n, t.data(), vals.data(), m);
        for (int k = 0; k < m; ++k) {
            double c = 0.0;
            for (int i = 0; i < m; ++i) c += vals[i] * cosines[size_t(k) * m + i];
            coef[k] = (k == 0 ? 1.0 : 2.0) * c / m;
        }
        // Clenshaw: stable evaluation of Σ coef_k T_k(u), run over all points
        // of the block at once so the independent recurrences vectorize.
        clenshaw_block(x + k0, k1 - k0, mid, half, coef.data(), m, u.data(), b1.data(), b2.data(), curve + k0);
    }
}

struct Outcome {
    int64_t star = -1;
    double peak = 0.0;
    std::vector<int64_t> truth;  // indices of the Kα1 sticks in the window, ascending
};

Outcome finish(const double* tt, int64_t n_tt, const Params& p, const double* x, const double* curve) {
    for (int64_t k = 0; k < p.n_grid; ++k)
        if (!std::isfinite(curve[k]))
            throw std::invalid_argument("the curve overflowed float64; scale the intensities down");
    Outcome o;
    o.star = 0;
    for (int64_t k = 1; k < p.n_grid; ++k)
        if (curve[k] > curve[o.star]) o.star = k;  // strict: the first argmax wins
    o.peak = curve[o.star];
    if (!(o.peak > 0.0)) throw std::invalid_argument("the curve is zero on the whole grid");
    const double star = x[o.star];
    // Adaptive window: a multiple of the profile width at 2θ* itself.
    const double half = p.window_fwhms > 0.0 ? p.window_fwhms * width_at_star(star, p) : p.gt_window;
    for (int64_t i = 0; i < n_tt; ++i)
        if (std::fabs(tt[i] - star) < half) o.truth.push_back(i);
    return o;
}

Outcome run_one(const double* tt, const double* in, int64_t n_tt, int64_t n_in, const Params& p, const double* x,
                double* curve) {
    const Sticks s = prepare(tt, in, n_tt, n_in, p);
    broaden_sticks(s, p, x, curve);
    // Undo the power-of-two scaling: a multiplication rounds exactly as ldexp
    // does, and costs far less, whenever 2^scale_exp is a normal double.
    if (s.scale_exp >= -1021 && s.scale_exp <= 1023) {
        const double f = std::ldexp(1.0, s.scale_exp);
        for (int64_t k = 0; k < p.n_grid; ++k) curve[k] *= f;
    } else {
        for (int64_t k = 0; k < p.n_grid; ++k) curve[k] = std::ldexp(curve[k], s.scale_exp);
    }
    return finish(tt, n_tt, p, x, curve);
}

Params make_params(double fwhm, double eta, double ka2_ratio, double wl1, double wl2, double start, double step,
                   int64_t n_grid, py::object caglioti, double window, double gt_window, py::object window_fwhms) {
    Params p{fwhm, eta, ka2_ratio, wl1, wl2, start, step, n_grid, false, 0.0, 0.0, 0.0, window, gt_window, 0.0};
    if (!window_fwhms.is_none()) {
        p.window_fwhms = window_fwhms.cast<double>();
        if (!(p.window_fwhms > 0.0) || !std::isfinite(p.window_fwhms))
            throw py::value_error("window_fwhms must be None or a finite number > 0");
    }
    if (n_grid < 2) throw py::value_error("n_grid must be >= 2");
    if (!caglioti.is_none()) {
        auto uvw = caglioti.cast<std::vector<double>>();
        if (uvw.size() != 3) throw py::value_error("caglioti must be (U, V, W)");
        p.caglioti = true;
        p.cu = uvw[0];
        p.cv = uvw[1];
        p.cw = uvw[2];
    }
    return p;
}

std::vector<double> grid_of(const Params& p) {
    std::vector<double> x(size_t(p.n_grid));
    for (int64_t k = 0; k < p.n_grid; ++k) x[size_t(k)] = p.start + p.step * double(k);
    return x;
}

py::array_t<int64_t> as_array(const std::vector<int64_t>& v) {
    py::array_t<int64_t> a(py::ssize_t(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

py::tuple broaden(const carray<double>& two_theta, const carray<double>& intensity, double fwhm, double eta,
                  double ka2_ratio, double wl1, double wl2, double start, double step, int64_t n_grid,
                  py::object caglioti, double window, double gt_window, py::object window_fwhms) {
    const Params p =
        make_params(fwhm, eta, ka2_ratio, wl1, wl2, start, step, n_grid, caglioti, window, gt_window, window_fwhms);
    if (two_theta.ndim() != 1 || intensity.ndim() != 1)
        throw py::value_error("two_theta and intensity must be 1-D arrays");
    py::array_t<double> curve(n_grid);
    Outcome o;
    {
        py::gil_scoped_release nogil;
        const std::vector<double> x = grid_of(p);
        o = run_one(two_theta.data(), intensity.data(), two_theta.shape(0), intensity.shape(0), p, x.data(),
                    curve.mutable_data());
    }
    return py::make_tuple(curve, o.star, o.peak, as_array(o.truth));
}

py::tuple broaden_batch(const py::list& two_thetas, const py::list& intensities, double fwhm, double eta,
                        double ka2_ratio, double wl1, double wl2, double start, double step, int64_t n_grid,
                        py::object caglioti, double window, double gt_window, py::object window_fwhms, int workers) {
    const Params p =
        make_params(fwhm, eta, ka2_ratio, wl1, wl2, start, step, n_grid, caglioti, window, gt_window, window_fwhms);
    const int nthreads = resolve_workers(workers);
    if (two_thetas.size() != intensities.size())
        throw py::value_error("two_thetas and intensities differ in length (" + std::to_string(two_thetas.size()) +
                              " vs " + std::to_string(intensities.size()) + ")");
    const int64_t n_pat = int64_t(two_thetas.size());
    std::vector<carray<double>> tts, ins;
    tts.reserve(size_t(n_pat));
    ins.reserve(size_t(n_pat));
    for (int64_t j = 0; j < n_pat; ++j) {
        tts.push_back(two_thetas[size_t(j)].cast<carray<double>>());
        ins.push_back(intensities[size_t(j)].cast<carray<double>>());
        if (tts.back().ndim() != 1 || ins.back().ndim() != 1)
            throw py::value_error("pattern " + std::to_string(j) + ": two_theta and intensity must be 1-D arrays");
    }
    py::array_t<double> curves(std::vector<py::ssize_t>{py::ssize_t(n_pat), py::ssize_t(n_grid)});
    double* out = curves.mutable_data();
    std::vector<Outcome> outcomes(static_cast<size_t>(n_pat));
    std::vector<std::string> errors(static_cast<size_t>(n_pat));
    {
        py::gil_scoped_release nogil;
        const std::vector<double> x = grid_of(p);
        parallel_blocks(n_pat, nthreads, 1, [&](int64_t b, int64_t e) {
            for (int64_t j = b; j < e; ++j) {
                try {
                    outcomes[size_t(j)] = run_one(tts[size_t(j)].data(), ins[size_t(j)].data(), tts[size_t(j)].shape(0),
                                                  ins[size_t(j)].shape(0), p, x.data(), out + j * n_grid);
                } catch (const std::exception& exc) {
                    errors[size_t(j)] = exc.what();
                }
            }
        });
    }
    for (int64_t j = 0; j < n_pat; ++j)  // the lowest failing pattern, as a serial loop would report
        if (!errors[size_t(j)].empty())
            throw py::value_error("pattern " + std::to_string(j) + ": " + errors[size_t(j)]);
    py::array_t<int64_t> stars(n_pat);
    py::array_t<double> peaks(n_pat);
    py::list truths;
    for (int64_t j = 0; j < n_pat; ++j) {
        stars.mutable_data()[j] = outcomes[size_t(j)].star;
        peaks.mutable_data()[j] = outcomes[size_t(j)].peak;
        truths.append(as_array(outcomes[size_t(j)].truth));
    }
    return py::make_tuple(curves, stars, peaks, truths);
}

}  // namespace

void bind_profile(py::module_& m) {
    m.doc() = "XRD profile kernels; call them through benchmint.xrd, which checks the parameters.";
    m.def("broaden", &broaden, py::arg("two_theta"), py::arg("intensity"), py::arg("fwhm"), py::arg("eta"),
          py::arg("ka2_ratio"), py::arg("wavelength_ka1"), py::arg("wavelength_ka2"), py::arg("grid_start"),
          py::arg("grid_step"), py::arg("n_grid"), py::arg("caglioti"), py::arg("window_deg"), py::arg("gt_window"),
          py::arg("window_fwhms") = py::none(),
          "One pattern -> (curve, index of the first argmax, curve max, indices of the Ka1 sticks in the window).");
    m.def("broaden_batch", &broaden_batch, py::arg("two_thetas"), py::arg("intensities"), py::arg("fwhm"),
          py::arg("eta"), py::arg("ka2_ratio"), py::arg("wavelength_ka1"), py::arg("wavelength_ka2"),
          py::arg("grid_start"), py::arg("grid_step"), py::arg("n_grid"), py::arg("caglioti"), py::arg("window_deg"),
          py::arg("gt_window"), py::arg("window_fwhms") = py::none(), py::arg("workers") = 1,
          "Many patterns -> (curves[n, n_grid], argmax indices, maxima, list of window stick indices).");
}

}  // namespace bm
