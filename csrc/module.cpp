// benchmint._core: the one compiled module. Each source file binds one
// submodule named after the Python module it serves: csrc/X.cpp binds
// _core.X, called only by benchmint's X.py (whose reference is X_ref.py).
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace bm {
void bind_batch(py::module_& m);
void bind_extract(py::module_& m);
void bind_pipeline(py::module_& m);
void bind_profile(py::module_& m);
void bind_triage(py::module_& m);
void bind_sticks(py::module_& m);
void bind_geometry(py::module_& m);
void bind_cifread(py::module_& m);
}  // namespace bm

PYBIND11_MODULE(_core, m) {
    m.doc() = "Compiled kernels of benchmint. Call them through the Python modules, which check inputs.";
    auto batch = m.def_submodule("batch");
    bm::bind_batch(batch);
    auto extract = m.def_submodule("extract");
    bm::bind_extract(extract);
    auto pipeline = m.def_submodule("pipeline");
    bm::bind_pipeline(pipeline);
    auto profile = m.def_submodule("profile");
    bm::bind_profile(profile);
    auto triage = m.def_submodule("triage");
    bm::bind_triage(triage);
    auto sticks = m.def_submodule("sticks");
    bm::bind_sticks(sticks);
    auto geometry = m.def_submodule("geometry");
    bm::bind_geometry(geometry);
    auto cifread = m.def_submodule("cifread");
    bm::bind_cifread(cifread);
}
