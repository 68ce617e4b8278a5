"""The real small model (benchmint[local]): llama.cpp's server with SmolLM2-135M, each benchmark end to end.

Marked slow. Skipped only where the extra is not installed (scripts/setup.sh installs it).
"""

import io
import json
import os

import pytest
from PIL import Image

from benchmint.cli import main

llama_cpp = pytest.importorskip("llama_cpp", reason="benchmint[local] is not installed")
pytestmark = pytest.mark.slow


def _png(tmp_path):
    buf = io.BytesIO()
    Image.new("L", (32, 24), 90).save(buf, format="PNG")
    (tmp_path / "fig.png").write_bytes(buf.getvalue())


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _six_benchmarks(tmp_path) -> list[tuple[str, str, int]]:
    """(benchmark, items, count): an items file of each of the six benchmark modes."""
    from pymatgen.core import Lattice, Structure
    from pymatgen.io.cif import CifWriter

    _png(tmp_path)
    _write(tmp_path / "matvqa.jsonl", [
        {"id": f"m{i}", "question": q, "options": ["It increases.", "It decreases.", "It stays flat."], "answer": 1,
         "image": "fig.png", "task": "causal"}
        for i, q in enumerate(["How does the peak change with temperature?", "What happens to the grain size?"])])
    _write(tmp_path / "spm.jsonl", [
        {"id": "s1", "question": "Which statements fit the STM image?",
         "options": ["A moiré pattern is visible.", "The surface is amorphous.", "Atomic steps are seen."],
         "answer": "A, C", "image": "fig.png"}])
    _write(tmp_path / "seephys.jsonl", [
        {"id": "p1", "question": "A 2.0 kg cart is pushed with 6.0 N. Its acceleration?", "answer": "3.0 m/s^2",
         "language": "English", "sig_figs": 2}])
    csm = tmp_path / "csm"
    csm.mkdir()
    (csm / "x.png").write_bytes((tmp_path / "fig.png").read_bytes())
    _write(csm / "metadata.jsonl", [
        {"index": 0, "file_name": "x.png", "scale": "Microscale", "image_caption": "SEM image of the grains.",
         "describe_paragraph": "Equiaxed grains of about 10 µm.", "correct_answer": "B",
         "options": json.dumps([{"label": x, "caption": f"Caption {x}."} for x in "ABCD"])}])
    cifs = tmp_path / "cifs"
    cifs.mkdir()
    CifWriter(Structure.from_spacegroup("Fm-3m", Lattice.cubic(5.64), ["Na", "Cl"],
                                        [[0, 0, 0], [0.5, 0.5, 0.5]])).write_file(cifs / "nacl.cif")
    assert main(["xrd", "build", str(cifs), "--out", str(tmp_path / "xrd"), "--per-db", "1", "--workers", "1"]) == 0
    return [("matvqa", str(tmp_path / "matvqa.jsonl"), 2), ("spm", str(tmp_path / "spm.jsonl"), 1),
            ("seephys", str(tmp_path / "seephys.jsonl"), 1), ("csmbench-mcq", str(csm), 1),
            ("csmbench-open", str(csm), 1), ("crystalxrd", str(tmp_path / "xrd" / "items.jsonl"), 1)]


def test_every_benchmark_through_the_local_model(tmp_path):
    from benchmint.models.local import LocalServer

    protocol = tmp_path / "protocol.json"
    protocol.write_text(json.dumps({"max_tokens": 48}))
    with LocalServer(log=tmp_path / "server.log") as server:
        pid = server.proc.pid
        for bench, items, count in _six_benchmarks(tmp_path):
            # a text-only model: no image is sent; xrd build's items name their CIFs where it found them
            setting = ["--setting", "TO"] if bench == "seephys" else [
                "--setting", "cif_only", "--allow-paths-outside", str(tmp_path / "cifs")] \
                if bench == "crystalxrd" else ["--blind"]
            status = main(["eval", items, "--benchmark", bench, "--model", server.model, "--base-url",
                           server.base_url, "--out", str(tmp_path / bench), "--protocol", str(protocol),
                           "--concurrency", "1", *setting])
            # A 135M model often answers off the format: such a reply is kept as a prediction (scored as
            # unreadable) and listed; any other failure (HTTP, timeout) would be a broken path.
            errors = [json.loads(x) for x in (tmp_path / bench / "errors.jsonl").read_text().splitlines()]
            assert all(e["cause"] == "unparseable" for e in errors), (bench, errors)
            assert status == (1 if errors else 0), bench
            preds = [json.loads(x) for x in (tmp_path / bench / "predictions.jsonl").read_text().splitlines()]
            assert len(preds) == count and all(p["output"].strip() for p in preds), bench
    with pytest.raises(ProcessLookupError):  # the server's process is gone with the block
        os.kill(pid, 0)


def test_serve_local_leaves_no_server_when_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    proc = subprocess.Popen([sys.executable, "-m", "benchmint.cli", "serve-local"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving smollm2-135m-instruct at http://127.0.0.1:"), line
        children = [int(c) for t in Path(f"/proc/{proc.pid}/task").iterdir()
                    for c in (t / "children").read_text().split()]
        assert len(children) == 1
        proc.send_signal(signal.SIGKILL)  # no clean-up code runs in the command
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{children[0]}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{children[0]}").exists() or "Z" in Path(f"/proc/{children[0]}/stat").read_text().split()[2]
    finally:
        if proc.poll() is None:
            proc.kill()
