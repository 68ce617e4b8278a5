"""Model "personalities" (spm-bench §3 Table 2, §4.1-4.2) and confidence calibration.

The paper names the profiles by selection behaviour (Table 2: {A} of {A, B}
is Conservative, {A, B, C} Aggressive, {A, B, C, D} Gambling) and by
calibration (§4.2: Wise models lower their confidence where they fail,
Aggressive ones report high confidence regardless). Its prose also reads a
wide SPC - SIP-F1 gap as Aggressive or Gambling, but by its own equations
(2)-(5) an over-selected item scores SPC 0 and SIP-F1 > 0, so over-selection
*narrows* that gap while under-selection widens it; the gap is reported
beside the label and the labels follow the equations' behaviour instead.

Per model, over its items:
  over  = share of items with |P| > |G| (selects more than asked),
  under = share of items with ∅ ≠ P ⊊ G (leaves right options out, adds no wrong one),
  prec  = mean precision TP/|P| over the items it selected something on (the personalities are selection
          habits: an item left unanswered holds no wrong selection),
  abstention = share of items with P = ∅ (nothing read, "I am not sure"), a trait reported on its own,
  rec = macro recall (an unanswered item has recall 0), sip = mean SIP-F1.
A model that selected nothing at all gets no label.
Rules, in order (thresholds in ``PersonalityRules``):
  1. Wise          sip >= wise_sip, prec >= wise_precision, rec >= wise_recall, and calibrated where the model
                   states a confidence: Spearman(confidence, score) >= 0 or ECE <= wise_ece. Without
                   confidences the label rests on selection alone and ``reason`` says so.
  2. Gambler       prec < gambler_precision (0.65): more of its selections are wrong than adding one wrong
                   option to a two-option answer gives (Table 2's Aggressive {A, B, C} has P = 2/3, its
                   Gambling {A, B, C, D} P = 1/2); selection near at random.
  3. Aggressive    over > under: its typical error is adding options (Table 2's {A, B, C}, P = 0.67);
                   ``overconfident`` is set when its mean confidence is >= aggressive_confidence while its
                   mean score is lower by more than wise_ece (§4.2's "epistemic hubris").
  4. Conservative  otherwise: precise, its typical error is leaving options out (Table 2's {A}).
Token profile (§4.2), beside the label, when the predictions carry tokens:
  Deliberative Analyst  mean tokens >= many_tokens and sip >= wise_sip (long, and it pays off);
  Naive Intuitionist    mean tokens <= few_tokens and, where difficulties are stated, a mean score on the
                        hard items (difficulty >= 0.5) below collapse_ratio x that on the easy ones;
  otherwise none. The token thresholds follow the paper's examples (~3,200 tokens for its Deliberative
  Analyst); they are settings, not constants of nature.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

import numpy as np

from benchmint.parallel import thread_map

# Items from which calibration's rank sorts, confidence figures and correlations run on threads (NumPy releases
# the GIL; each is computed whole, the same whichever thread runs it). Below it threads cost more than they save.
THREADED_ITEMS = 1 << 16


@dataclass(frozen=True)
class PersonalityRules:
    wise_sip: float = 0.8
    wise_precision: float = 0.9
    wise_recall: float = 0.9
    wise_ece: float = 0.15
    gambler_precision: float = 0.65
    aggressive_confidence: float = 0.8
    many_tokens: float = 3000.0
    few_tokens: float = 1000.0
    collapse_ratio: float = 0.5


def _calibrated(calib: dict | None, rules: PersonalityRules) -> bool | None:
    """True/False from the stated confidences, None when the model states none."""
    if not calib or "ece" not in calib:
        return None
    rho = calib.get("spearman_confidence_score")
    return (rho is not None and rho >= 0) or calib["ece"] <= rules.wise_ece


def token_profile(sip_mean: float, score: np.ndarray | None, difficulty: np.ndarray | None,
                  tokens: np.ndarray | None, rules: PersonalityRules) -> dict | None:
    if tokens is None or np.isnan(tokens).all():
        return None

    def hard_easy() -> tuple[float, float] | None:
        if score is None or difficulty is None:
            return None
        known = ~np.isnan(difficulty)
        hard, easy = known & (difficulty >= 0.5), known & (difficulty < 0.5)
        if not (hard.any() and easy.any()):
            return None
        return float(score[hard].mean()), float(score[easy].mean())

    return token_label(sip_mean, float(np.nanmean(tokens)), hard_easy, rules)


def token_label(sip_mean: float, mean_tokens: float, hard_easy, rules: PersonalityRules) -> dict:
    """The token profile's rule from its figures: ``hard_easy()`` gives the mean scores on the hard and the easy
    items, or None when either set is empty (asked only where the rule needs it)."""
    out: dict = {"label": None, "mean_tokens": mean_tokens}
    if mean_tokens >= rules.many_tokens and sip_mean >= rules.wise_sip:
        out["label"] = "Deliberative Analyst"
    elif mean_tokens <= rules.few_tokens:
        scores = hard_easy()
        if scores is not None:
            hard_score, easy_score = scores
            out.update(hard_score=hard_score, easy_score=easy_score)
            if hard_score < rules.collapse_ratio * easy_score:
                out["label"] = "Naive Intuitionist"
    return out


def selection_figures(tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray) -> dict:
    """The per-item passes ``personality`` rests on (none of them needs the calibration, so they may run beside
    it): the shares of items left unanswered, over- and under-selected, and the precision over the answered."""
    answered = n_pred > 0
    out = {"n": len(tp), "abstention": float(np.mean(~answered)), "answered": bool(answered.any())}
    if out["answered"]:
        out.update(precision=float(np.mean(tp[answered] / n_pred[answered])),
                   over=float(np.mean(n_pred > n_gold)),
                   under=float(np.mean((tp == n_pred) & (n_pred > 0) & (n_pred < n_gold))))
    return out


def selection_from_counts(n: int, answered: int, over: int, under: int, precision) -> dict:
    """``selection_figures`` from the items' counts (all, answered, over- and under-selected) and ``precision()``,
    the mean precision over the answered items (called only when there are some). A mean of booleans is its
    count over n, exactly: those sums of ones are whole numbers."""
    out = {"n": n, "abstention": float(np.float64(n - answered) / n), "answered": bool(answered)}
    if answered:
        out.update(precision=precision(), over=float(np.float64(over) / n), under=float(np.float64(under) / n))
    return out


def personality(tp: np.ndarray | None, n_pred: np.ndarray | None, n_gold: np.ndarray | None, spc_mean: float,
                sip_mean: float, precision_mean: float, recall_mean: float, rules: PersonalityRules = PersonalityRules(),
                calib: dict | None = None, score: np.ndarray | None = None, difficulty: np.ndarray | None = None,
                tokens: np.ndarray | None = None, selection: dict | None = None, profile=...) -> dict:
    """The label and the figures it rests on; ``calib`` is ``calibration(...)`` of the same items, ``selection``
    their ``selection_figures`` and ``profile`` their ``token_profile`` when already computed (then ``tp`` and
    the columns may be None).

    ``precision_mean`` (the macro precision of the metrics, 0 on unanswered items) is not what the labels use:
    the precision over the selections is computed here from ``tp`` and ``n_pred``.
    """
    if selection is None:
        assert tp is not None and n_pred is not None and n_gold is not None  # the columns or their figures
        if len(tp) == 0:
            return {"label": None, "reason": "no items"}
        selection = selection_figures(tp, n_pred, n_gold)
    if selection["n"] == 0:
        return {"label": None, "reason": "no items"}
    abstention = selection["abstention"]
    if not selection["answered"]:
        return {"label": None, "reason": "it selected nothing on any item", "abstention_rate": abstention,
                "rules": asdict(rules)}
    precision_mean, over, under = selection["precision"], selection["over"], selection["under"]
    calibrated = _calibrated(calib, rules)
    overconfident = None
    if calib and "mean_confidence" in calib:
        overconfident = bool(calib["mean_confidence"] >= rules.aggressive_confidence
                             and calib["mean_confidence"] - calib["mean_score"] > rules.wise_ece)
    selects_wisely = (sip_mean >= rules.wise_sip and precision_mean >= rules.wise_precision
                      and recall_mean >= rules.wise_recall)
    if selects_wisely and calibrated is not False:
        label = "Wise"
        reason = "precise and nearly complete" + (
            ", confidence tracks its scores" if calibrated else " (no stated confidence: calibration unknown)")
    elif precision_mean < rules.gambler_precision:
        label, reason = "Gambler", "too many of its selections are wrong"
    elif over > under:
        label = "Aggressive"
        reason = "its typical error is adding options" + (", with overconfidence" if overconfident else "")
    else:
        label, reason = "Conservative", "precise; its typical error is leaving options out"
    if selects_wisely and label != "Wise":
        reason += " (it selects like a Wise model, but its confidence does not track its scores)"
    if abstention:
        reason += f"; it answers nothing on {100 * abstention:.0f}% of the items"
    return {
        "label": label,
        "reason": reason,
        "spc_minus_sip_f1": spc_mean - sip_mean,
        "over_selection_rate": over,
        "under_selection_rate": under,
        "precision": precision_mean,
        "abstention_rate": abstention,
        "recall": recall_mean,
        "sip_f1": sip_mean,
        "calibrated": calibrated,
        "overconfident": overconfident,
        "token_profile": token_profile(sip_mean, score, difficulty, tokens, rules) if profile is ... else profile,
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
    return class_rank_table(np.bincount(cls, minlength=len(class_values)), class_values)[cls]


def class_rank_table(counts: np.ndarray, class_values: np.ndarray) -> np.ndarray:
    """The average rank of each class's items among ``counts[k]`` items of value ``class_values[k]`` per class."""
    counts = np.asarray(counts).astype(np.float64)
    order = np.argsort(class_values)
    vals, cnt = class_values[order], counts[order]
    first = np.ones(len(vals), dtype=bool)
    np.not_equal(vals[1:], vals[:-1], out=first[1:])
    group = np.cumsum(first) - 1
    group_count = np.bincount(group, weights=cnt)
    group_start = np.concatenate([[0.0], np.cumsum(group_count)[:-1]])
    rank = np.empty(len(vals))
    rank[order] = (group_start + (group_count + 1) / 2)[group]
    return rank


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
            self.cache[key] = self._ranks(mask)
        return self.cache[key]

    def _ranks(self, mask: np.ndarray) -> np.ndarray:
        every = bool(mask.all())  # the usual case: every item states the column, no copy needed
        if self.classes is not None:
            cls, class_values = self.classes
            return class_average_ranks(cls if every else cls[mask], class_values)
        return average_ranks(self.values if every else self.values[mask])


