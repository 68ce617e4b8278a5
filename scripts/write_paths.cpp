// Ways to write score rows to one file, timed: what the stream's row writer does, and what several threads could.
//
//   g++ -O2 -std=c++17 -pthread -o /tmp/write_paths scripts/write_paths.cpp
//   /tmp/write_paths FILE MODE THREADS MB
//
// Batches of 80 pieces of about 60 kB (a 4 MiB read's worth of rows, a parse block of 256 rows a piece) are
// written until MB megabytes, then the file is removed. MODE:
//   fwrite  one fwrite() a piece, on one thread (the row writer before writev)
//   writev  one writev() a batch, on one thread (the row writer now)
//   pwrite  THREADS threads each pwrite() every THREADS-th piece of a batch at its offset
//   mmap    each batch's region fallocate()d, mapped shared, and THREADS threads each populate
//           (MADV_POPULATE_WRITE) and copy their share of the pieces into it
// Prints wall and process CPU seconds, and for mmap the wall of its steps.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double wall_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu_now() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + 1e-6 * double(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

[[noreturn]] void fail(const char* what) {
    std::perror(what);
    std::exit(1);
}

template <class Fn>
void on_threads(int n, Fn&& fn) {  // fn(t) for t in [0, n), on n threads
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) threads.emplace_back([&fn, t] { fn(t); });
    for (auto& th : threads) th.join();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s FILE fwrite|writev|pwrite|mmap THREADS MB\n", argv[0]);
        return 2;
    }
    const std::string path = argv[1], mode = argv[2];
    const int threads = std::atoi(argv[3]);
    const size_t total = size_t(std::atol(argv[4])) * 1000000;
    const size_t n_pieces = 80;
    std::vector<std::string> pieces(n_pieces);
    std::vector<size_t> off(n_pieces + 1, 0);  // each piece's offset in its batch
    for (size_t i = 0; i < n_pieces; ++i) {
        pieces[i].assign(60000 + i * 37, char('a' + i % 26));
        pieces[i].back() = '\n';
        off[i + 1] = off[i] + pieces[i].size();
    }
    const size_t batch = off[n_pieces], n_batches = total / batch;
    const long page = sysconf(_SC_PAGESIZE);
    double t_grow = 0, t_copy = 0, t_unmap = 0;
    const double wall0 = wall_now(), cpu0 = cpu_now();
    if (mode == "fwrite") {
        FILE* fh = std::fopen(path.c_str(), "wb");
        if (!fh) fail("fopen");
        for (size_t b = 0; b < n_batches; ++b)
            for (const auto& p : pieces)
                if (std::fwrite(p.data(), 1, p.size(), fh) != p.size()) fail("fwrite");
        if (std::fclose(fh) != 0) fail("fclose");
    } else {
        const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) fail("open");
        std::vector<iovec> iov;
        for (const auto& p : pieces) iov.push_back({const_cast<char*>(p.data()), p.size()});
        for (size_t b = 0; b < n_batches; ++b) {
            const off_t at = off_t(b * batch);
            if (mode == "writev") {
                if (writev(fd, iov.data(), int(iov.size())) != ssize_t(batch)) fail("writev");
            } else if (mode == "pwrite") {
                on_threads(threads, [&](int t) {
                    for (size_t i = size_t(t); i < n_pieces; i += size_t(threads))
                        if (pwrite(fd, pieces[i].data(), pieces[i].size(), at + off_t(off[i])) !=
                            ssize_t(pieces[i].size()))
                            fail("pwrite");
                });
            } else if (mode == "mmap") {
                const double t0 = wall_now();
                if (fallocate(fd, 0, at, off_t(batch)) != 0) fail("fallocate");
                const off_t base = at / page * page;
                const size_t len = size_t(at - base) + batch;
                void* map = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
                if (map == MAP_FAILED) fail("mmap");
                char* dst = static_cast<char*>(map) + (at - base);
                const double t1 = wall_now();
                on_threads(threads, [&](int t) {
                    const size_t lo = n_pieces * size_t(t) / size_t(threads);
                    const size_t hi = n_pieces * size_t(t + 1) / size_t(threads);
                    const uintptr_t first = uintptr_t(dst + off[lo]) / uintptr_t(page) * uintptr_t(page);
                    if (hi > lo && madvise(reinterpret_cast<void*>(first), uintptr_t(dst + off[hi]) - first,
                                           MADV_POPULATE_WRITE) != 0)
                        fail("madvise");
                    for (size_t i = lo; i < hi; ++i) std::memcpy(dst + off[i], pieces[i].data(), pieces[i].size());
                });
                const double t2 = wall_now();
                munmap(map, len);
                t_grow += t1 - t0;
                t_copy += t2 - t1;
                t_unmap += wall_now() - t2;
            } else {
                std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
                return 2;
            }
        }
        if (close(fd) != 0) fail("close");
    }
    const double wall = wall_now() - wall0, cpu = cpu_now() - cpu0;
    struct stat st{};
    stat(path.c_str(), &st);
    std::printf("%-6s threads %d  %zu MB  wall %.3f s  cpu %.3f s  size %lld", mode.c_str(), threads, total / 1000000,
                wall, cpu, static_cast<long long>(st.st_size));
    if (mode == "mmap") std::printf("  (fallocate+map %.3f, populate+copy %.3f, unmap %.3f)", t_grow, t_copy, t_unmap);
    std::printf("\n");
    unlink(path.c_str());
    return 0;
}
