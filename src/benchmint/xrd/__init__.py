"""XRD items of CrystalXRD-Bench: sticks -> broadened Kα1/Kα2 curve -> strongest peak -> HKL ground truth."""

from benchmint.xrd.profile import HKL, PatternResult, ProfileParams, kalpha2_sticks, pattern, patterns

__all__ = ["HKL", "PatternResult", "ProfileParams", "kalpha2_sticks", "pattern", "patterns"]
