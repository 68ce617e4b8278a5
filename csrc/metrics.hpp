// Set metrics from the three counts (tp, |P|, |G|). Every metric of
// spm-bench §3 and crystalxrd-bench §2.4 is a function of these counts, so
// the bitmask, CSR and streaming paths share this one definition. The
// expression order matches benchmint/metrics/batch_ref.py exactly so the
// compiled and reference results are equal bit for bit.
#pragma once
#include <cstdint>

namespace bm {

struct MetricParams {
    double sip_lambda = 0.6;
    double sip_gamma = 6.0;
};

struct MetricRow {
    int32_t tp, fp, fn;
    double em, spc, sip_f1, jaccard, precision, recall, f1, j_pen, f1_pen;
    bool over_predicted;
};

inline MetricRow metrics_from_counts(int32_t tp, int32_t n_pred, int32_t n_gold, const MetricParams& prm) {
    MetricRow r;
    r.tp = tp;
    r.fp = n_pred - tp;
    r.fn = n_gold - tp;
    r.over_predicted = n_pred > n_gold;
    if (r.fp == 0 && r.fn == 0) {  // P == G, including P = G = {} (vacuously correct)
        r.em = r.spc = r.sip_f1 = r.jaccard = r.precision = r.recall = r.f1 = r.j_pen = r.f1_pen = 1.0;
        return r;
    }
    const double dtp = tp, dfp = r.fp, dnp = n_pred, dng = n_gold;
    r.em = 0.0;
    r.spc = (r.fp == 0 && n_pred > 0) ? dnp / dng : 0.0;  // non-empty proper subset
    r.sip_f1 = tp > 0 ? (prm.sip_lambda * (2.0 * dtp)) / ((dtp + prm.sip_gamma * dfp) + dng) : 0.0;
    r.jaccard = dtp / ((dnp + dng) - dtp);
    r.precision = n_pred > 0 ? dtp / dnp : 0.0;
    r.recall = n_gold > 0 ? dtp / dng : 0.0;
    r.f1 = tp > 0 ? (2.0 * dtp) / (dnp + dng) : 0.0;
    const double penalty = n_pred <= n_gold ? 1.0 : dng / dnp;
    r.j_pen = r.jaccard * penalty;
    r.f1_pen = r.f1 * penalty;
    return r;
}

}  // namespace bm
