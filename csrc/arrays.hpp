// NumPy arrays as the kernels take them: C-contiguous, converted on the way in if needed.
#pragma once
#include <pybind11/numpy.h>

namespace bm {

template <class T>
using carray = pybind11::array_t<T, pybind11::array::c_style | pybind11::array::forcecast>;

constexpr double kPi = 3.14159265358979323846;

}  // namespace bm
