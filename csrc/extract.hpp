// Answer extraction from raw model output (UTF-8), compiled port of
// benchmint/metrics/extract_ref.py. Each function either decides exactly what the
// Python reference returns, or answers Undecided and the caller falls back to
// the reference for that output.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace bm {

enum class Extracted { Undecided, None, Found };

// Multiple-choice letters as a bitmask: bit k is letter 'A' + k.
Extracted extract_choices(std::string_view text, uint32_t& letters);

// One Miller-index tuple: n = 3 or 4 indices in idx[0..n).
struct Hkl {
    int32_t n = 0;
    int64_t idx[4] = {0, 0, 0, 0};
};

// Miller indices, unique and sorted like Python tuples (zeros kept, as the reference does).
Extracted extract_hkls(std::string_view text, std::vector<Hkl>& out);

}  // namespace bm