def _missing_ranks(wanted: list[tuple[_Ranks, np.ndarray]]) -> list[tuple[_Ranks, np.ndarray, bytes]]:
    """The distinct (column, subset) pairs of ``wanted`` whose ranks are not cached yet, with the cache's key."""
    todo: dict[tuple[int, bytes], tuple[_Ranks, np.ndarray, bytes]] = {}
    for ranks, mask in wanted:
        key = mask.tobytes()
        if key not in ranks.cache:
            todo.setdefault((id(ranks), key), (ranks, mask, key))
    return list(todo.values())


def _confidence_figures(score: np.ndarray, confidence: np.ndarray, has_conf: np.ndarray, n_bins: int) -> dict:
    """The stated confidences' mean, ECE and Brier score against the items' scores (``has_conf`` not empty)."""
    every = bool(has_conf.all())
    c, s = (confidence, score) if every else (confidence[has_conf], score[has_conf])
    bins = confidence_bins(c, n_bins)
    n_b = np.bincount(bins, minlength=n_bins)
    return {
        "n_with_confidence": int(has_conf.sum()),
        "mean_confidence": float(c.mean()),
        "mean_score": float(s.mean()),
        "ece": expected_calibration_error(n_b, np.bincount(bins, c, n_bins), np.bincount(bins, s, n_bins), len(c)),
        "brier": float(np.mean((c - s) ** 2)),
    }


