// _core.cell: periodic closeness of fractional positions, the inner loop of
// the fast CIF route (benchmint/xrd/cifread.py).
//
//   pbc_close(a, b, tol, margin) -> (close[n, m], ambiguous)
//       close[i, j] = max_k |d_k - rint(d_k)| < tol with d = a_i - b_j, the
//       same operations as the NumPy reference (rint rounds half to even, as
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
// trick; larger values are integers already. Inlined, unlike nearbyint.
inline double rint_even(double v) {
    const double a = std::fabs(v);
    if (!(a < 4503599627370496.0)) return v;
    volatile double big = 4503599627370496.0;  // keeps the compiler from folding (a + 2^52) - 2^52
    const double r = (a + big) - big;
    return std::copysign(r, v);
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

// Groups of mutually close positions: root[j] is the first i with close(i, j)
// (np.argmax of the close matrix's column j); consistent says closeness is an
// equivalence (close(i, j) exactly when root[i] == root[j]). The matrix is
// symmetric (rint is odd), so one triangle is computed.
py::tuple pbc_groups(const carray<double>& a, double tol, double margin) {
    check_positions(a, "positions");
    const int64_t n = a.shape(0);
    py::array_t<int64_t> root_a(n);
    int64_t* root = root_a.mutable_data();
    const double* p = a.data();
    bool ambiguous = false, consistent = true;
    {
        py::gil_scoped_release nogil;
        std::vector<uint8_t> close(size_t(n) * size_t(n), 0);
        for (int64_t i = 0; i < n; ++i) {
            close[size_t(i) * n + i] = pbc_max(p + 3 * i, p + 3 * i) < tol;
            for (int64_t j = i + 1; j < n; ++j) {
                const double mx = pbc_max(p + 3 * i, p + 3 * j);
                ambiguous |= std::fabs(mx - tol) <= margin;
                const uint8_t c = mx < tol;
                close[size_t(i) * n + j] = c;
                close[size_t(j) * n + i] = c;
            }
        }
        for (int64_t j = 0; j < n; ++j) {
            root[j] = 0;  // argmax of an all-False column is 0
            for (int64_t i = 0; i < n; ++i)
                if (close[size_t(i) * n + j]) {
                    root[j] = i;
                    break;
                }
        }
        for (int64_t i = 0; i < n && consistent; ++i)
            for (int64_t j = 0; j < n; ++j)
                if (bool(close[size_t(i) * n + j]) != (root[i] == root[j])) {
                    consistent = false;
                    break;
                }
    }
    return py::make_tuple(root_a, consistent, ambiguous);
}

}  // namespace

void bind_cell(py::module_& m) {
    m.doc() = "Periodic closeness of fractional positions for the fast CIF route.";
    m.def("pbc_close", &pbc_close, py::arg("a"), py::arg("b"), py::arg("tol"), py::arg("margin"),
          "(close[n, m], ambiguous): max_k |d_k - rint(d_k)| < tol for d = a_i - b_j; ambiguous when some "
          "pair lies within margin of tol.");
    m.def("pbc_groups", &pbc_groups, py::arg("positions"), py::arg("tol"), py::arg("margin"),
          "(root, consistent, ambiguous) of pbc_close(positions, positions): root[j] = first i close to j; "
          "consistent when closeness is an equivalence.");
}

}  // namespace bm
