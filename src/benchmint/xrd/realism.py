"""Patterns as instruments measure them: what the benchmark's clean patterns lack (crystalxrd-bench.txt §5).

Options of ``xrd build``, each recorded in the item (``realism``):

``fwhm_range``
    the FWHM of each item drawn uniformly from [low, high] degrees (the paper
    discusses 0.08-0.30°). Unlike the options below it is no instrument
    effect laid over the image: it is the item's own profile width, so the
    item's clean pattern, its 2θ* and its ground truth are taken with it
    (overlapping peaks merge or part, and 2θ* may move with the width).
``preferred_orientation``
    March-Dollase texture along the plane normal (h, k, l) with ratio r
    (r = 1: none; r < 1: platelets lying on that plane, its reflections
    enhanced). A reflection at angle α to the direction is weighted
    W(α) = (r² cos²α + sin²α / r)^(-3/2); a stick's weight is the mean of W
    over every plane equivalent to its families under the item's Laue group,
    each family counted by its multiplicity (a stick holding several families
    at one 2θ is weighted as if they scattered in proportion to their
    multiplicities: the sticks do not keep their families' intensities apart).
``background``
    a smooth background, Chebyshev coefficients c0, c1, ... in units of the
    clean pattern's maximum, on 2θ mapped to [-1, 1] over the grid (clipped
    at 0).
``noise_counts``
    counting noise: the pattern scaled so its maximum is this many counts,
    then each point drawn from a Poisson distribution (seeded per item).

The ground truth is always the clean pattern's at the item's width (the
drawn one under ``fwhm_range``); the image shows the realistic one. ``observed_two_theta_star`` is the argmax
of what the image shows and ``peak_shift_deg`` how far it moved, so a
benchmark of realistic patterns can be stratified by it (``meta.peak_shift``:
``none``, ``within_window`` or ``beyond_window`` of the ground-truth window).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass

import numpy as np

# Counts at the strongest point, at most: NumPy's Poisson generator refuses means above about 9.2e18.
MAX_NOISE_COUNTS = 1e18


@dataclass(frozen=True)
class Realism:
    fwhm_range: tuple[float, float] | None = None
    preferred_orientation: tuple[tuple[int, int, int], float] | None = None  # ((h, k, l), r)
    background: tuple[float, ...] | None = None
    noise_counts: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.fwhm_range is not None:
            lo, hi = self.fwhm_range
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
                raise ValueError(f"the FWHM range must be 0 < low <= high, got {self.fwhm_range!r}")
        if self.preferred_orientation is not None:
            hkl, r = self.preferred_orientation
            if len(hkl) != 3 or not any(hkl) or not all(isinstance(v, int) for v in hkl):
                raise ValueError(f"the preferred orientation needs a plane (h, k, l) not (0, 0, 0), got {hkl!r}")
            if not (math.isfinite(r) and r > 0):
                raise ValueError(f"the March-Dollase ratio must be > 0, got {r!r}")
        if self.background is not None and (not self.background or not all(math.isfinite(c) for c in self.background)):
            raise ValueError(f"the background needs finite Chebyshev coefficients, got {self.background!r}")
        if self.noise_counts is not None and not (math.isfinite(self.noise_counts)
                                                  and 0 < self.noise_counts <= MAX_NOISE_COUNTS):
            raise ValueError(f"the noise needs a peak count > 0 and at most {MAX_NOISE_COUNTS:g} (NumPy's Poisson "
                             f"draws stop near 9.2e18), got {self.noise_counts:g}")

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.fwhm_range, self.preferred_orientation, self.background,
                                           self.noise_counts))

    def rng(self, item_key: str) -> np.random.Generator:
        """The item's own generator: the same item and seed draw the same values in any run and order."""
        digest = hashlib.sha256(f"{self.seed}:{item_key}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def three_index(labels: np.ndarray) -> np.ndarray:
    """(h, k, l) rows; 4-index (h, k, i, l) rows lose their redundant i."""
    labels = np.asarray(labels, dtype=np.int64)
    return labels[:, [0, 1, 3]] if labels.shape[1] == 4 else labels


def march_dollase(cos_alpha: np.ndarray, r: float) -> np.ndarray:
    c2 = np.clip(cos_alpha * cos_alpha, 0.0, 1.0)
    return (r * r * c2 + (1.0 - c2) / r) ** -1.5


def po_weights(labels: np.ndarray, mults: np.ndarray, start: np.ndarray, rotations: np.ndarray,
               reciprocal: np.ndarray, direction: tuple[int, int, int], r: float) -> np.ndarray:
    """The March-Dollase weight of each stick (see the module docstring), vectorised over families and planes.

    ``labels``/``mults``/``start``: the sticks' families (``Sticks.family_arrays``); ``rotations``: (m, 3, 3)
    Laue rotations in the fractional basis; ``reciprocal``: rows a*, b*, c*.
    """
    hkl = three_index(labels).astype(np.float64)  # (F, 3)
    rot = np.asarray(rotations, dtype=np.float64).reshape(-1, 3, 3)
    # The planes equivalent to (hkl) are the rows h·R over the group (closed under inverses).
    planes = np.einsum("fi,mij->fmj", hkl, rot)  # (F, m, 3)
    g = planes @ reciprocal  # Cartesian reciprocal vectors
    d = np.asarray(direction, dtype=np.float64) @ reciprocal
    cos = (g @ d) / (np.linalg.norm(g, axis=2) * np.linalg.norm(d))
    # Orbit members repeat when the rotation group holds several copies; the mean over the m rows is the mean
    # over the orbit because every orbit member appears |stabiliser| times.
    family_w = march_dollase(cos, r).mean(axis=1)  # (F,)
    m = np.asarray(mults, dtype=np.float64)
    num = np.add.reduceat(family_w * m, start[:-1]) if len(family_w) else np.zeros(0)
    den = np.add.reduceat(m, start[:-1]) if len(m) else np.zeros(0)
    return num / den


def chebyshev_background(grid: np.ndarray, coefficients, scale: float) -> np.ndarray:
    x = 2.0 * (grid - grid[0]) / (grid[-1] - grid[0]) - 1.0
    return np.clip(np.polynomial.chebyshev.chebval(x, np.asarray(coefficients, dtype=np.float64)) * scale, 0.0, None)


def poisson_counts(curve: np.ndarray, counts: float, rng: np.random.Generator) -> np.ndarray:
    lam = curve * (counts / curve.max())
    return rng.poisson(lam).astype(np.float64)


def shift_class(shift_deg: float, window_deg: float, step: float) -> str:
    if abs(shift_deg) < step / 2:
        return "none"
    return "within_window" if abs(shift_deg) < window_deg else "beyond_window"
