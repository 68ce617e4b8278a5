"""The plain numpy reference of the MiniLM encoder's element-wise steps (``benchmint.grade.sts`` compiles them).

Three steps of each transformer layer are not matrix products: the exact-erf GELU, the attention softmax
(scaled scores, padding masked) and the residual add followed by LayerNorm. They are written here as plain
numpy, one array operation at a time; ``benchmint.grade.sts`` has the same steps as parallel Numba kernels
and runs these under ``BENCHMINT_IMPL=reference``. The products themselves are BLAS in both forms.
"""

from __future__ import annotations

import numpy as np


def float32_array(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` when it is a writable C-contiguous float32 array (what both forms take); ValueError otherwise."""
    if not (isinstance(x, np.ndarray) and x.dtype == np.float32 and x.flags.c_contiguous and x.flags.writeable):
        raise ValueError(f"{name} must be a writable C-contiguous float32 array")
    return x


def check_attention(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The mask as float32 (n, L) for scores (n, heads, L, L); ValueError for other shapes."""
    float32_array(scores, "scores")
    mask = np.asarray(mask, dtype=np.float32)
    if scores.ndim != 4 or scores.shape[2] != scores.shape[3] or mask.shape != (scores.shape[0], scores.shape[3]):
        raise ValueError(f"scores must be (n, heads, L, L) and mask (n, L); got {scores.shape} and {mask.shape}")
    return mask


def check_add_norm(x: np.ndarray, residual: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> None:
    """ValueError unless x (..., dim) is float32 and residual, weight (dim,) and bias (dim,) fit it."""
    float32_array(x, "x")
    if x.ndim < 1 or np.shape(residual) != x.shape or np.shape(weight) != x.shape[-1:] \
            or np.shape(bias) != x.shape[-1:]:
        raise ValueError(f"add_norm takes x and residual of one shape and weight, bias of its last axis; got "
                         f"{x.shape}, {np.shape(residual)}, {np.shape(weight)}, {np.shape(bias)}")


def gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)), BERT's exact GELU (float32 in, float32 out)."""
    from scipy.special import erf

    float32_array(x, "x")
    return 0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0))))


def softmax(scores: np.ndarray, mask: np.ndarray, scale: float) -> np.ndarray:
    """Softmax over the last axis of ``scores * scale`` (n, heads, L, L), keys with ``mask`` 0 left out."""
    mask = check_attention(scores, mask)
    bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
    s = scores * np.float32(scale) + bias
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return s / s.sum(axis=-1, keepdims=True)


def add_norm(x: np.ndarray, residual: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm(x + residual) over the last axis."""
    check_add_norm(x, residual, weight, bias)
    return layer_norm(x + residual, weight, bias, eps)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias
