// Minimal fork-join helper: split [0, n) into contiguous chunks, one per
// worker thread. Each chunk reports the first failing index it saw so the
// caller can raise the error of the lowest index, as a serial loop would.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace bm {

inline int resolve_workers(int workers) {
    if (workers == 0 || workers < -1) throw std::invalid_argument("workers must be -1 (all cores) or >= 1");
    if (workers == -1) {
        unsigned hc = std::thread::hardware_concurrency();
        return hc == 0 ? 1 : static_cast<int>(hc);
    }
    return workers;
}

struct RowError {
    int64_t row = -1;  // -1: no error
    std::string message;
};

// fn(begin, end) -> RowError for the first failing row of the chunk.
template <class Fn>
RowError parallel_for(int64_t n, int workers, Fn&& fn) {
    int nthreads = static_cast<int>(std::min<int64_t>(std::max(1, workers), std::max<int64_t>(1, n / 4096)));
    if (nthreads <= 1) return fn(int64_t(0), n);
    std::vector<RowError> errors(nthreads);
    std::vector<std::thread> threads;
    threads.reserve(nthreads);
    int64_t step = (n + nthreads - 1) / nthreads;
    for (int t = 0; t < nthreads; ++t) {
        int64_t b = std::min<int64_t>(n, t * step), e = std::min<int64_t>(n, b + step);
        threads.emplace_back([&, t, b, e] { errors[t] = fn(b, e); });
    }
    for (auto& th : threads) th.join();
    for (auto& err : errors)
        if (err.row >= 0) return err;  // chunks are ordered: the first error is the lowest row
    return {};
}

// Dynamic scheduling for uneven work (lines of very different lengths):
// threads take blocks of `block` items from a shared counter. fn(begin, end).
template <class Fn>
void parallel_blocks(int64_t n, int workers, int64_t block, Fn&& fn) {
    const int nthreads = static_cast<int>(std::min<int64_t>(std::max(1, workers), (n + block - 1) / block));
    if (nthreads <= 1) {
        if (n > 0) fn(int64_t(0), n);
        return;
    }
    std::atomic<int64_t> next{0};
    auto run = [&] {
        for (int64_t b; (b = next.fetch_add(block)) < n;) fn(b, std::min(n, b + block));
    };
    std::vector<std::thread> threads;
    threads.reserve(nthreads - 1);
    for (int t = 1; t < nthreads; ++t) threads.emplace_back(run);
    run();
    for (auto& th : threads) th.join();
}

}  // namespace bm
