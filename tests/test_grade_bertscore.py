"""BERTScore: greedy matching worked by hand, the bert_score rules (specials, empty texts, layers), the model
directory checks, and the metric in benchmint grade for CSMBench's open answers."""

import json
import shutil

import numpy as np
import pytest

from benchmint.cli import main
from benchmint.grade.bertscore import LAYERS, BertScorer, describe, greedy_match
from benchmint.grade.sts import model_dir


def _unit(*rows):
    v = np.array(rows, dtype=np.float64)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_greedy_match_by_hand():
    # Candidate tokens (1,0) and (0,1); reference tokens (1,0) and (1,1)/sqrt2.
    cand, ref = _unit([1, 0], [0, 1]), _unit([1, 0], [1, 1])
    p, r, f = greedy_match(cand, np.ones(2), ref, np.ones(2))
    s = 1 / np.sqrt(2)
    # precision: best of (1, s) and (0, s) -> (1 + s) / 2; recall: best of (1, 0) and (s, s) -> (1 + s) / 2
    assert p == pytest.approx((1 + s) / 2) and r == pytest.approx((1 + s) / 2) and f == pytest.approx((1 + s) / 2)
    # A weight of 0 (a [CLS]/[SEP] token) leaves the token out of the average, not out of the matching.
    p, r, _ = greedy_match(cand, np.array([1.0, 0.0]), ref, np.array([0.0, 1.0]))
    assert p == pytest.approx(1.0) and r == pytest.approx(s)
    assert greedy_match(cand, np.zeros(2), ref, np.ones(2)) == (0.0, 0.0, 0.0)
    # Opposite vectors: P = R = -1, F = 2PR/(P+R) = -1; P + R = 0 gives F = 0 (bert_score turns the NaN into 0).
    assert greedy_match(_unit([1, 0]), np.ones(1), _unit([-1, 0]), np.ones(1)) == pytest.approx((-1, -1, -1))
    p, r, f = greedy_match(_unit([1, 0], [0, 1]), np.array([1.0, 1.0]), _unit([1, 0], [-1, 0]),
                           np.array([0.0, 1.0]))
    assert (p, r) == pytest.approx((0.5, 0.0)) and f == 0.0


@pytest.fixture(scope="module")
def minilm():
    return BertScorer("minilm")


def test_minilm_variant_rules(minilm):
    assert minilm.label == "bertscore_minilm" and minilm.layers == 6 and minilm.encoder.max_len == 512
    text = "The grain boundaries are decorated with fine precipitates."
    got = minilm.score([text, "  " + text + "\n", "", text], [text, text, text, ""])
    # The same text (after stripping) scores 1; an empty candidate or reference scores 0.
    assert got.f1[:2] == pytest.approx([1.0, 1.0], abs=1e-6) and list(got.f1[2:]) == [0.0, 0.0]
    assert got.label == "bertscore_minilm"
    vecs, weights, ids = minilm.vectors([text])[0]
    assert weights[0] == weights[-1] == 0 and weights[1:-1].all()  # [CLS] and [SEP] carry no weight
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
    # Word order matters to contextual vectors, but shared words keep the score high; unrelated text is lower.
    near = minilm.score([text], ["Fine precipitates decorate the grain boundaries."]).f1[0]
    far = minilm.score([text], ["A cat sat on the mat in the sun."]).f1[0]
    assert 0 < far < near < 1
    with pytest.raises(ValueError, match="one length"):
        minilm.score(["a"], ["a", "b"])


def test_long_texts_are_cut_at_the_tokenizer_limit(minilm):
    head = "the sample shows equiaxed grains " * 120  # far beyond 512 word pieces
    a, b = minilm.vectors([head + "and nothing else", head + "but a different ending about cats"])
    assert len(a[2]) == len(b[2]) == 512


def test_model_directories(tmp_path):
    with pytest.raises(ValueError, match="neither a model directory"):
        BertScorer(tmp_path / "missing")
    # A copy of the MiniLM directory under a model name bert_score lists takes that model's tuned layer...
    root = tmp_path / "bert-base-uncased"
    shutil.copytree(model_dir(), root)
    config = json.loads((root / "config.json").read_text())
    config.pop("_name_or_path", None)
    (root / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="has 6 layers; cannot take 9"):
        BertScorer(root)  # bert-base-uncased's layer 9 does not exist in a 6-layer copy
    assert BertScorer(root, layers=3).layers == 3
    assert describe(root, 3) == {"metric": "bertscore", "model": "bert-base-uncased", "layers": 3,
                                 "comparable_to_published": False}
    # ...an unknown name needs the layer, and other architectures are refused.
    other = tmp_path / "my-encoder"
    shutil.copytree(root, other)
    with pytest.raises(ValueError, match="give the layer"):
        BertScorer(other)
    config["model_type"] = "t5"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="not a BERT-family encoder"):
        BertScorer(other, layers=2)
    (other / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="no model.safetensors"):
        BertScorer(other, layers=2)
    assert LAYERS["roberta-large"] == 17
    assert describe("minilm")["comparable_to_published"] is False


def test_grade_reports_bertscore_beside_sts(tmp_path):
    from test_grade import _csm_open, _lines, _write

    items = _csm_open(tmp_path, n=4)
    preds = [{"id": str(i), "model": m, "output": text}
             for m, texts in (("close", [it["describe_paragraph"] for it in items]),
                              ("far", ["A cat sat on the mat."] * 3 + [""]))
             for i, text in enumerate(texts)]
    _write(tmp_path / "preds.jsonl", preds)
    assert main(["grade", str(tmp_path / "preds.jsonl"), "--gold", str(tmp_path), "--benchmark", "csmbench-open",
                 "--out", str(tmp_path / "out"), "--bertscore", "minilm", "--quiet"]) == 0
    grades = _lines(tmp_path / "out" / "grades.jsonl")
    close = [g["bertscore_minilm_f1"] for g in grades if g["model"] == "close"]
    far = [g["bertscore_minilm_f1"] for g in grades if g["model"] == "far"]
    assert close == pytest.approx([1.0] * 4, abs=1e-6) and far[3] == 0.0 and max(far) < min(close)
    assert all("bertscore_f1" not in g for g in grades)  # the variant never takes the published metric's name
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["bertscore"] == {"metric": "bertscore_minilm", "model": "all-MiniLM-L6-v2", "layers": 6,
                                    "comparable_to_published": False}
    block = {b["model"]: b for b in summary["models"]}
    assert block["close"]["bertscore_minilm_f1"]["mean"] == pytest.approx(1.0, abs=1e-6)
    assert set(block["far"]["bertscore_minilm_f1_by"]["scale"]) == {"AtomScale", "Macroscale", "Mesoscale",
                                                                   "Microscale"}
