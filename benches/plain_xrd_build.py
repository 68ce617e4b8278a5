"""The plain pipeline `benchmint xrd build` is measured against: the same job, written the straightforward way.

For each CIF: pymatgen's CifParser, XRDCalculator (Cu Kα1 sticks) and the dense pseudo-Voigt profile with Kα2
(benchmint's plain reference profile, ``profile_ref.broaden``), SpacegroupAnalyzer for the crystal system and
space group, an 800x450 matplotlib PNG of the pattern; then the KMeans selection (scikit-learn) over the
items' features, and items.jsonl. One process, one core.

    .venv/bin/python benches/plain_xrd_build.py OUT_DIR CIF [CIF ...]
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path


def main(out: Path, cifs: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from pymatgen.analysis.diffraction.xrd import XRDCalculator
    from pymatgen.io.cif import CifParser
    from pymatgen.symmetry.analyzer import SpacegroupAnalyzer
    from sklearn.cluster import KMeans
    from sklearn.preprocessing import StandardScaler

    from benchmint.xrd import profile_ref
    from benchmint.xrd.profile import ProfileParams

    params = ProfileParams()
    grid = params.grid()
    (out / "images").mkdir(parents=True, exist_ok=True)
    systems = ["triclinic", "monoclinic", "orthorhombic", "tetragonal", "trigonal", "hexagonal", "cubic"]
    items = []
    for path in cifs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                structure = CifParser(path).parse_structures(primitive=False)[0]
                # 2-90°, the paper's range and xrd build's
                pattern = XRDCalculator(wavelength="CuKa1").get_pattern(structure, two_theta_range=(2, 90))
                curve, star, peak, truth = profile_ref.broaden(np.asarray(pattern.x), np.asarray(pattern.y), params)
                sga = SpacegroupAnalyzer(structure, symprec=0.01)
                system, number = sga.get_crystal_system(), sga.get_space_group_number()
            except Exception as exc:  # noqa: BLE001 - a CIF it cannot do is skipped, as a user's script would
                print(f"{path}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
        answer = sorted({tuple(h["hkl"]) for i in truth.tolist() for h in pattern.hkls[i]})
        name = Path(path).stem
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.plot(grid, curve / curve.max() * 100, color="black", linewidth=0.8)
        ax.set_xlabel("2θ (degrees)")
        ax.set_ylabel("Intensity (a.u.)")
        fig.tight_layout()
        fig.savefig(out / "images" / f"{name}.png")
        plt.close(fig)
        items.append({"id": name, "two_theta_star": float(grid[star]), "answer": [list(h) for h in answer],
                      "peak_intensity": peak, "n_peaks": len(pattern.x), "union_size": len(answer),
                      "crystal_system": system, "spacegroup_number": number})
    feats = np.array([[it["two_theta_star"], it["peak_intensity"], it["n_peaks"], it["union_size"],
                       systems.index(it["crystal_system"]), it["spacegroup_number"]] for it in items])
    scaled = StandardScaler().fit_transform(feats)
    labels = KMeans(n_clusters=min(10, len(items)), random_state=0, n_init=10).fit(scaled).labels_
    with open(out / "items.jsonl", "w", encoding="utf-8") as fh:
        for it, label in zip(items, labels.tolist()):
            fh.write(json.dumps({**it, "cluster": label}) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
