"""Plain reference of the XRD profile stage (``benchmint.xrd.profile``): every stick evaluated at every grid point.

Obviously correct and slow (n_sticks x n_grid exp() calls); the compiled
kernel (``benchmint._core.profile``, csrc/profile.cpp) is tested against it. Per-stick angles use the math
module (the platform libm, as the kernel does), so the discrete decisions --
whether a Kα2 copy exists, the sign of a Caglioti radicand, which sticks fall
in the window -- are taken identically by both. Messages and their order are
the kernel's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from benchmint.xrd.profile import ProfileParams

Outcome = tuple[np.ndarray, int, float, np.ndarray]  # curve, argmax index, curve max, Kα1 stick indices


def check_sticks(two_theta: np.ndarray, intensity: np.ndarray, params: ProfileParams) -> None:
    """Raise ValueError for the first problem of a pattern's sticks."""
    if len(two_theta) != len(intensity):
        raise ValueError(f"two_theta and intensity differ in length ({len(two_theta)} vs {len(intensity)})")
    if len(two_theta) == 0:
        raise ValueError("no sticks: two_theta is empty")
    for i, (tt, inten) in enumerate(zip(two_theta.tolist(), intensity.tolist())):
        if not math.isfinite(tt):
            raise ValueError(f"two_theta[{i}] is not finite")
        if not 0.0 < tt < 180.0:
            raise ValueError(f"two_theta[{i}] = {tt!r} is outside (0, 180) degrees")
        if not math.isfinite(inten):
            raise ValueError(f"intensity[{i}] is not finite")
        if inten < 0.0:
            raise ValueError(f"intensity[{i}] = {inten!r} is negative")
    last = params.grid_last
    if not np.any((two_theta >= params.grid_start) & (two_theta <= last)):
        raise ValueError(f"no stick lies on the grid [{params.grid_start!r}, {last!r}] degrees")


def ka2_position(two_theta: float, params: ProfileParams) -> float | None:
    """2θ of the Kα2 copy of a Kα1 stick, or None when (λ2/λ1)·sin θ exceeds 1."""
    s = (params.wavelength_ka2 / params.wavelength_ka1) * math.sin(math.radians(0.5 * two_theta))
    if s > 1.0:
        return None
    return 2.0 * math.degrees(math.asin(s))


def stick_fwhm(two_theta: float, params: ProfileParams, where: str) -> float:
    """The fixed FWHM, or the Caglioti width at the stick's own θ."""
    if params.caglioti is None:
        return params.fwhm
    u, v, w = params.caglioti
    t = math.tan(math.radians(0.5 * two_theta))
    r = u * (t * t) + v * t + w
    if not (r > 0.0 and math.isfinite(r)):
        raise ValueError(f"Caglioti width undefined at {where}: U*tan(theta)^2 + V*tan(theta) + W = {r!r} "
                         "is not a finite positive number")
    return math.sqrt(r)


def scale_exponent(intensity: np.ndarray) -> int:
    """e with max(intensity) = m·2^e, m in [0.5, 1): dividing by 2^e is exact and keeps the
    sums away from overflow and underflow; the curve is multiplied back at the end."""
    top = float(np.max(intensity))
    return math.frexp(top)[1] if top > 0.0 else 0


def all_sticks(two_theta: np.ndarray, intensity: np.ndarray, params: ProfileParams, scale_exp: int = 0
               ) -> tuple[list[float], list[float], list[float]]:
    """Positions, intensities / 2^scale_exp and FWHMs of the Kα1 sticks and their Kα2 copies."""
    pos, inten, fwhm = [], [], []
    for i, (tt, v) in enumerate(zip(two_theta.tolist(), intensity.tolist())):
        at = f"two_theta[{i}]"
        v = math.ldexp(v, -scale_exp)
        pos.append(tt)
        inten.append(v)
        fwhm.append(stick_fwhm(tt, params, f"{at} = {tt!r}"))
        if params.ka2_ratio == 0.0:
            continue
        tt2 = ka2_position(tt, params)
        if tt2 is None:
            continue
        pos.append(tt2)
        inten.append(v * params.ka2_ratio)
        fwhm.append(stick_fwhm(tt2, params, f"the Ka2 copy of {at} (2theta = {tt2!r})"))
    return pos, inten, fwhm


def dense_curve(pos: Sequence[float], inten: Sequence[float], fwhm: Sequence[float],
                params: ProfileParams) -> np.ndarray:
    """Σ I·[η·L + (1-η)·G] with both profiles area-normalised, every stick at every grid point."""
    x = params.grid()
    curve = np.zeros_like(x)
    eta = params.eta
    ln2 = math.log(2.0)
    for p, i, w in zip(pos, inten, fwhm):
        q = 4.0 * (x - p) ** 2 / (w * w)
        lorentz = (2.0 / (math.pi * w)) / (1.0 + q)
        gauss = (2.0 / w) * math.sqrt(ln2 / math.pi) * np.exp(-ln2 * q)
        curve += i * (eta * lorentz + (1.0 - eta) * gauss)
    return curve


def broaden(two_theta: np.ndarray, intensity: np.ndarray, params: ProfileParams) -> Outcome:
    """One pattern: curve, first argmax, curve max, indices of the Kα1 sticks within the window."""
    check_sticks(two_theta, intensity, params)
    scale_exp = scale_exponent(intensity)
    curve = dense_curve(*all_sticks(two_theta, intensity, params, scale_exp), params)
    with np.errstate(over="ignore"):
        curve = np.ldexp(curve, scale_exp)
    if not np.all(np.isfinite(curve)):
        raise ValueError("the curve overflowed float64; scale the intensities down")
    star = int(np.argmax(curve))  # numpy returns the first of equal maxima
    peak = float(curve[star])
    if not peak > 0.0:
        raise ValueError("the curve is zero on the whole grid")
    x_star = float(params.grid()[star])
    half = params.gt_window
    if params.window_fwhms is not None:  # adaptive: FWHMs of the profile at 2θ* itself
        half = params.window_fwhms * stick_fwhm(x_star, params, f"2theta* = {x_star!r}")
    truth = np.flatnonzero(np.abs(two_theta - x_star) < half).astype(np.int64)
    return curve, star, peak, truth


def broaden_batch(items: Sequence[tuple[np.ndarray, np.ndarray]], params: ProfileParams) -> list[Outcome]:
    """Pattern by pattern; the first failing pattern's error, prefixed with its index."""
    out = []
    for j, (tt, inten) in enumerate(items):
        try:
            out.append(broaden(tt, inten, params))
        except ValueError as exc:
            raise ValueError(f"pattern {j}: {exc}") from None
    return out
