"""benchmint.parallel: worker counts and the ordered thread map."""

import os

import pytest

from benchmint.parallel import resolve_workers, thread_map


def test_resolve_workers():
    assert resolve_workers(-1) == (os.cpu_count() or 1)
    assert resolve_workers(3) == 3
    for bad in (0, -2, True, 1.5, "2"):
        with pytest.raises(ValueError, match="workers must be -1"):
            resolve_workers(bad)


def test_thread_map_order_and_first_error():
    assert thread_map(lambda x: x * x, range(50), 4) == [x * x for x in range(50)]
    assert thread_map(str, [], -1) == []

    def fail_on_odd(x):
        if x % 2:
            raise KeyError(x)
        return x

    with pytest.raises(KeyError, match="1"):  # the first failing item in input order
        thread_map(fail_on_odd, range(10), 3)


def _children(pid):
    """PIDs of the live (not zombie) processes whose parent is ``pid``, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _alive(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _many_inputs(root, kind):
    from importlib.resources import files

    root.mkdir()
    if kind == "harvest":
        sample = (files("benchmint") / "samples" / "sample_paper.pdf").read_bytes()
        for i in range(200):  # distinct content keys
            (root / f"paper{i:03d}.pdf").write_bytes(sample + f"%{i}\n".encode())
    else:
        from pymatgen.analysis.prototypes import AFLOW_PROTOTYPE_LIBRARY
        from pymatgen.io.cif import CifWriter

        for i, entry in enumerate(AFLOW_PROTOTYPE_LIBRARY[:200]):
            CifWriter(entry["snl"].structure).write_file(root / f"p{i:03d}.cif")


@pytest.mark.parametrize("command", [["harvest"], ["xrd", "build"]])
def test_no_worker_outlives_a_killed_run(command, tmp_path):
    """SIGKILL the parent of a running pool (as the OOM killer would): every worker is gone soon after."""
    import signal
    import subprocess
    import sys
    import time

    inputs = tmp_path / "in"
    _many_inputs(inputs, command[0])
    proc = subprocess.Popen([sys.executable, "-m", "benchmint.cli", *command, str(inputs), "--workers", "2",
                             "--out", str(tmp_path / "out")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    workers = []
    while time.time() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        if len(workers) >= 2 and (tmp_path / "out" / "ledger.sqlite").exists():
            break
        time.sleep(0.02)
    assert proc.poll() is None and len(workers) >= 2, "the run ended before its pool could be seen"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 5
    while time.time() < deadline and any(map(_alive, workers)):
        time.sleep(0.05)
    survivors = [w for w in workers if _alive(w)]
    for w in survivors:  # do not leave them behind even when the test fails
        os.kill(w, signal.SIGKILL)
    assert not survivors
