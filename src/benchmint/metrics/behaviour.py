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


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    from scipy.stats import rankdata

    if len(a) < 2:
        return None
    ra, rb = rankdata(a), rankdata(b)
    if ra.std() == 0 or rb.std() == 0:
        return None  # undefined for a constant column
    return float(np.corrcoef(ra, rb)[0, 1])


def calibration(score: np.ndarray, confidence: np.ndarray, difficulty: np.ndarray, tokens: np.ndarray,
                n_bins: int = 10) -> dict | None:
    """Stated confidence against the per-item score; None when no item carries a confidence.

    ECE uses ``n_bins`` equal-width bins on [0, 1] (confidence 1.0 in the top bin).
    Spearman correlations use average ranks for ties and are null when a column is constant.
    """
    out: dict = {}
    has_conf = ~np.isnan(confidence)
    has_diff = ~np.isnan(difficulty)
    has_tok = ~np.isnan(tokens)
    if not (has_conf.any() or has_diff.any() or has_tok.any()):
        return None
    if has_conf.any():
        c, s = confidence[has_conf], score[has_conf]
        bins = np.minimum((c * n_bins).astype(np.int64), n_bins - 1)
        ece = 0.0
        for b in range(n_bins):
            sel = bins == b
            if sel.any():
                ece += sel.sum() / len(c) * abs(c[sel].mean() - s[sel].mean())
        out.update(
            n_with_confidence=int(has_conf.sum()),
            mean_confidence=float(c.mean()),
            mean_score=float(s.mean()),
            ece=float(ece),
            brier=float(np.mean((c - s) ** 2)),
            spearman_confidence_score=_spearman(c, s),
        )
    if has_diff.any():
        out["n_with_difficulty"] = int(has_diff.sum())
        out["mean_difficulty"] = float(difficulty[has_diff].mean())
        out["spearman_difficulty_score"] = _spearman(difficulty[has_diff], score[has_diff])
        both = has_conf & has_diff
        out["spearman_difficulty_confidence"] = _spearman(difficulty[both], confidence[both]) if both.any() else None
    if has_tok.any():
        out["mean_tokens"] = float(tokens[has_tok].mean())
    return out
