// _core.sticks: the numeric half of pymatgen's XRDCalculator.get_pattern.
//
// Two entry points, called by src/benchmint/xrd/sticks.py:
//
//   reflections(recip, real, max_r, min_r)
//       Every reciprocal lattice point g = h·b1 + k·b2 + l·b3 with |g| inside
//       the limiting sphere, kept in the Friedel half-space (h, k, l) > 0
//       lexicographically, |g| >= min_r when min_r > 0, sorted by
//       (|g|, -h, -k, -l). |g| is evaluated with the same operations in the
//       same order as pymatgen's neighbour search (images i*row0 + j*row1 +
//       k*row2, squared norm summed x, y, z, then sqrt; no FMA contraction,
//       see CMakeLists.txt), so the distances -- and with them the ordering
//       of equivalent reflections and the 2θ bins -- are bit for bit the
//       same. The acceptance test is the neighbour search's: for r < 1 it
//       searches with radius 1 + 1e-8 and keeps sqrt(d2) <= r, for r >= 1 it
//       keeps d2 < r*r + 1e-8.
//
//   intensities(hkl, g, theta, frac, occu, atom_group, z, coeff, dw, ustar, workers)
//       2·|F(g)|²·LP(θ) for each reflection, with
//         f_e(s²) = Z_e - 41.78214·s²·Σ_k a_k exp(-b_k s²),  s = |g|/2,
//         optionally times exp(-B_e s²) (isotropic Debye-Waller per element),
//         F = Σ_e f_e Σ_{j in e} occu_j exp(2πi h·r_j) [· exp(-2π² hᵀU*_j h)],
//         LP = (1 + cos²2θ) / (sin²θ cos θ).
//       The factor 2 restores the -g half (Friedel's law holds since f is
//       real). exp(2πi h·r) is assembled as the product of per-atom tables
//       exp(2πi h x)·exp(2πi k y)·exp(2πi l z), each entry computed directly
//       with cos/sin (no recurrences), which keeps the relative error of
//       every phase at a few ulp. Reflections are split over threads; the
//       GIL is released throughout.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "arrays.hpp"
#include "parallel.hpp"

namespace py = pybind11;

