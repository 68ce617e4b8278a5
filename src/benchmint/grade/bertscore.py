"""BERTScore (Zhang et al., ICLR 2020) of open answers against reference paragraphs, offline and without torch.

csmbench.txt §IV-A.2 reports BERTScore F1. Its published numbers come from the ``bert_score`` package's default
English model (roberta-large, layer 17), whose weights no PyPI package ships. So there are two ways to score:

- a **model directory** the user has (``config.json``, ``model.safetensors``, ``tokenizer.json``, as Hugging Face
  writes them; BERT or RoBERTa architecture): real BERTScore. The layer is ``bert_score``'s tuned layer for the
  model when the directory names a model it lists (``LAYERS``), or the one given;
- ``"minilm"``: the same computation on all-MiniLM-L6-v2's last layer (the STS model, shipped in a PyPI
  package). Its values are labelled ``bertscore_minilm`` and are **not comparable** to published BERTScore.

The computation follows ``bert_score`` with its defaults (no idf weighting, no baseline rescaling): each text
is stripped and tokenised with the model's specials (RoBERTa with a leading space, as ``bert_score`` encodes
it), truncated to the tokenizer's length limit, and run through the first ``layers`` layers. With unit token
vectors, a candidate token's precision is its largest cosine to any reference token (specials included) and a
reference token's recall its largest cosine to any candidate token; P and R average them over the tokens
that are not [CLS]/[SEP] (<s>/</s>), F = 2PR / (P + R). An empty candidate or reference scores 0, as
``bert_score`` sets it. One difference: ``bert_score`` takes the maximum over a zero-padded similarity
matrix, so a token whose cosines are all negative scores 0 there when its pair is padded in a batch; here
the maximum is over real tokens only (contextual vectors of these models practically never have an
all-negative row). ``scripts/compare_bertscore.py`` runs both on the same pairs: P, R and F1 agree to 2e-7
for all-MiniLM-L6-v2 and for a RoBERTa (with transformers < 5; under transformers 5 ``bert_score`` loses the
leading space of RoBERTa inputs, see that script).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmint.grade.sts import LENGTH_SOURCES, Encoder, configured_length, model_dir

MINILM = "minilm"

#: bert_score's tuned layer per model (its ``model2layers``), for the BERT and RoBERTa models it lists.
LAYERS = {
    "bert-base-uncased": 9, "bert-large-uncased": 18, "bert-base-cased-finetuned-mrpc": 9,
    "bert-base-multilingual-cased": 9, "bert-base-chinese": 8, "roberta-base": 10, "roberta-large": 17,
    "roberta-large-mnli": 19, "roberta-base-openai-detector": 7, "roberta-large-openai-detector": 15,
    "allenai/scibert_scivocab_uncased": 8, "allenai/scibert_scivocab_cased": 9, "nfliu/scibert_basevocab_uncased": 9,
    "distilroberta-base": 5,
}


@dataclass(frozen=True)
class Scores:
    """Per pair: precision, recall and F1 (float64 arrays), and the metric's label."""

    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    label: str


class BertScorer:
    """``score(candidates, references)`` -> Scores. ``model``: a model directory, or ``"minilm"``."""

    def __init__(self, model: str | Path = MINILM, layers: int | None = None, workers: int = -1) -> None:
        root, self.label, self.name, layers = _resolve(model, layers)
        # bert_score cuts at the tokenizer's own limit, not at sentence-transformers' max_seq_length
        self.encoder = Encoder(root, workers=workers, layers=layers,
                               max_len=configured_length(root, LENGTH_SOURCES[1:]))
        self.layers = self.encoder.layers
        self.prefix_space = self.encoder.model_type == "roberta"
        tok = self.encoder.tokenizer
        self.specials = {i for i in (tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "<s>", "</s>")) if i is not None}

    def vectors(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per text: unit token vectors (tokens, dim), weights (1, 0 for specials), token ids."""
        stripped = [t.strip() if isinstance(t, str) else t for t in texts]
        ids = self.encoder.token_ids([(" " + t if self.prefix_space and t else t) for t in stripped])
        out: list = [None] * len(ids)

        def keep(chunk: np.ndarray, h: np.ndarray, mask: np.ndarray) -> None:
            for row, i in enumerate(chunk):
                v = h[row, :len(ids[i])].astype(np.float64)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                w = np.array([0.0 if t in self.specials else 1.0 for t in ids[i]])
                out[i] = (v, w, np.asarray(ids[i]))

        if ids:
            self.encoder.map_batches(ids, keep)
        return out

    def score(self, candidates: list[str], references: list[str]) -> Scores:
        candidates, references = list(candidates), list(references)
        if len(candidates) != len(references):
            raise ValueError(f"BERTScore takes two lists of one length, got {len(candidates)} and {len(references)}")
        vecs = self.vectors(candidates + references)
        n = len(candidates)
        p, r, f = np.zeros(n), np.zeros(n), np.zeros(n)
        for i in range(n):
            p[i], r[i], f[i] = greedy_match(*vecs[i][:2], *vecs[n + i][:2])
        return Scores(p, r, f, self.label)


def describe(model: str | Path = MINILM, layers: int | None = None) -> dict:
    """What summary.json records of the BERTScore used: its label, model, layer, and whether published numbers
    (roberta-large at layer 17) are comparable."""
    root, label, name, layers = _resolve(model, layers)
    if layers is None:
        layers = int(json.loads((root / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"])
    return {"metric": label, "model": name, "layers": layers,
            "comparable_to_published": label == "bertscore" and name == "roberta-large"
            and layers == LAYERS["roberta-large"]}


def _resolve(model: str | Path, layers: int | None) -> tuple[Path, str, str, int | None]:
    """(directory, label, model name, layers: None for all) of a --bertscore value."""
    if str(model) == MINILM:
        return model_dir(), "bertscore_minilm", "all-MiniLM-L6-v2", layers
    root = Path(model)
    if not (root / "config.json").is_file():
        raise ValueError(f"BERTScore model {str(model)!r} is neither a model directory (no config.json) nor "
                         f"{MINILM!r}")
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    name = str(config.get("_name_or_path") or root.name)
    if layers is None:
        layers = LAYERS.get(name, LAYERS.get(root.name))
        if layers is None:
            raise ValueError(f"no tuned BERTScore layer known for {name!r}: give the layer (--bertscore-layers)")
    return root, "bertscore", name, layers


def greedy_match(cand: np.ndarray, cand_w: np.ndarray, ref: np.ndarray, ref_w: np.ndarray) -> tuple[float, float,
                                                                                                       float]:
    """(P, R, F) of unit token vectors with their weights; 0s when either side has no weighted token."""
    if cand_w.sum() == 0 or ref_w.sum() == 0:
        return 0.0, 0.0, 0.0
    sim = cand @ ref.T
    p = float((sim.max(axis=1) * cand_w).sum() / cand_w.sum())
    r = float((sim.max(axis=0) * ref_w).sum() / ref_w.sum())
    f = 2 * p * r / (p + r) if p + r != 0 else 0.0
    return p, r, f
