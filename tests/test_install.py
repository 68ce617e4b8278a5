"""`pip install .` into a bare virtualenv (no extras, nothing else) gives a working `benchmint`.

This is what a user of the package gets, so it proves the declared dependencies
are enough to run the command and the README's quickest example.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

README_EXAMPLE = """
from benchmint.metrics import extract_answer, score_batch, score_item
assert abs(score_item({"A", "B", "C"}, {"A", "B"})["sip_f1"] - 0.24) < 1e-12
assert extract_answer("**Answer:** (B)", "mcq") == ["B"]
scores = score_batch([{"A"}, {"B", "C"}], [{"A"}, {"B"}], task="mcq", workers=-1)
assert list(scores["jaccard"]) == [1.0, 0.5]
print("ok")
"""


def test_pip_install_into_a_bare_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT),
         f"--config-settings=build-dir={tmp_path / 'build'}"],  # a clean build, not the checkout's
        capture_output=True, text=True)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    cli = venv / "bin" / "benchmint"
    helped = subprocess.run([str(cli), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "score" in helped.stdout and "harvest" in helped.stdout
    example = subprocess.run([str(py), "-c", README_EXAMPLE], capture_output=True, text=True, cwd=tmp_path)
    assert example.stdout.strip() == "ok", example.stderr
    samples = subprocess.run([str(py), "-c", "from importlib.resources import files; "
                              "print(files('benchmint') / 'samples')"], capture_output=True, text=True)
    sample_dir = Path(samples.stdout.strip())
    scored = subprocess.run([str(cli), "score", str(sample_dir / "mcq_pred.jsonl"), "--gold",
                             str(sample_dir / "mcq_gold.jsonl"), "--task", "mcq", "--out", str(tmp_path / "s"),
                             "--quiet"], capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["errors"]["count"] == 0
    # the benchmarks' prompt and protocol files are package data of the wheel
    shipped = subprocess.run([str(py), "-c", "from benchmint import benchmarks; b = benchmarks.get('seephys'); "
                              "print(len(b.prompt_files('VO')), b.protocol.max_tokens)"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert shipped.stdout.split() == ["4", "8192"], shipped.stderr
    # so are the lmms-eval task directories (YAML and utils.py)
    tasks = subprocess.run([str(py), "-c", "from benchmint.integrations.lmms import task_dirs; "
                            "print(len(list(task_dirs().glob('*/*.yaml'))), len(list(task_dirs().glob('*/utils.py'))))"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert tasks.stdout.split() == ["8", "6"], tasks.stderr
