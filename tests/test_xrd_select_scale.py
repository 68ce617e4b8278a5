"""xrd build's KMeans selection at database size: its input kept as the items come, and with --engine ray its
restarts and silhouette units as tasks on a local 2-CPU Ray cluster (127.0.0.1), with the local engine's
selection.jsonl byte for byte, at a size past the thresholds from which the local engine uses its threads and
the silhouette's kernel."""

import json
import os
import sys

import numpy as np
import pytest

from benchmint.xrd import cluster
from benchmint.xrd.build import SelectionInput, Selector, select


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    try:
        import ray
    except ImportError:
        pytest.skip("ray is not installed (pip install 'benchmint[ray]')")
    from benchmint.run.ray_engine import ray_session

    # The task functions of this file travel by value: the Ray workers cannot import the tests folder.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with ray_session(num_cpus=2, temp_dir=str(tmp_path_factory.mktemp("ray"))) as connected:
        yield connected
    assert not ray.is_initialized()


def _items(n: int, db: str, seed: int) -> list[dict]:
    """Fields as select() reads them, a quarter of the rows copies of an earlier one (repeated structures)."""
    rng = np.random.default_rng(seed)
    systems = ["cubic", "hexagonal", "triclinic", "monoclinic", None]
    items: list[dict] = []
    for i in range(n):
        if i and rng.random() < 0.25:
            items.append({**items[int(rng.integers(i))], "id": f"{db}{i}"})
            continue
        system = systems[int(rng.integers(len(systems)))]
        items.append({"db": db, "id": f"{db}{i}", "two_theta_star": round(float(rng.lognormal(3.2, 0.5)), 2),
                      "peak_intensity": float(rng.uniform(1, 1000)), "n_peaks": int(rng.integers(3, 400)),
                      "union_size": int(rng.integers(1, 6)), "crystal_system": system,
                      "spacegroup_number": None if system is None else int(rng.integers(1, 231))})
    return items


def test_the_selection_input_keeps_six_features_an_item_as_items_come():
    items = _items(cluster.KERNEL_FROM_ROWS + 100, "a", 5) + _items(200, "b", 6)
    items[1] = {**items[1], "crystal_system": None, "spacegroup_number": None}
    inp = SelectionInput()
    for item in items:
        inp.add({**item, "cif_text": "x" * 1000})  # what the selection does not read is not kept
    assert len(inp) == len(items)
    assert [inp.dbs[db][1].itemsize * len(inp.dbs[db][1]) for db in "ab"] == [(len(items) - 200) * 48, 200 * 48]
    ids, feats = inp.features("a")
    first, second = items[0], items[1]
    # Crystal systems are coded by their place in CRYSTAL_SYSTEMS, an undetermined one as 7 with space group 0.
    assert ids[:2] == [first["id"], second["id"]]
    assert feats[1].tolist() == [second["two_theta_star"], second["peak_intensity"], second["n_peaks"],
                                 second["union_size"], 7.0, 0.0]
    assert feats[0, 4] == ["triclinic", "monoclinic", "orthorhombic", "tetragonal", "trigonal", "hexagonal",
                           "cubic"].index(first["crystal_system"]) if first["crystal_system"] else 7
    assert select(inp, 25, 2, workers=2) == select(items, 25, 2, workers=2)


def _selection_jsonl(path, selection) -> bytes:
    """selection.jsonl as ``xrd build`` writes it (``_Finish.close``)."""
    from benchmint.io import write_jsonl

    rows, silhouettes = selection
    write_jsonl(path, ({**row, "silhouette": silhouettes[row["db"]]} for row in rows))
    return path.read_bytes()


