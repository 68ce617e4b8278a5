// _core.batch: batch set metrics over pre-encoded sets.
//   from_counts   (tp, |P|, |G|) arrays
//   from_bitmasks one uint64 bitmask per set (up to 64 labels, e.g. option letters)
//   from_csr      sets as sorted, unique int64 keys in CSR form (offsets, keys)
// Inputs are validated with the same checks, in the same order, as the Python
// reference (benchmint/metrics/batch_ref.py); the error of the lowest row wins.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "arrays.hpp"
#include "metrics.hpp"
#include "parallel.hpp"

namespace py = pybind11;

namespace bm {
namespace {

struct Outputs {
    py::dict dict;
    int32_t *tp, *fp, *fn;
    double *em, *spc, *sip, *jac, *prec, *rec, *f1, *jpen, *f1pen;
    bool* over;

    // Fresh arrays, or the caller's (reused buffers skip the page faults of
    // new memory, which cost more than the metrics themselves).
    Outputs(int64_t n, const py::object& given) {
        const bool reuse = !given.is_none();
        py::dict src = reuse ? py::dict(given) : py::dict();
        if (reuse) dict = src;
        auto get = [&](const char* name, auto tag) {
            using T = decltype(tag);
            if (!reuse) {
                carray<T> a(n);
                dict[name] = a;
                return a.mutable_data();
            }
            if (!src.contains(name)) throw py::value_error(std::string("out is missing the array '") + name + "'");
            py::array arr = src[name].cast<py::array>();
            if (!arr.dtype().is(py::dtype::of<T>()) || arr.ndim() != 1 || arr.shape(0) != n ||
                !(arr.flags() & py::array::c_style) || !arr.writeable())
                throw py::value_error(std::string("out['") + name + "'] must be a writable contiguous 1-D " +
                                      std::string(py::str(py::dtype::of<T>())) + " array of length " +
                                      std::to_string(n));
            return static_cast<T*>(arr.mutable_data());
        };
        tp = get("tp", int32_t{});
        fp = get("fp", int32_t{});
        fn = get("fn", int32_t{});
        em = get("em", double{});
        spc = get("spc", double{});
        sip = get("sip_f1", double{});
        jac = get("jaccard", double{});
        prec = get("precision", double{});
        rec = get("recall", double{});
        f1 = get("f1", double{});
        jpen = get("j_pen", double{});
        f1pen = get("f1_pen", double{});
        over = get("over_predicted", bool{});
    }

