// _core.cifread: periodic closeness of fractional positions, the inner loop of
// the fast CIF route (benchmint/xrd/cifread.py).
//
//   pbc_close(a, b, tol, margin) -> (close[n, m], ambiguous)
//       close[i, j] = max_k |d_k - rint(d_k)| < tol with d = a_i - b_j, the
//       same operations as the NumPy reference in xrd/cifread_ref.py (rint rounds half to even, as
//       np.round does), so every decision is identical. ambiguous says some
//       pair lies within `margin` of the tolerance, where the caller hands
//       the structure to pymatgen instead.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "arrays.hpp"

namespace py = pybind11;

namespace bm {
namespace {

// rint (round half to even, as np.round) for |v| < 2^52 by the magic-number
// trick; larger values are integers already. Inlined, unlike nearbyint
// (strict IEEE semantics, no -ffast-math, keep (a + 2^52) - 2^52 unfolded).
inline double rint_even(double v) {
    constexpr double big = 4503599627370496.0;
    const double a = std::fabs(v);
    if (!(a < big)) return v;
    return std::copysign((a + big) - big, v);
}

// max_k |d_k - rint(d_k)| of d = a - b, as np.maximum(np.maximum(.., ..), ..) orders it.
inline double pbc_max(const double* a, const double* b) {
    double d0 = a[0] - b[0], d1 = a[1] - b[1], d2 = a[2] - b[2];
    d0 = std::fabs(d0 - rint_even(d0));
    d1 = std::fabs(d1 - rint_even(d1));
    d2 = std::fabs(d2 - rint_even(d2));
    double mx = (d0 >= d1 || std::isnan(d0)) ? d0 : d1;  // NaN propagates, as in np.maximum
    return (mx >= d2 || std::isnan(mx)) ? mx : d2;
}

void check_positions(const carray<double>& a, const char* name) {
    if (a.ndim() != 2 || a.shape(1) != 3) throw py::value_error(std::string(name) + " must have shape (n, 3)");
}

py::tuple pbc_close(const carray<double>& a, const carray<double>& b, double tol, double margin) {
    check_positions(a, "a");
    check_positions(b, "b");
    const int64_t n = a.shape(0), m = b.shape(0);
    py::array_t<bool> close(std::vector<py::ssize_t>{py::ssize_t(n), py::ssize_t(m)});
    bool* out = close.mutable_data();
    const double *pa = a.data(), *pb = b.data();
    bool ambiguous = false;
    {
        py::gil_scoped_release nogil;
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < m; ++j) {
                const double mx = pbc_max(pa + 3 * i, pb + 3 * j);
                ambiguous |= std::fabs(mx - tol) <= margin;
                out[i * m + j] = mx < tol;
            }
    }
    return py::make_tuple(close, ambiguous);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define BM_CELL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BM_CELL_CLONES
#endif

// mx[j] = pbc_max(p_i, p_j) for j in [j0, n) over finite coordinates given as
// columns x, y, z: no NaN can arise, so plain selects give np.maximum's value
// and the loop vectorizes.
BM_CELL_CLONES void row_max(double xi, double yi, double zi, const double* x, const double* y, const double* z,
                            int64_t j0, int64_t n, double* mx) {
    constexpr double big = 4503599627370496.0;
    for (int64_t j = j0; j < n; ++j) {
        double d[3] = {xi - x[j], yi - y[j], zi - z[j]};
        for (double& v : d) {
            const double a = std::fabs(v);
            const double r = std::copysign((a + big) - big, v);
            v = std::fabs(v - (a < big ? r : v));
        }
        const double m01 = d[0] >= d[1] ? d[0] : d[1];
        mx[j] = m01 >= d[2] ? m01 : d[2];
    }
}

// Whether row[j] == (root[j] == ri) for every j.
BM_CELL_CLONES bool row_consistent(const uint8_t* row, const int64_t* root, int64_t ri, int64_t n) {
    int bad = 0;
    for (int64_t j = 0; j < n; ++j) bad |= int(row[j]) ^ int(root[j] == ri);
    return bad == 0;
}

// Groups of mutually close positions: root[j] is the first i with close(i, j)
// (np.argmax of the close matrix's column j); consistent says closeness is an
// equivalence (close(i, j) exactly when root[i] == root[j]). The matrix is
// symmetric (rint is odd), so one triangle is computed; non-finite input
// takes the scalar NaN-propagating route of pbc_max.
py::tuple pbc_groups(const carray<double>& a, double tol, double margin) {
    check_positions(a, "positions");
    const int64_t n = a.shape(0);
    py::array_t<int64_t> root_a(n);
    int64_t* root = root_a.mutable_data();
    const double* p = a.data();
    bool ambiguous = false, consistent = true;
    {
        py::gil_scoped_release nogil;
        bool finite = true;
        for (int64_t i = 0; i < 3 * n; ++i) finite &= std::isfinite(p[i]);
        const size_t count = static_cast<size_t>(n);
        std::vector<double> x(count), y(count), z(count), mx(count);
        for (int64_t i = 0; i < n; ++i) {
            x[size_t(i)] = p[3 * i];
            y[size_t(i)] = p[3 * i + 1];
            z[size_t(i)] = p[3 * i + 2];
        }
        std::vector<uint8_t> close(count * count, 0);
        for (int64_t i = 0; i < n; ++i) {
            if (finite) {
                row_max(x[size_t(i)], y[size_t(i)], z[size_t(i)], x.data(), y.data(), z.data(), i, n, mx.data());
            } else {
                for (int64_t j = i; j < n; ++j) mx[size_t(j)] = pbc_max(p + 3 * i, p + 3 * j);
            }
            uint8_t* row = close.data() + size_t(i) * count;
            row[i] = mx[size_t(i)] < tol;
            for (int64_t j = i + 1; j < n; ++j) {
                const double v = mx[size_t(j)];
                ambiguous |= std::fabs(v - tol) <= margin;
                const uint8_t c = v < tol;
                row[j] = c;
                close[size_t(j) * count + size_t(i)] = c;
            }
            // Row i now holds every close(r, i), r <= i (the matrix is symmetric):
            // its first close entry is column i's first close row.
            root[i] = 0;  // argmax of an all-False column is 0
            for (int64_t r = 0; r <= i; ++r)
                if (row[r]) {
                    root[i] = r;
                    break;
                }
        }
        for (int64_t i = 0; i < n && consistent; ++i)
            consistent = row_consistent(close.data() + size_t(i) * count, root, root[i], n);
    }
    return py::make_tuple(root_a, consistent, ambiguous);
}

}  // namespace

void bind_cifread(py::module_& m) {
    m.doc() = "Periodic closeness of fractional positions for the fast CIF route.";
    m.def("pbc_close", &pbc_close, py::arg("a"), py::arg("b"), py::arg("tol"), py::arg("margin"),
          "(close[n, m], ambiguous): max_k |d_k - rint(d_k)| < tol for d = a_i - b_j; ambiguous when some "
          "pair lies within margin of tol.");
    m.def("pbc_groups", &pbc_groups, py::arg("positions"), py::arg("tol"), py::arg("margin"),
          "(root, consistent, ambiguous) of pbc_close(positions, positions): root[j] = first i close to j; "
          "consistent when closeness is an equivalence.");
}

}  // namespace bm