def confidence_bins(c: np.ndarray, n_bins: int) -> np.ndarray:
    """Each confidence's ECE bin: equal widths on [0, 1], 1.0 in the top bin."""
    return np.minimum((c * n_bins).astype(np.int64), n_bins - 1)


def expected_calibration_error(n_b: np.ndarray, sum_c: np.ndarray, sum_s: np.ndarray, n: int) -> float:
    """ECE from the items per bin and the sums of their confidences and scores (each bin's sum in item order)."""
    used = n_b > 0
    gap = np.abs(sum_c[used] - sum_s[used]) / n_b[used]
    return float(np.sum(n_b[used] / n * gap))


def calibration_block(confidence: dict | None, rho: dict, difficulty: tuple[int, float] | None,
                      mean_tokens: float | None) -> dict:
    """``calibration``'s result from its parts: the confidence figures (None when no item states one), the
    Spearman correlations by name, (items, mean) of the stated difficulties and the stated tokens' mean."""
    out: dict = {}
    if confidence is not None:
        out.update(confidence, spearman_confidence_score=rho.get("spearman_confidence_score"))
    if difficulty is not None:
        out["n_with_difficulty"], out["mean_difficulty"] = difficulty
        out["spearman_difficulty_score"] = rho.get("spearman_difficulty_score")
        out["spearman_difficulty_confidence"] = rho.get("spearman_difficulty_confidence")
    if mean_tokens is not None:
        out["mean_tokens"] = mean_tokens
    return out