namespace bm {
namespace {

constexpr double kSearchTol = 1e-8;  // tolerance of the neighbour search
constexpr double kSearchMinR = 1.0;  // below this radius it searches with 1 + tol and filters

struct Refl {
    int64_t h, k, l;
    double g;
};

bool accepted(double d2, double r) {
    if (r < kSearchMinR) return std::sqrt(d2) <= r;
    return d2 < r * r + kSearchTol;
}

std::vector<Refl> enumerate(const double* B, const double* A, double max_r, double min_r) {
    // Index bounds: h_i = g·a_i, so |h_i| <= |g|·|a_i|; generous margins.
    const double reff = max_r < kSearchMinR ? kSearchMinR + kSearchTol : max_r;
    int64_t n[3];
    for (int i = 0; i < 3; ++i) {
        const double len = std::sqrt(A[3 * i] * A[3 * i] + A[3 * i + 1] * A[3 * i + 1] + A[3 * i + 2] * A[3 * i + 2]);
        const double bound = std::floor((reff + 0.15) * len) + 2.0;
        if (!(bound < 1e6)) throw std::invalid_argument("reciprocal search range too large (degenerate lattice?)");
        n[i] = static_cast<int64_t>(bound);
    }
    const double vmax = (0.0 + reff) + kSearchTol, vmin = (0.0 - reff) - kSearchTol;
    std::vector<Refl> out;
    for (int64_t h = 0; h <= n[0]; ++h) {
        for (int64_t k = (h == 0 ? 0 : -n[1]); k <= n[1]; ++k) {
            for (int64_t l = (h == 0 && k == 0 ? 1 : -n[2]); l <= n[2]; ++l) {
                double c[3];
                for (int d = 0; d < 3; ++d)
                    c[d] = static_cast<double>(h) * B[d] + static_cast<double>(k) * B[3 + d] +
                           static_cast<double>(l) * B[6 + d] + 0.0;
                if (!(c[0] > vmin && c[0] < vmax && c[1] > vmin && c[1] < vmax && c[2] > vmin && c[2] < vmax)) continue;
                double d2 = 0.0;
                for (int d = 0; d < 3; ++d) d2 += (c[d] - 0.0) * (c[d] - 0.0);
                if (!accepted(d2, max_r)) continue;
                const double g = std::sqrt(d2);
                if (min_r != 0.0 && !(g >= min_r)) continue;
                out.push_back({h, k, l, g});
            }
        }
    }
    std::sort(out.begin(), out.end(), [](const Refl& a, const Refl& b) {
        if (a.g != b.g) return a.g < b.g;
        if (a.h != b.h) return a.h > b.h;
        if (a.k != b.k) return a.k > b.k;
        return a.l > b.l;
    });
    return out;
}

py::tuple reflections(const carray<double>& recip, const carray<double>& real, double max_r, double min_r) {
    if (recip.ndim() != 2 || recip.shape(0) != 3 || recip.shape(1) != 3 || real.ndim() != 2 || real.shape(0) != 3 ||
        real.shape(1) != 3)
        throw py::value_error("recip and real must be 3x3 matrices");
    if (!std::isfinite(max_r) || !std::isfinite(min_r) || max_r < 0.0)
        throw py::value_error("max_r and min_r must be finite, max_r >= 0");
    std::vector<Refl> refl;
    {
        py::gil_scoped_release nogil;
        refl = enumerate(recip.data(), real.data(), max_r, min_r);
    }
    const py::ssize_t m = static_cast<py::ssize_t>(refl.size());
    py::array_t<int64_t> hkl(std::vector<py::ssize_t>{m, 3});
    py::array_t<double> g(m);
    auto* ph = hkl.mutable_data();
    auto* pg = g.mutable_data();
    for (py::ssize_t i = 0; i < m; ++i) {
        ph[3 * i] = refl[i].h;
        ph[3 * i + 1] = refl[i].k;
        ph[3 * i + 2] = refl[i].l;
        pg[i] = refl[i].g;
    }
    return py::make_tuple(hkl, g);
}

struct SFInput {
    const int64_t* hkl;
    const double* g;
    const double* theta;
    int64_t m;
    const double* frac;  // (n, 3), atoms sorted by group
    const double* occu;  // (n,)
    const int64_t* grp;  // (n,) non-decreasing group index
    int64_t n;
    const double* z;      // (G,)
    const double* coeff;  // (G, nc, 2)
    int64_t nc;
    const double* dw;  // (G,)
    int64_t ng;
    const double* ustar;  // (n, 3, 3) or null
};

// Phase tables, atoms contiguous: re[(row) * n + j] = cos(2π v x_j) for row = offset of
// (dimension, value v); im likewise with sin.
struct Tables {
    std::vector<double> re, im;
    int64_t lo[3], off[3];
};

typedef double V4 __attribute__((vector_size(32)));

inline V4 load4(const double* p) {
    V4 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The atom sums vectorize; an AVX2 clone runs where the CPU has it (FMA
// contraction stays off, see CMakeLists.txt).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void sf_range(const SFInput& in, const Tables& tb, const std::vector<int64_t>& group_start, int64_t begin, int64_t end,
              double* out) {
    const int64_t n = in.n;
    std::vector<double> w(static_cast<size_t>(n)), form(static_cast<size_t>(in.ng));
    double lorentz = 0.0;
    for (int64_t m = begin; m < end; ++m) {
        const int64_t h = in.hkl[3 * m], k = in.hkl[3 * m + 1], l = in.hkl[3 * m + 2];
        const double s2 = (in.g[m] / 2) * (in.g[m] / 2);
        const int64_t rx = (tb.off[0] + h - tb.lo[0]) * n, ry = (tb.off[1] + k - tb.lo[1]) * n,
                      rz = (tb.off[2] + l - tb.lo[2]) * n;
        const double *axr = tb.re.data() + rx, *axi = tb.im.data() + rx;
        const double *ayr = tb.re.data() + ry, *ayi = tb.im.data() + ry;
        const double *azr = tb.re.data() + rz, *azi = tb.im.data() + rz;
        const double* weight = in.occu;
        if (in.ustar) {
            const double hf[3] = {static_cast<double>(h), static_cast<double>(k), static_cast<double>(l)};
            for (int64_t j = 0; j < n; ++j) {
                const double* u = in.ustar + 9 * j;
                double q = 0.0;
                for (int r = 0; r < 3; ++r)
                    for (int c = 0; c < 3; ++c) q += hf[r] * u[3 * r + c] * hf[c];
                w[j] = in.occu[j] * std::exp(-2 * kPi * kPi * q);
            }
            weight = w.data();
        }
        // Form factors depend on |g| alone: equivalent reflections, adjacent in
        // the |g| order, often share it bit for bit and reuse them.
        if (m == begin || in.g[m] != in.g[m - 1]) {
            for (int64_t e = 0; e < in.ng; ++e) {
                double sum = 0.0;
                for (int64_t c = 0; c < in.nc; ++c) {
                    const double a = in.coeff[(e * in.nc + c) * 2], b = in.coeff[(e * in.nc + c) * 2 + 1];
                    sum += a * std::exp(-b * s2);
                }
                double f = in.z[e] - 41.78214 * s2 * sum;
                if (in.dw[e] != 0.0) f = f * std::exp(-in.dw[e] * s2);
                form[size_t(e)] = f;
            }
        }
        double fr = 0.0, fi = 0.0;
        for (int64_t e = 0; e < in.ng; ++e) {
            const double f = form[size_t(e)];
            // Occupancy-weighted phase sum of this element's atoms; four partial sums.
            // Four partial sums, lane u taking atoms j0 + u, j0 + u + 4, ...: written
            // with vector types so each lane does exactly the scalar operations.
            const int64_t j0 = group_start[e], j1 = group_start[e + 1];
            int64_t j = j0;
            V4 vr = {0, 0, 0, 0}, vi = {0, 0, 0, 0};
            for (; j + 4 <= j1; j += 4) {
                const V4 xr = load4(axr + j), xi = load4(axi + j), yr = load4(ayr + j), yi = load4(ayi + j);
                const V4 zr = load4(azr + j), zi = load4(azi + j), wt = load4(weight + j);
                const V4 abr = xr * yr - xi * yi;
                const V4 abi = xr * yi + xi * yr;
                vr += wt * (abr * zr - abi * zi);
                vi += wt * (abr * zi + abi * zr);
            }
            double sr[4] = {vr[0], vr[1], vr[2], vr[3]}, si[4] = {vi[0], vi[1], vi[2], vi[3]};
            for (; j < j1; ++j) {
                const double abr = axr[j] * ayr[j] - axi[j] * ayi[j];
                const double abi = axr[j] * ayi[j] + axi[j] * ayr[j];
                sr[0] += weight[j] * (abr * azr[j] - abi * azi[j]);
                si[0] += weight[j] * (abr * azi[j] + abi * azr[j]);
            }
            fr += f * ((sr[0] + sr[1]) + (sr[2] + sr[3]));
            fi += f * ((si[0] + si[1]) + (si[2] + si[3]));
        }
        const double i_hkl = fr * fr + fi * fi;
        const double th = in.theta[m];
        if (m == begin || th != in.theta[m - 1]) {
            const double cos2t = std::cos(2 * th), sint = std::sin(th), cost = std::cos(th);
            lorentz = (1 + cos2t * cos2t) / (sint * sint * cost);
        }
        out[m] = 2 * i_hkl * lorentz;
    }
}

py::array_t<double> intensities(const carray<int64_t>& hkl, const carray<double>& g, const carray<double>& theta,
                                const carray<double>& frac, const carray<double>& occu,
                                const carray<int64_t>& atom_group, const carray<double>& z, const carray<double>& coeff,
                                const carray<double>& dw, py::object ustar_obj, int workers) {
    const int nthreads_max = resolve_workers(workers);
    if (hkl.ndim() != 2 || hkl.shape(1) != 3) throw py::value_error("hkl must have shape (m, 3)");
    const int64_t m = hkl.shape(0);
    if (g.ndim() != 1 || g.shape(0) != m || theta.ndim() != 1 || theta.shape(0) != m)
        throw py::value_error("g and theta must have shape (m,)");
    if (frac.ndim() != 2 || frac.shape(1) != 3) throw py::value_error("frac must have shape (n, 3)");
    const int64_t n = frac.shape(0);
    if (occu.ndim() != 1 || occu.shape(0) != n || atom_group.ndim() != 1 || atom_group.shape(0) != n)
        throw py::value_error("occu and atom_group must have shape (n,)");
    const int64_t ng = z.ndim() == 1 ? z.shape(0) : -1;
    if (ng < 0 || coeff.ndim() != 3 || coeff.shape(0) != ng || coeff.shape(2) != 2 || dw.ndim() != 1 ||
        dw.shape(0) != ng)
        throw py::value_error("z, coeff, dw must have shapes (G,), (G, nc, 2), (G,)");
    const int64_t* grp = atom_group.data();
    for (int64_t j = 0; j < n; ++j) {
        if (grp[j] < 0 || grp[j] >= ng) throw py::value_error("atom_group out of range");
        if (j > 0 && grp[j] < grp[j - 1]) throw py::value_error("atoms must be sorted by group");
    }
    carray<double> ustar;
    if (!ustar_obj.is_none()) {
        ustar = ustar_obj.cast<carray<double>>();
        if (ustar.ndim() != 3 || ustar.shape(0) != n || ustar.shape(1) != 3 || ustar.shape(2) != 3)
            throw py::value_error("ustar must have shape (n, 3, 3)");
    }
    SFInput in{hkl.data(),
               g.data(),
               theta.data(),
               m,
               frac.data(),
               occu.data(),
               grp,
               n,
               z.data(),
               coeff.data(),
               coeff.shape(1),
               dw.data(),
               ng,
               ustar_obj.is_none() ? nullptr : ustar.data()};
    py::array_t<double> out(m);
    double* po = out.mutable_data();
    {
        py::gil_scoped_release nogil;
        Tables tb;
        int64_t hi[3] = {0, 0, 0};
        for (int d = 0; d < 3; ++d) tb.lo[d] = 0;
        for (int64_t i = 0; i < m; ++i)
            for (int d = 0; d < 3; ++d) {
                tb.lo[d] = std::min(tb.lo[d], in.hkl[3 * i + d]);
                hi[d] = std::max(hi[d], in.hkl[3 * i + d]);
            }
        int64_t rows = 0;
        for (int d = 0; d < 3; ++d) {
            tb.off[d] = rows;
            rows += hi[d] - tb.lo[d] + 1;
        }
        tb.re.assign(static_cast<size_t>(rows * n), 0.0);
        tb.im.assign(static_cast<size_t>(rows * n), 0.0);
        for (int d = 0; d < 3; ++d)
            for (int64_t v = tb.lo[d]; v <= hi[d]; ++v) {
                const int64_t r = (tb.off[d] + v - tb.lo[d]) * n;
                for (int64_t j = 0; j < n; ++j) {
                    const double arg = 2 * kPi * (static_cast<double>(v) * in.frac[3 * j + d]);
                    tb.re[r + j] = std::cos(arg);
                    tb.im[r + j] = std::sin(arg);
                }
            }
        std::vector<int64_t> group_start(static_cast<size_t>(ng + 1), n);
        for (int64_t e = 0, j = 0; e < ng; ++e) {
            while (j < n && grp[j] < e) ++j;
            group_start[e] = j;
        }
        const double work = static_cast<double>(m) * static_cast<double>(n + 4 * ng);
        const int nthreads = static_cast<int>(std::max<double>(1.0, std::min<double>(nthreads_max, work / 50000.0)));
        if (nthreads <= 1 || m < 2) {
            sf_range(in, tb, group_start, 0, m, po);
        } else {
            std::vector<std::thread> threads;
            const int64_t step = (m + nthreads - 1) / nthreads;
            for (int t = 0; t < nthreads; ++t) {
                const int64_t b = std::min<int64_t>(m, t * step), e = std::min<int64_t>(m, b + step);
                threads.emplace_back([&, b, e] { sf_range(in, tb, group_start, b, e, po); });
            }
            for (auto& th : threads) th.join();
        }
    }
    return out;
}

// Reflections -> peaks, as get_pattern merges them: reflections whose 2θ
// bins (keys) agree form one peak (peaks in increasing key order, each at its
// first reflection), intensities summed in reflection order; peaks whose
// intensity / max · 100 is not above `threshold` are dropped; the rest scaled
// to a maximum of 100. Each peak's hkl families as get_unique_families forms
// them from its reflections and their Friedel mates: members with the same
// sorted |indices|, the lexicographically largest member as representative
// (a half-space reflection always beats its mate), multiplicity twice the
// reflections, families in order of first appearance. Labels are
// (h, k, -h-k, l) when `hexagonal`.
py::tuple merge_peaks(const carray<int64_t>& keys, const carray<double>& intens, const carray<int64_t>& hkl,
                      bool hexagonal, double threshold) {
    const int64_t n = keys.ndim() == 1 ? keys.shape(0) : -1;
    if (n < 0 || intens.ndim() != 1 || intens.shape(0) != n || hkl.ndim() != 2 || hkl.shape(0) != n ||
        hkl.shape(1) != 3)
        throw py::value_error("keys, intensities and hkl must have shapes (m,), (m,), (m, 3)");
    const int width = hexagonal ? 4 : 3;
    std::vector<int64_t> rep, fam_labels, fam_mult, fam_start{0};
    std::vector<double> y;
    {
        py::gil_scoped_release nogil;
        const int64_t* kp = keys.data();
        const double* ip = intens.data();
        const int64_t* hp = hkl.data();
        std::vector<int64_t> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), int64_t(0));
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return kp[a] < kp[b]; });
        std::vector<int64_t> bin_start;  // runs of equal keys in `order`
        std::vector<double> summed;
        for (int64_t r = 0; r < n; ++r) {
            if (r == 0 || kp[order[r]] != kp[order[r - 1]]) {
                bin_start.push_back(r);
                summed.push_back(0.0);
            }
            summed.back() += ip[order[r]];
        }
        bin_start.push_back(n);
        double max_all = 0.0;
        for (size_t b = 0; b < summed.size(); ++b)
            if (b == 0 || summed[b] > max_all) max_all = summed[b];
        std::vector<size_t> kept;
        for (size_t b = 0; b < summed.size(); ++b)
            if (summed[b] / max_all * 100 > threshold) kept.push_back(b);
        double max_kept = 0.0;
        for (size_t i = 0; i < kept.size(); ++i)
            if (i == 0 || summed[kept[i]] > max_kept) max_kept = summed[kept[i]];
        const double scale = max_kept / 100;

