"""Typed stubs of the compiled module benchmint._core (call it through benchmint's Python modules).

Submodule X serves the Python module X.py; see benchmint._dispatch for the table."""

from collections.abc import Callable
from typing import Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

class _MetricArrays(TypedDict):
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

class _Batch:
    @staticmethod
    def from_counts(
        tp: npt.ArrayLike,
        n_pred: npt.ArrayLike,
        n_gold: npt.ArrayLike,
        sip_lambda: float,
        sip_gamma: float,
        workers: int = 1,
        out: _MetricArrays | None = None,
    ) -> _MetricArrays: ...
    @staticmethod
    def from_bitmasks(
        pred: npt.NDArray[np.uint64],
        gold: npt.NDArray[np.uint64],
        sip_lambda: float,
        sip_gamma: float,
        workers: int = 1,
        out: _MetricArrays | None = None,
    ) -> _MetricArrays: ...
    @staticmethod
    def from_csr(
        pred_offsets: npt.NDArray[np.int64],
        pred_keys: npt.NDArray[np.int64],
        gold_offsets: npt.NDArray[np.int64],
        gold_keys: npt.NDArray[np.int64],
        sip_lambda: float,
        sip_gamma: float,
        workers: int = 1,
        out: _MetricArrays | None = None,
    ) -> _MetricArrays: ...

batch: _Batch

class _GoldIndex:
    @property
    def n_items(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def errors(self) -> list[dict]: ...
    def ids_of(self, indices: list[int]) -> list[str]: ...
    def keys_of(self, indices: list[int]) -> list[list[int]]: ...
    def strata(self) -> dict[str, tuple[npt.NDArray[np.int64], list[str]]]: ...

class _Pipeline:
    GoldIndex: type[_GoldIndex]
    @staticmethod
    def float_repr(v: float) -> str: ...
    @staticmethod
    def json_string(v: str) -> str: ...
    @staticmethod
    def load_gold(
        path: str,
        task: str,
        by: list[str],
        workers: int,
        fallback: Callable[[bytes, int], tuple[str | None, tuple | None, list[str] | None, dict | None]],
        make_error: Callable[[str, str, int | None, str, str | None], dict],
    ) -> _GoldIndex: ...
    @staticmethod
    def score_stream(
        pred_paths: list[str],
        gold: _GoldIndex,
        sip_lambda: float,
        sip_gamma: float,
        workers: int,
        out_path: str,
        fallback: Callable[[bytes, str, int], tuple[list[dict], tuple | None]],
        make_error: Callable[[str, str, int | None, str, str | None], dict],
        progress: Callable[[int], object],
        errors: list[dict],
        rows_per_file: int = 0,
    ) -> dict[str, Any]: ...

class _Extract:
    @staticmethod
    def choices(text: str) -> list[str] | None | Literal["undecided"]: ...
    @staticmethod
    def hkls(text: str) -> list[tuple[int, ...]] | None | Literal["undecided"]: ...
    @staticmethod
    def extract(text: str, kind: str) -> list | None | Literal["undecided"]: ...

class _Triage:
    @staticmethod
    def count_paths(content: bytes, resources: dict[str, Any] | None = None) -> tuple[int, int, bool]: ...
    @staticmethod
    def count_pages(pages: list[tuple[bytes, dict[str, Any] | None]], workers: int = 1) -> list[tuple[int, int, bool]]: ...
    @staticmethod
    def drop_invocations(content: bytes, names: list[str]) -> tuple[bytes, int]: ...
    @staticmethod
    def figure_words(pages: list[tuple[bytes, dict[str, Any] | None]], fonts: dict[int, tuple[int, int, dict[int, bytes]]],
                     workers: int = 1) -> list[bool]: ...

class _Profile:
    @staticmethod
    def broaden(
        two_theta: npt.NDArray[np.float64], intensity: npt.NDArray[np.float64], fwhm: float, eta: float,
        ka2_ratio: float, wavelength_ka1: float, wavelength_ka2: float, grid_start: float, grid_step: float,
        n_grid: int, caglioti: tuple[float, float, float] | None, window_deg: float, gt_window: float,
        window_fwhms: float | None = None,
    ) -> tuple[npt.NDArray[np.float64], int, float, npt.NDArray[np.int64]]: ...
    @staticmethod
    def broaden_batch(
        two_thetas: list[npt.NDArray[np.float64]], intensities: list[npt.NDArray[np.float64]], fwhm: float,
        eta: float, ka2_ratio: float, wavelength_ka1: float, wavelength_ka2: float, grid_start: float,
        grid_step: float, n_grid: int, caglioti: tuple[float, float, float] | None, window_deg: float,
        gt_window: float, window_fwhms: float | None = None, workers: int = 1,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64], list[npt.NDArray[np.int64]]]: ...

class _Sticks:
    @staticmethod
    def reflections(recip: npt.NDArray[np.float64], real: npt.NDArray[np.float64], max_r: float, min_r: float
                    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...
    @staticmethod
    def intensities(hkl: npt.NDArray[np.int64], g: npt.NDArray[np.float64], theta: npt.NDArray[np.float64],
                    frac: npt.NDArray[np.float64], occu: npt.NDArray[np.float64], atom_group: npt.NDArray[np.int64],
                    z: npt.NDArray[np.float64], coeff: npt.NDArray[np.float64], dw: npt.NDArray[np.float64],
                    ustar: npt.NDArray[np.float64] | None = None, workers: int = 1) -> npt.NDArray[np.float64]: ...
    @staticmethod
    def merge_peaks(keys: npt.NDArray[np.int64], intensities: npt.NDArray[np.float64], hkl: npt.NDArray[np.int64],
                    hexagonal: bool, threshold: float) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64],
                                                                npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                                npt.NDArray[np.int64]]: ...

class _Geometry:
    @staticmethod
    def transform_boxes(boxes: npt.NDArray[np.float64], matrix: list[float], workers: int = 1
                        ) -> npt.NDArray[np.float64]: ...

class _Cifread:
    @staticmethod
    def pbc_groups(positions: npt.NDArray[np.float64], tol: float,
                   margin: float) -> tuple[npt.NDArray[np.int64], bool, bool]: ...
    @staticmethod
    def pbc_close(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], tol: float,
                  margin: float) -> tuple[npt.NDArray[np.bool_], bool]: ...

pipeline: _Pipeline
extract: _Extract
triage: _Triage
profile: _Profile
sticks: _Sticks
geometry: _Geometry
cifread: _Cifread
