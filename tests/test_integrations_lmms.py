"""lmms-eval task directories: the YAML against lmms-eval's task schema, the utils.py functions on the doc and
results shapes lmms-eval passes, and their scores against benchmint's own.

lmms-eval itself is not installed (155 packages, 3.1 GB of wheels with torch and CUDA: see docs/integrations.md),
so its loader is stood in for as its documentation and code describe it: YAML with ``!function module.name``
resolved from the ``module.py`` beside the YAML file, ``process_results(doc, results)`` returning one entry per
metric of ``metric_list``, each metric's ``aggregation`` given the list of those entries.
"""

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from benchmint import benchmarks
from benchmint.cli import main
from benchmint.integrations.lmms import task_dirs

from chat_server import ChatServer, Reply, prompt_of

YAMLS = sorted(task_dirs().glob("*/*.yaml"))
# lmms-eval's TaskConfig keys (lmms_eval/api/task.py) this project's files may use
SCHEMA = {"task", "dataset_path", "dataset_name", "dataset_kwargs", "test_split", "output_type", "doc_to_visual",
          "doc_to_text", "doc_to_target", "process_results", "generation_kwargs", "metric_list", "metadata"}


class _Function:
    def __init__(self, module: Path, name: str) -> None:
        self.module, self.name = module, name


def _load(path: Path) -> dict:
    """The YAML as lmms-eval reads it, ``!function utils.x`` resolved from utils.py beside it."""
    modules: dict[Path, object] = {}

    def function(loader, node):
        module, name = loader.construct_scalar(node).rsplit(".", 1)
        file = path.parent / f"{module}.py"
        if file not in modules:
            spec = importlib.util.spec_from_file_location(module, file)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            modules[file] = mod
        return getattr(modules[file], name)

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", function)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)


def test_there_is_a_task_per_benchmark_and_seephys_setting():
    names = {p.stem for p in YAMLS}
    assert names == {"benchmint_seephys_tv", "benchmint_seephys_tc", "benchmint_seephys_to", "benchmint_spm",
                     "benchmint_crystalxrd", "benchmint_matvqa", "benchmint_csmbench_mcq", "benchmint_csmbench_open"}


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.stem)
def test_yaml_follows_the_task_schema(path):
    cfg = _load(path)
    assert set(cfg) <= SCHEMA and cfg["task"] == path.stem and cfg["output_type"] == "generate_until"
    for key in ("doc_to_visual", "doc_to_text", "doc_to_target", "process_results"):
        assert callable(cfg[key]), key
    # lmms-eval adds the stop string "\n\n" to generation_kwargs without "until": it must be there, and empty
    assert cfg["generation_kwargs"]["until"] == [] and cfg["generation_kwargs"]["do_sample"] is False
    for m in cfg["metric_list"]:
        assert set(m) == {"metric", "aggregation", "higher_is_better"} and callable(m["aggregation"])
        assert m["aggregation"].__name__ == m["metric"]


def test_the_task_files_import_without_any_api_key():
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k and not k.startswith("BENCHMINT_JUDGE")}
    code = ("import importlib.util, sys\n"
            "for f in sys.argv[1:]:\n"
            "    spec = importlib.util.spec_from_file_location('utils', f)\n"
            "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n")
    files = [str(p) for p in task_dirs().glob("*/utils.py")]
    done = subprocess.run([sys.executable, "-c", code, *files], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _pil(color, size=(6, 4)):
    return Image.new("RGB", size, color)


# SeePhys rows as `datasets` gives them from the parquet: images a list of PIL images, level an int.
DOCS = [
    {"index": 1, "question": "An engine does 1.2e5 J of work in 2 min. Its power?", "answer": "1 kW", "subject": "CM",
     "level": 2, "language": "English", "sig_figs": "2", "caption": "An engine.", "images": [_pil("red")]},
    {"index": 2, "question": "Which ray leaves the prism?", "answer": "Ray E", "subject": "OPT", "level": 5,
     "language": "English", "sig_figs": None, "caption": "A prism.", "images": [_pil("red"), _pil("blue")]},
    {"index": 3, "question": "Where is the field zero?", "answer": "Both Regions II and III", "subject": "EM",
     "level": 4, "language": "English", "sig_figs": "", "caption": "Two charges.", "images": [_pil("green")]},
    {"index": 4, "question": "求加速度。", "answer": "2 m/s^2", "subject": "CM", "level": 3, "language": "Chinese",
     "sig_figs": None, "caption": "斜面。", "images": [_pil("blue")]},
]
# What a model writes: reasoning with blank lines, the answer closed by </answer> (the public task's stop strings
# cut both); an answer that is not an integer (its integer-only rule reads none of these).
RESULTS = {1: "<think>W = 1.2e5 J.\n\nt = 120 s, so P = 1000 W.</think>\n<answer>1.0 kW</answer>",
           2: "<think>Ray E leaves.\n\n</think><answer>Ray E</answer>",
           3: "<answer>regions II and III</answer>",
           4: "<answer>3 m/s^2</answer>"}


def _judge(body):
    prompt = prompt_of(body)
    return "Judgement: 1" if "regions II and III" in prompt.rsplit("Model Answer:", 1)[-1] else "Judgement: 0"


def test_seephys_functions_on_lmms_eval_shapes_score_as_benchmint_grade(tmp_path, monkeypatch):
    cfg = _load(task_dirs() / "seephys" / "benchmint_seephys_tv.yaml")
    bench = benchmarks.get("seephys")
    # the same rows as benchmint's own JSONL, images as files: the prompt benchmint eval sends
    rows = []
    for d in DOCS:
        names = []
        for k, im in enumerate(d["images"]):
            im.save(tmp_path / f"{d['index']}_{k}.png")
            names.append(f"{d['index']}_{k}.png")
        rows.append({**d, "images": names})
    (tmp_path / "own.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    items = [it for _, it in bench.read_items(tmp_path / "own.jsonl", "TV")]
    for doc, item in zip(DOCS, items):
        assert cfg["doc_to_text"](doc, None) == bench.prompt(item, "TV").text()
    assert "2 significant figures" in cfg["doc_to_text"](DOCS[0], None)
    assert [im.size for im in cfg["doc_to_visual"](DOCS[1])] == [(6, 4), (6, 4)]
    assert cfg["doc_to_target"](DOCS[2]) == "Both Regions II and III"
    kept = [cfg["process_results"](doc, [RESULTS[doc["index"]]]) for doc in DOCS]
    assert all(set(k) == {"accuracy", "accuracy_undecided_as_wrong"} for k in kept)
    # the same rows through benchmint grade
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({k: v for k, v in d.items() if k != "images"},
                                                             ensure_ascii=False) + "\n" for d in DOCS))
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps({"id": str(i), "output": r}) + "\n"
                                                  for i, r in RESULTS.items()))
    with ChatServer() as server:
        server.default = Reply(text=_judge)
        monkeypatch.setenv("BENCHMINT_JUDGE_MODEL", "judge")
        monkeypatch.setenv("BENCHMINT_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        accuracy = cfg["metric_list"][0]["aggregation"]([k["accuracy"] for k in kept])
        lower = cfg["metric_list"][1]["aggregation"]([k["accuracy_undecided_as_wrong"] for k in kept])
        assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path / "items.jsonl"), "--benchmark",
                     "seephys", "--out", str(tmp_path / "g"), "--judge-model", "judge", "--judge-base-url",
                     server.url, "--retry-delay", "0", "--workers", "1", "--quiet"]) == 0
    summary = json.loads((tmp_path / "g" / "summary.json").read_text())["models"][0]
    assert accuracy == pytest.approx(summary["accuracy"]["mean"]) == pytest.approx(3 / 4)  # by hand: 1, 2, 3 right
    assert lower == pytest.approx(3 / 4)
    assert bench.name == "seephys"