        struct Family {
            std::array<int64_t, 4> key, best;
            int64_t rows;
        };
        std::vector<Family> fams;
        for (size_t b : kept) {
            rep.push_back(order[bin_start[b]]);
            y.push_back(summed[b] / scale);
            fams.clear();
            for (int64_t r = bin_start[b]; r < bin_start[b + 1]; ++r) {
                const int64_t* h = hp + 3 * order[r];
                std::array<int64_t, 4> label{h[0], h[1], h[2], 0};
                if (hexagonal) label = {h[0], h[1], -h[0] - h[1], h[2]};
                std::array<int64_t, 4> key{};
                for (int c = 0; c < width; ++c) key[c] = label[c] < 0 ? -label[c] : label[c];
                std::sort(key.begin(), key.begin() + width);
                auto it = std::find_if(fams.begin(), fams.end(), [&](const Family& f) { return f.key == key; });
                if (it == fams.end())
                    fams.push_back({key, label, 1});
                else {
                    ++it->rows;
                    if (std::lexicographical_compare(it->best.begin(), it->best.begin() + width, label.begin(),
                                                     label.begin() + width))
                        it->best = label;
                }
            }
            for (const Family& f : fams) {
                fam_labels.insert(fam_labels.end(), f.best.begin(), f.best.begin() + width);
                fam_mult.push_back(2 * f.rows);
            }
            fam_start.push_back(int64_t(fam_mult.size()));
        }
    }
    py::array_t<int64_t> rep_a(py::ssize_t(rep.size())), mult_a(py::ssize_t(fam_mult.size())),
        start_a(py::ssize_t(fam_start.size()));
    py::array_t<int64_t> labels_a(std::vector<py::ssize_t>{py::ssize_t(fam_mult.size()), width});
    py::array_t<double> y_a(py::ssize_t(y.size()));
    std::copy(rep.begin(), rep.end(), rep_a.mutable_data());
    std::copy(y.begin(), y.end(), y_a.mutable_data());
    std::copy(fam_labels.begin(), fam_labels.end(), labels_a.mutable_data());
    std::copy(fam_mult.begin(), fam_mult.end(), mult_a.mutable_data());
    std::copy(fam_start.begin(), fam_start.end(), start_a.mutable_data());
    return py::make_tuple(rep_a, y_a, labels_a, mult_a, start_a);
}

}  // namespace

void bind_sticks(py::module_& m) {
    m.doc() = "XRD sticks: reciprocal points in the limiting sphere and 2|F|^2 LP intensities.";
    m.def("reflections", &reflections, py::arg("recip"), py::arg("real"), py::arg("max_r"), py::arg("min_r"),
          "Half-space reciprocal points (hkl int64 (m,3), |g| float64 (m,)) sorted by (|g|, -h, -k, -l).");
    m.def("intensities", &intensities, py::arg("hkl"), py::arg("g"), py::arg("theta"), py::arg("frac"), py::arg("occu"),
          py::arg("atom_group"), py::arg("z"), py::arg("coeff"), py::arg("dw"), py::arg("ustar") = py::none(),
          py::arg("workers") = 1, "2|F|^2 times the Lorentz-polarisation factor for each reflection.");
    m.def("merge_peaks", &merge_peaks, py::arg("keys"), py::arg("intensities"), py::arg("hkl"), py::arg("hexagonal"),
          py::arg("threshold"),
          "Reflections -> (first reflection of each peak, scaled intensities, family labels (F, 3|4), "
          "multiplicities (F,), family offsets per peak (peaks + 1,)).");
}

}  // namespace bm