@pytest.mark.parametrize("rows_per_unit", [None, 64])
def test_selection_on_ray_is_the_local_engines_byte_for_byte(ray_cluster, tmp_path, monkeypatch, rows_per_unit):
    """(With 64 rows a unit, the silhouette's larger clusters come in several units, whose partial sums are
    added in turn in the driver.)"""
    from benchmint.run.ray_engine import RayMap

    if rows_per_unit:
        monkeypatch.setattr(cluster, "ROWS_PER_UNIT", rows_per_unit)

    big = cluster.THREADS_FROM_ROWS + 1500  # past both thresholds; the small database takes the plain forms
    assert big > cluster.KERNEL_FROM_ROWS
    items = _items(big, "big", 1) + _items(300, "small", 2)
    local = select(items, 25, 4, workers=2)
    spread = RayMap()
    on_ray = select(items, 25, 4, spread=spread)
    # Ten restarts, and the silhouette's units in a few groups a CPU (2 CPUs: 8 tasks).
    assert spread.workers == 2 and spread.tasks == 10 + 8
    assert on_ray == local
    assert _selection_jsonl(tmp_path / "ray.jsonl", on_ray) == _selection_jsonl(tmp_path / "local.jsonl", local)
    silhouettes = [json.loads(line)["silhouette"] for line in (tmp_path / "ray.jsonl").read_text().splitlines()]
    assert len(silhouettes) == 50 and None not in silhouettes
    # The run's own path: with the ray engine the selector selects here, over the cluster.
    selector = Selector("ray")
    try:
        assert selector.proc is None
        assert selector.select(items, 25, 4, workers=1) == local
    finally:
        selector.close()


def test_restarts_and_silhouette_on_ray_match_the_threads_and_scikit_learn(ray_cluster):
    """Each part apart against independent paths: KMeans against scikit-learn's own call, the silhouette
    against the plain row-by-row form."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from benchmint.run.ray_engine import RayMap
    from benchmint.xrd import cluster_ref

    rng = np.random.default_rng(9)
    x = rng.normal(size=(1200, 6))
    x[::3] = x[1]  # repeated rows
    with threadpool_limits(limits=1):
        km = KMeans(n_clusters=7, random_state=3, n_init=10).fit(x)
    labels, centres = cluster.kmeans(x, 7, 3, RayMap(), threads_from=0)
    assert np.array_equal(labels, km.labels_) and np.array_equal(centres, km.cluster_centers_)
    got = cluster.silhouette(x, labels, RayMap(), kernel_from=0)
    assert got == cluster.silhouette(x, labels, 2, kernel_from=0)
    assert got == pytest.approx(cluster_ref.silhouette(x, labels), abs=1e-12)


def _die_once(marker_dir, item):
    """Square ``item``; the first time an item is seen, its worker process dies instead (no exception: gone)."""
    marker = os.path.join(marker_dir, f"{item}.seen")
    if item % 2 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return item * item


def test_a_task_whose_worker_died_is_run_again(ray_cluster, tmp_path):
    from benchmint.run.ray_engine import RayMap

    spread = RayMap()
    assert spread.map(_die_once, str(tmp_path), list(range(6))) == [0, 1, 4, 9, 16, 25]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.seen", "3.seen", "5.seen"]  # three workers killed


def test_the_ray_selector_selects_here_when_the_cluster_fails_it(tmp_path):
    """Without a Ray connection (a process of its own: this module's cluster is connected here) the selection
    falls back to the process's threads, with the same result."""
    import pickle
    import subprocess

    items = _items(600, "a", 3)
    (tmp_path / "items.pkl").write_bytes(pickle.dumps(items))
    code = ("import pickle, sys, ray; from benchmint.xrd.build import Selector; "
            "items = pickle.load(open(sys.argv[1], 'rb')); assert not ray.is_initialized(); "
            "sys.stdout.buffer.write(pickle.dumps(Selector('ray').select(items, 5, 1, workers=2)))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "items.pkl")], capture_output=True, check=True)
    assert pickle.loads(done.stdout) == select(items, 5, 1)
    assert "the Ray cluster failed the KMeans selection" in done.stderr.decode()  # said, not silent