    inline void put(int64_t i, const MetricRow& r) {
        tp[i] = r.tp;
        fp[i] = r.fp;
        fn[i] = r.fn;
        em[i] = r.em;
        spc[i] = r.spc;
        sip[i] = r.sip_f1;
        jac[i] = r.jaccard;
        prec[i] = r.precision;
        rec[i] = r.recall;
        f1[i] = r.f1;
        jpen[i] = r.j_pen;
        f1pen[i] = r.f1_pen;
        over[i] = r.over_predicted;
    }
};

void check_same_length(int64_t a, int64_t b) {
    if (a != b)
        throw py::value_error("pred and gold have different lengths (" + std::to_string(a) + " vs " +
                              std::to_string(b) + ")");
}

void raise_row(const RowError& err) {
    if (err.row >= 0) throw py::value_error(err.message);
}

py::dict from_counts(carray<int32_t> tp, carray<int32_t> n_pred, carray<int32_t> n_gold, double lam, double gamma,
                     int workers, py::object out_arrays) {
    const int64_t n = tp.size();
    check_same_length(n, n_pred.size());
    check_same_length(n, n_gold.size());
    workers = resolve_workers(workers);
    Outputs out(n, out_arrays);
    const MetricParams prm{lam, gamma};
    const int32_t *t = tp.data(), *p = n_pred.data(), *g = n_gold.data();
    RowError err;
    {
        py::gil_scoped_release nogil;
        err = parallel_for(n, workers, [&](int64_t b, int64_t e) -> RowError {
            for (int64_t i = b; i < e; ++i) {
                if (t[i] < 0 || p[i] < 0 || g[i] < 0 || t[i] > p[i] || t[i] > g[i])
                    return {i, "row " + std::to_string(i) + ": counts must satisfy 0 <= tp <= min(n_pred, n_gold)"};
                out.put(i, metrics_from_counts(t[i], p[i], g[i], prm));
            }
            return {};
        });
    }
    raise_row(err);
    return out.dict;
}

py::dict from_bitmasks(carray<uint64_t> pred, carray<uint64_t> gold, double lam, double gamma, int workers,
                       py::object out_arrays) {
    const int64_t n = pred.size();
    check_same_length(n, gold.size());
    workers = resolve_workers(workers);
    Outputs out(n, out_arrays);
    const MetricParams prm{lam, gamma};
    const uint64_t *p = pred.data(), *g = gold.data();
    {
        py::gil_scoped_release nogil;
        parallel_for(n, workers, [&](int64_t b, int64_t e) -> RowError {
            for (int64_t i = b; i < e; ++i) {
                const int32_t tp = __builtin_popcountll(p[i] & g[i]);
                out.put(i, metrics_from_counts(tp, __builtin_popcountll(p[i]), __builtin_popcountll(g[i]), prm));
            }
            return {};
        });
    }
    return out.dict;
}

void check_offsets_ends(const char* side, const int64_t* off, int64_t n_rows, int64_t n_keys) {
    if (off[0] != 0 || off[n_rows] != n_keys)
        throw py::value_error(std::string(side) +
                              " offsets must start at 0 and end at len(keys) = " + std::to_string(n_keys));
}

// Row checks in reference order: offsets, then strictly increasing keys.
inline bool check_row(const char* side, int64_t i, const int64_t* off, const int64_t* keys, RowError& err) {
    const int64_t b = off[i], e = off[i + 1];
    if (e < b) {
        err = {i, std::string(side) + " row " + std::to_string(i) + ": offsets decrease"};
        return false;
    }
    for (int64_t k = b + 1; k < e; ++k)
        if (keys[k] <= keys[k - 1]) {
            err = {i, std::string(side) + " row " + std::to_string(i) +
                          ": keys are not strictly increasing (sort and deduplicate each set)"};
            return false;
        }
    return true;
}

py::dict from_csr(carray<int64_t> pred_offsets, carray<int64_t> pred_keys, carray<int64_t> gold_offsets,
                  carray<int64_t> gold_keys, double lam, double gamma, int workers, py::object out_arrays) {
    if (pred_offsets.size() < 1 || gold_offsets.size() < 1)
        throw py::value_error("offsets must have length n + 1 >= 1");
    const int64_t n = pred_offsets.size() - 1;
    check_same_length(n, gold_offsets.size() - 1);
    workers = resolve_workers(workers);
    const int64_t *po = pred_offsets.data(), *pk = pred_keys.data();
    const int64_t *go = gold_offsets.data(), *gk = gold_keys.data();
    check_offsets_ends("pred", po, n, pred_keys.size());
    check_offsets_ends("gold", go, n, gold_keys.size());
    Outputs out(n, out_arrays);
    const MetricParams prm{lam, gamma};
    RowError err;
    {
        py::gil_scoped_release nogil;
        err = parallel_for(n, workers, [&](int64_t b, int64_t e) -> RowError {
            RowError row_err;
            for (int64_t i = b; i < e; ++i) {
                if (!check_row("pred", i, po, pk, row_err) || !check_row("gold", i, go, gk, row_err)) return row_err;
                // Sorted-merge intersection.
                int64_t a = po[i], ae = po[i + 1], c = go[i], ce = go[i + 1];
                int32_t tp = 0;
                while (a < ae && c < ce) {
                    const int64_t x = pk[a], y = gk[c];
                    tp += (x == y);
                    a += (x <= y);
                    c += (y <= x);
                }
                out.put(i, metrics_from_counts(tp, int32_t(po[i + 1] - po[i]), int32_t(go[i + 1] - go[i]), prm));
            }
            return {};
        });
    }
    raise_row(err);
    return out.dict;
}

}  // namespace

void bind_batch(py::module_& m) {
    m.doc() = "Batch set metrics (EM, SPC, SIP-F1, Jaccard, P/R/F1, penalised) over pre-encoded sets.";
    m.def("from_counts", &from_counts, py::arg("tp"), py::arg("n_pred"), py::arg("n_gold"), py::arg("sip_lambda"),
          py::arg("sip_gamma"), py::arg("workers") = 1, py::arg("out") = py::none());
    m.def("from_bitmasks", &from_bitmasks, py::arg("pred"), py::arg("gold"), py::arg("sip_lambda"),
          py::arg("sip_gamma"), py::arg("workers") = 1, py::arg("out") = py::none());
    m.def("from_csr", &from_csr, py::arg("pred_offsets"), py::arg("pred_keys"), py::arg("gold_offsets"),
          py::arg("gold_keys"), py::arg("sip_lambda"), py::arg("sip_gamma"), py::arg("workers") = 1,
          py::arg("out") = py::none());
}

}  // namespace bm