def test_seephys_without_a_judge_leaves_the_open_answers_out(monkeypatch):
    monkeypatch.delenv("BENCHMINT_JUDGE_MODEL", raising=False)
    cfg = _load(task_dirs() / "seephys" / "benchmint_seephys_to.yaml")
    kept = [cfg["process_results"](doc, [RESULTS[doc["index"]]])["accuracy"] for doc in DOCS]
    # rows 1 and 2 are decided by the screen and the rules; 3 and 4 need a judge: not counted, not wrong
    assert cfg["metric_list"][0]["aggregation"](kept) == 1.0
    assert cfg["metric_list"][1]["aggregation"](kept) == pytest.approx(2 / 4)


def _png(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    _pil("white").save(buf, format="PNG")
    path.write_bytes(buf.getvalue())


def test_crystalxrd_rows_with_their_image_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMINT_ITEMS_ROOT", str(tmp_path))
    docs = [{"file_name": "images/mp/mp-1.png", "sample_id": "mp-1", "formula": "NaCl", "cif_content": "data_x\n",
             "hkl_convention": "3-index", "gt_hkls": "[[2, 0, 0], [0, 2, 0]]"},
            {"file_name": "images/mp/mp-2.png", "sample_id": "mp-2", "formula": "ZnO", "cif_content": "data_y\n",
             "hkl_convention": "4-index", "gt_hkls": "[[1, 0, -1, 1]]"}]
    for d in docs:
        _png(tmp_path / d["file_name"])
    cfg = _load(task_dirs() / "crystalxrd" / "benchmint_crystalxrd.yaml")
    assert len(cfg["doc_to_visual"](docs[0])) == 1 and "NaCl" in cfg["doc_to_text"](docs[0])
    assert "[h,k,i,l]" in cfg["doc_to_text"](docs[1])  # the 4-index prompt
    kept = [cfg["process_results"](docs[0], ['{"max_peak_hkls": [[2, 0, 0]]}']),
            cfg["process_results"](docs[1], ['{"max_peak_hkls": [[1, 0, -1, 1]]}'])]
    by_metric = {m["metric"]: m["aggregation"]([k[m["metric"]] for k in kept]) for m in cfg["metric_list"]}
    assert by_metric["jaccard"] == pytest.approx((1 / 2 + 1) / 2) and by_metric["em"] == pytest.approx(1 / 2)
    assert by_metric["recall"] == pytest.approx((1 / 2 + 1) / 2) and by_metric["precision"] == 1.0


def test_csmbench_mcq_from_the_imagefolder_shape():
    # `datasets` decodes the ImageFolder's file_name into an "image" column; options come as a JSON string
    options = json.dumps([{"label": c, "caption": f"caption {c}"} for c in "ABCD"])
    docs = [{"index": 0, "image": _pil("red"), "options": options, "correct_answer": "C", "scale": "Microscale"},
            {"index": 1, "image": _pil("blue"), "options": options, "correct_answer": "A", "scale": "AtomScale"}]
    cfg = _load(task_dirs() / "csmbench_mcq" / "benchmint_csmbench_mcq.yaml")
    assert "C. caption C" in cfg["doc_to_text"](docs[0]) and len(cfg["doc_to_visual"](docs[0])) == 1
    kept = [cfg["process_results"](docs[0], ["The answer is C"]), cfg["process_results"](docs[1], ["b"])]
    # "The answer is C" is C (the released parser reads the a of "answer"); a lower-case "b" is B: wrong
    assert cfg["metric_list"][0]["aggregation"]([k["accuracy"] for k in kept]) == pytest.approx(1 / 2)
