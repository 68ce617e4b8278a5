"""Model "personalities" (spm-bench §4.2, Appendix B) and confidence calibration.

Personality rules, applied in order to one model's items (thresholds in
``PersonalityRules``):
  over  = share of items with |P| > |G| (over-selection),
  under = share of items with ∅ ≠ P ⊊ G (under-selection, no wrong option),
  prec / rec = macro precision / recall.
  1. Gambler      over >= gambler_over, or (over > under and prec < gambler_precision):
                  selects more than asked on most items, or mostly wrongly.
  2. Aggressive   over > under: its typical error is adding options.
  3. Wise         prec >= wise_precision and rec >= wise_recall: precise and nearly complete (defaults 0.9, 0.9).
  4. Conservative otherwise: precise-leaning, its typical error is leaving options out.
The SPC − SIP-F1 gap is reported beside the label. Note that by eq. (2)-(5)
an over-selecting item scores SPC = 0 but SIP-F1 > 0, so over-selection
shrinks the gap, while under-selection widens it (SPC |P|/|G| vs 0.6·F1γ);
the gap alone therefore does not order the personalities as §4.1 suggests,
and the labels rest on the selection behaviour itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class PersonalityRules:
    gambler_over: float = 0.5
    gambler_precision: float = 0.5
    wise_precision: float = 0.9
    wise_recall: float = 0.9


def personality(tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray, spc_mean: float, sip_mean: float,
                precision_mean: float, recall_mean: float, rules: PersonalityRules = PersonalityRules()) -> dict:
    n = len(tp)
    if n == 0:
        return {"label": None, "reason": "no items"}
    over = float(np.mean(n_pred > n_gold))
    under = float(np.mean((tp == n_pred) & (n_pred > 0) & (n_pred < n_gold)))
    if over >= rules.gambler_over or (over > under and precision_mean < rules.gambler_precision):
        label, reason = "Gambler", "over-selects on most items or mostly wrongly"
    elif over > under:
        label, reason = "Aggressive", "over-selection is its dominant error"
    elif precision_mean >= rules.wise_precision and recall_mean >= rules.wise_recall:
        label, reason = "Wise", "precise and nearly complete"
    else:
        label, reason = "Conservative", "errs by leaving options out rather than adding wrong ones"
    return {
        "label": label,
        "reason": reason,
        "spc_minus_sip_f1": spc_mean - sip_mean,
        "over_selection_rate": over,
        "under_selection_rate": under,
        "precision": precision_mean,
        "recall": recall_mean,
        "rules": asdict(rules),
    }


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank (as scipy.stats.rankdata's default)."""
    order = np.argsort(x)
    xs = x[order]
    new = np.empty(len(x), dtype=bool)
    new[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(x)))
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(starts + (counts + 1) / 2, counts)
    return ranks


def class_average_ranks(cls: np.ndarray, class_values: np.ndarray) -> np.ndarray:
    """average_ranks(class_values[cls]) in O(n + K log K): items of a class share one value."""
    counts = np.bincount(cls, minlength=len(class_values)).astype(np.float64)
    order = np.argsort(class_values)
    vals, cnt = class_values[order], counts[order]
    first = np.ones(len(vals), dtype=bool)
    np.not_equal(vals[1:], vals[:-1], out=first[1:])
    group = np.cumsum(first) - 1
    group_count = np.bincount(group, weights=cnt)
    group_start = np.concatenate([[0.0], np.cumsum(group_count)[:-1]])
    rank = np.empty(len(vals))
    rank[order] = (group_start + (group_count + 1) / 2)[group]
    return rank[cls]


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return None  # undefined for a constant column
    da, db = a - a.mean(), b - b.mean()
    return float(np.sum(da * db) / np.sqrt(np.sum(da * da) * np.sum(db * db)))


class _Ranks:
    """Average ranks of a column on a subset of items, computed once per subset."""

    def __init__(self, values: np.ndarray, classes: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.values, self.classes, self.cache = values, classes, {}

    def on(self, mask: np.ndarray) -> np.ndarray:
        key = mask.tobytes()
        if key not in self.cache:
            if self.classes is not None:
                cls, class_values = self.classes
                self.cache[key] = class_average_ranks(cls[mask], class_values)
            else:
                self.cache[key] = average_ranks(self.values[mask])
        return self.cache[key]


def calibration(score: np.ndarray, confidence: np.ndarray, difficulty: np.ndarray, tokens: np.ndarray,
                n_bins: int = 10, score_classes: tuple[np.ndarray, np.ndarray] | None = None) -> dict | None:
    """Stated confidence against the per-item score; None when no item carries a confidence, difficulty or tokens.

    ECE uses ``n_bins`` equal-width bins on [0, 1] (confidence 1.0 in the top bin).
    Spearman correlations use average ranks for ties and are null when a column is constant.
    ``score_classes`` = (class per item, value per class) lets score ranks skip a sort.
    """
    out: dict = {}
    has_conf = ~np.isnan(confidence)
    has_diff = ~np.isnan(difficulty)
    has_tok = ~np.isnan(tokens)
    if not (has_conf.any() or has_diff.any() or has_tok.any()):
        return None
    r_score, r_conf, r_diff = _Ranks(score, score_classes), _Ranks(confidence), _Ranks(difficulty)

    def spearman(ra: _Ranks, rb: _Ranks, mask: np.ndarray) -> float | None:
        return _pearson(ra.on(mask), rb.on(mask)) if mask.sum() >= 2 else None

    if has_conf.any():
        c, s = confidence[has_conf], score[has_conf]
        bins = np.minimum((c * n_bins).astype(np.int64), n_bins - 1)
        n_b = np.bincount(bins, minlength=n_bins)
        used = n_b > 0
        gap = np.abs(np.bincount(bins, c, n_bins)[used] - np.bincount(bins, s, n_bins)[used]) / n_b[used]
        out.update(
            n_with_confidence=int(has_conf.sum()),
            mean_confidence=float(c.mean()),
            mean_score=float(s.mean()),
            ece=float(np.sum(n_b[used] / len(c) * gap)),
            brier=float(np.mean((c - s) ** 2)),
            spearman_confidence_score=spearman(r_conf, r_score, has_conf),
        )
    if has_diff.any():
        both = has_conf & has_diff
        out["n_with_difficulty"] = int(has_diff.sum())
        out["mean_difficulty"] = float(difficulty[has_diff].mean())
        out["spearman_difficulty_score"] = spearman(r_diff, r_score, has_diff)
        out["spearman_difficulty_confidence"] = spearman(r_diff, r_conf, both) if both.any() else None
    if has_tok.any():
        out["mean_tokens"] = float(tokens[has_tok].mean())
    return out
