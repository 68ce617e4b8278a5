// benchmint._core: the one compiled module; each source file binds one submodule.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace bm {
void bind_metrics(py::module_& m);
void bind_extract(py::module_& m);
void bind_scoring(py::module_& m);
void bind_xrd(py::module_& m);
void bind_pdf(py::module_& m);
void bind_sticks(py::module_& m);
void bind_geometry(py::module_& m);
void bind_cell(py::module_& m);
}

PYBIND11_MODULE(_core, m) {
    m.doc() = "Compiled kernels of benchmint. Call them through the Python modules, which check inputs.";
    auto metrics = m.def_submodule("metrics");
    bm::bind_metrics(metrics);
    auto ex = m.def_submodule("extract");
    bm::bind_extract(ex);
    auto scoring = m.def_submodule("scoring");
    bm::bind_scoring(scoring);
    auto xrd = m.def_submodule("xrd");
    bm::bind_xrd(xrd);
    auto pdf = m.def_submodule("pdf");
    bm::bind_pdf(pdf);
    auto sticks = m.def_submodule("sticks");
    bm::bind_sticks(sticks);
    auto geometry = m.def_submodule("geometry");
    bm::bind_geometry(geometry);
    auto cell = m.def_submodule("cell");
    bm::bind_cell(cell);
}
