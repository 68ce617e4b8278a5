"""Typed stubs of the compiled module benchmint._core (call it through benchmint's Python modules)."""

from typing import TypedDict

import numpy as np
import numpy.typing as npt

class MetricArrays(TypedDict):
    tp: npt.NDArray[np.int32]
    fp: npt.NDArray[np.int32]
    fn: npt.NDArray[np.int32]
    em: npt.NDArray[np.float64]
    spc: npt.NDArray[np.float64]
    sip_f1: npt.NDArray[np.float64]
    jaccard: npt.NDArray[np.float64]
    precision: npt.NDArray[np.float64]
    recall: npt.NDArray[np.float64]
    f1: npt.NDArray[np.float64]
    j_pen: npt.NDArray[np.float64]
    f1_pen: npt.NDArray[np.float64]
    over_predicted: npt.NDArray[np.bool_]

class _Metrics:
    @staticmethod
    def from_counts(
        tp: npt.ArrayLike,
        n_pred: npt.ArrayLike,
        n_gold: npt.ArrayLike,
        sip_lambda: float,
        sip_gamma: float,
        workers: int = 1,
        out: MetricArrays | None = None,
    ) -> MetricArrays: ...
    @staticmethod
    def from_bitmasks(
        pred: npt.NDArray[np.uint64],
        gold: npt.NDArray[np.uint64],
        sip_lambda: float,
        sip_gamma: float,
        workers: int = 1,
        out: MetricArrays | None = None,
    ) -> MetricArrays: ...
    @staticmethod
    def from_csr(
        pred_offsets: npt.NDArray[np.int64],
        pred_keys: npt.NDArray[np.int64],
        gold_offsets: npt.NDArray[np.int64],
        gold_keys: npt.NDArray[np.int64],
        sip_lambda: float,
        sip_gamma: float,
        workers: int = 1,
        out: MetricArrays | None = None,
    ) -> MetricArrays: ...

metrics: _Metrics