def calibration(score: np.ndarray, confidence: np.ndarray, difficulty: np.ndarray, tokens: np.ndarray,
                n_bins: int = 10, score_classes: tuple[np.ndarray, np.ndarray] | None = None,
                workers: int = 1) -> dict | None:
    """Stated confidence against the per-item score; None when no item carries a confidence, difficulty or tokens.

    ECE uses ``n_bins`` equal-width bins on [0, 1] (confidence 1.0 in the top bin).
    Spearman correlations use average ranks for ties and are null when a column is constant.
    ``score_classes`` = (class per item, value per class) lets score ranks skip a sort. From THREADED_ITEMS items
    the rank columns, the confidence figures and the correlations run on up to ``workers`` threads.
    """
    has_conf = ~np.isnan(confidence)
    has_diff = ~np.isnan(difficulty)
    has_tok = ~np.isnan(tokens)
    if not (has_conf.any() or has_diff.any() or has_tok.any()):
        return None
    r_score, r_conf, r_diff = _Ranks(score, score_classes), _Ranks(confidence), _Ranks(difficulty)
    both = has_conf & has_diff
    # Each Spearman correlation with its two rank columns and the items it is taken over (at least 2).
    pairs = {name: (ra, rb, mask) for name, ra, rb, mask in (
        ("spearman_confidence_score", r_conf, r_score, has_conf),
        ("spearman_difficulty_score", r_diff, r_score, has_diff),
        ("spearman_difficulty_confidence", r_diff, r_conf, both)) if mask.sum() >= 2}
    workers = workers if len(score) >= THREADED_ITEMS else 1
    # The rank sorts and the confidence figures are independent: one thread each, then one per correlation.
    todo = _missing_ranks([(r, mask) for ra, rb, mask in pairs.values() for r in (ra, rb)])
    jobs = [partial(r._ranks, mask) for r, mask, _ in todo]
    stated = bool(has_conf.any())
    if stated:
        jobs.append(partial(_confidence_figures, score, confidence, has_conf, n_bins))
    done = thread_map(lambda job: job(), jobs, workers)
    for (r, _, key), got in zip(todo, done):
        r.cache[key] = got
    rho = dict(zip(pairs, thread_map(lambda p: _pearson(p[0].on(p[2]), p[1].on(p[2])), pairs.values(), workers)))

    return calibration_block(done[-1] if stated else None, rho,
                             (int(has_diff.sum()), float(difficulty[has_diff].mean())) if has_diff.any() else None,
                             float(tokens[has_tok].mean()) if has_tok.any() else None)
