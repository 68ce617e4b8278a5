"""The README's main job on the bundled samples."""

import json

from benchmint.cli import main


def test_demo_runs_every_capability(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "personality" in out and "jaccard by db" in out and "300-DPI" in out
    for task in ("mcq", "hkl"):
        summary = json.loads((tmp_path / f"score-{task}" / "summary.json").read_text())
        assert summary["errors"]["count"] == 0 and len(summary["models"]) >= 3
    assert (tmp_path / "crops" / "figure1.png").stat().st_size > 10_000
    local = tmp_path / "local" / "grades" / "summary.json"  # with benchmint[local] (scripts/setup.sh installs it)
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is not None:
        assert json.loads(local.read_text())["counts"]["answers"] == 3
    graded = json.loads((tmp_path / "grade-seephys" / "summary.json").read_text())
    assert (graded["counts"]["graded"], graded["counts"]["no_judge"]) == (7, 9)
    open_task = json.loads((tmp_path / "grade-csmbench-open" / "summary.json").read_text())
    means = {b["model"]: (b["sts"]["mean"], b["bertscore_minilm_f1"]["mean"]) for b in open_task["models"]}
    # The close paraphrases score well above the generic descriptions on both similarity metrics.
    assert min(means["careful-model"]) > 0.7 and max(means["generic-model"]) < 0.35
    assert len((tmp_path / "xrd" / "bench" / "items.jsonl").read_text().splitlines()) == 36
    assert json.loads((tmp_path / "xrd" / "scores" / "summary.json").read_text())["task"] == "hkl"
    assert json.loads((tmp_path / "xrd" / "scores-symmetry" / "summary.json").read_text())["params"]["symmetry"]
    baseline = json.loads((tmp_path / "xrd" / "eval-baseline" / "scores" / "summary.json").read_text())
    assert baseline["models"]["benchmint-simulator"]["metrics"]["jaccard"]["mean"] == 1.0
    # Outputs name the inputs as the demo gave them (copies under --out), never the installed package's files.
    from importlib.resources import files

    package_samples = str(files("benchmint") / "samples")
    named = [p for p in tmp_path.rglob("*") if p.suffix in (".json", ".jsonl", ".csv")
             and package_samples in p.read_text(encoding="utf-8", errors="replace")]
    assert named == []
    figures = (tmp_path / "harvest" / "figures.jsonl").read_text().splitlines()
    assert [json.loads(f)["label"] for f in figures] == ["1", "2"]
    # the four sample figures with no model: one question, three rejections, each with its reason
    made = tmp_path / "generate" / "csmbench"
    assert [json.loads(i)["answer"] for i in (made / "items.jsonl").read_text().splitlines()] == ["B"]
    reasons = sorted(json.loads(r)["reason"] for r in (made / "rejected.jsonl").read_text().splitlines())
    assert reasons == ["no_scale", "no_scale", "too_few_perturbations"]
    assert {json.loads(f)["member"] for f in figures} == {"papers/sample_paper.pdf"}  # read out of the tar
    report = tmp_path / "report"  # the main job ends with a report of its own outputs
    assert "data:image/png;base64," in (report / "index.html").read_text()
    for name in ("spm-dumbbell-score-mcq", "spm-lambda-gamma-score-mcq", "xrd-radar-xrd-scores",
                 "xrd-jaccard-jpen-xrd-scores-symmetry", "seephys-accuracy-by-setting-grade-seephys",
                 "generate-codes-generate-csmbench"):
        assert (report / "figures" / f"{name}.png").stat().st_size > 10_000, name
    assert (report / "tables" / "xrd-table1-xrd-bench.csv").read_text().count("\n") == 5  # 3 databases and all
