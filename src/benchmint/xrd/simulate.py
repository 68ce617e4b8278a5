"""From a structure or CIF text to an XRD item in one call: sticks, Kα1/Kα2 curve, 2θ*, HKL ground truth.

``simulate(source)`` takes a pymatgen ``Structure`` (used as is: its own cell
gives the Miller indices) or CIF text (read as ``CifParser(...).parse_structures(
primitive=False)[0]`` would, through ``benchmint.xrd.cifread``, once a space
group given only by a Hall symbol has its operations written in:
``cifread.with_hall_operations``), computes the
sticks pymatgen's ``XRDCalculator("CuKa1", symprec=0)`` gives, and broadens
them into the benchmark's Kα1/Kα2 curve (``benchmint.xrd.profile``). ``simulate_many`` does the same for many sources over
threads (the kernels release the GIL).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from benchmint.parallel import thread_map
from benchmint.xrd.cifread import CellSites, read_sites, with_hall_operations
from benchmint.xrd.profile import PatternResult, ProfileParams, sticks_pattern
from benchmint.xrd.sticks import DEFAULT_RANGE, Sticks, compute_sticks

__all__ = ["Simulation", "simulate", "simulate_many"]


class Simulation:
    """One structure's XRD item.

    sticks: Kα1 sticks (two_theta, intensity, d_spacing, hkls, multiplicities);
    pattern: grid, curve, two_theta_star, peak_intensity, ground_truth;
    route: "structure" (a Structure was given), "gemmi" or "pymatgen" (the CIF reader used);
    structure(): the pymatgen Structure (built on first call when the source was CIF text).
    """

    __slots__ = ("sticks", "pattern", "route", "_sites")

    def __init__(self, sticks: Sticks, pattern: PatternResult, route: str, sites: Any) -> None:
        self.sticks, self.pattern, self.route, self._sites = sticks, pattern, route, sites

    def structure(self):
        return self._sites.structure() if isinstance(self._sites, CellSites) else self._sites

    def __repr__(self) -> str:
        return (f"Simulation(route={self.route!r}, sticks={len(self.sticks)}, "
                f"two_theta_star={self.pattern.two_theta_star!r}, ground_truth={self.pattern.ground_truth!r})")


def simulate(source: Any, params: ProfileParams | None = None,
             two_theta_range: Sequence[float] | None = DEFAULT_RANGE) -> Simulation:
    """The XRD item of one structure or CIF text. Raises ValueError for a structure without sites, an
    element without scattering factors or no reflection in range; a CIF pymatgen cannot read raises
    what CifParser raises."""
    if isinstance(source, str):
        sites, route = read_sites(with_hall_operations(source)[0])
    else:
        sites, route = source, "structure"
    if len(sites) == 0:
        raise ValueError("the structure has no sites")
    sticks = compute_sticks(sites, two_theta_range)
    return Simulation(sticks, sticks_pattern(sticks, params), route, sites)


def simulate_many(sources: Iterable[Any], params: ProfileParams | None = None, workers: int = 1,
                  two_theta_range: Sequence[float] | None = DEFAULT_RANGE) -> list[Simulation]:
    """``simulate`` for each source, in order, over ``workers`` threads (-1: all cores).
    The first failing source's error is raised, prefixed with its index."""
    items = list(sources)

    def one(j: int) -> Simulation:
        try:
            return simulate(items[j], params, two_theta_range)
        except Exception as exc:
            raise ValueError(f"source {j}: {type(exc).__name__}: {exc}") from exc

    return thread_map(one, range(len(items)), workers)
