// _core.geometry: boxes through affine maps (thumbnail <-> page <-> crop pixels), many at once.
// Each output box is the bounding box of the four mapped corners, computed with
// the same operations in the same order as benchmint/pdf/geometry_ref.py. A NaN
// among the four corners makes that side NaN, as NumPy's min and max do.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "arrays.hpp"
#include "parallel.hpp"

namespace py = pybind11;

namespace bm {
namespace {

// std::min/max skip a NaN or not depending on where it sits; NumPy's propagate it.
inline double nan_min(const double v[4]) {
    if (std::isnan(v[0]) || std::isnan(v[1]) || std::isnan(v[2]) || std::isnan(v[3]))
        return std::numeric_limits<double>::quiet_NaN();
    return std::min({v[0], v[1], v[2], v[3]});
}

inline double nan_max(const double v[4]) {
    if (std::isnan(v[0]) || std::isnan(v[1]) || std::isnan(v[2]) || std::isnan(v[3]))
        return std::numeric_limits<double>::quiet_NaN();
    return std::max({v[0], v[1], v[2], v[3]});
}

py::array_t<double> transform_boxes(const carray<double>& boxes, const std::vector<double>& m, int workers) {
    if (boxes.ndim() != 2 || boxes.shape(1) != 4) throw py::value_error("boxes must be (x0, y0, x1, y1) rows");
    if (m.size() != 6) throw py::value_error("the matrix needs 6 numbers (a, b, c, d, e, f)");
    workers = resolve_workers(workers);
    const int64_t n = boxes.shape(0);
    py::array_t<double> out({n, int64_t(4)});
    const double* in = boxes.data();
    double* o = out.mutable_data();
    const double a = m[0], b = m[1], c = m[2], d = m[3], e = m[4], f = m[5];
    {
        py::gil_scoped_release nogil;
        parallel_for(n, workers, [&](int64_t lo, int64_t hi) -> RowError {
            for (int64_t i = lo; i < hi; ++i) {
                const double* r = in + 4 * i;
                const double xs[4] = {r[0], r[2], r[0], r[2]}, ys[4] = {r[1], r[1], r[3], r[3]};
                double tx[4], ty[4];
                for (int k = 0; k < 4; ++k) {
                    tx[k] = a * xs[k] + c * ys[k] + e;
                    ty[k] = b * xs[k] + d * ys[k] + f;
                }
                double* w = o + 4 * i;
                w[0] = nan_min(tx);
                w[1] = nan_min(ty);
                w[2] = nan_max(tx);
                w[3] = nan_max(ty);
            }
            return {};
        });
    }
    return out;
}

}  // namespace

void bind_geometry(py::module_& m) {
    m.doc() = "Boxes through affine maps, vectorised and threaded.";
    m.def("transform_boxes", &transform_boxes, py::arg("boxes"), py::arg("matrix"), py::arg("workers") = 1,
          "Bounding boxes of the mapped corners: x' = a*x + c*y + e, y' = b*x + d*y + f.");
}

}  // namespace bm
