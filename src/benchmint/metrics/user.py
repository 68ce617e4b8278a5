"""User-defined metrics: a plain Python function of an item's counts, compiled by Numba into a parallel batch kernel.

An evaluator writes a metric as a function of four ints, an item's
(TP, FP, FN, |G|), that returns a number::

    from benchmint.metrics.user import evaluate, metric

    @metric
    def weighted_jaccard(tp, fp, fn, g):
        if tp + fp + fn == 0:
            return 1.0
        return tp / (tp + 2.0 * fp + fn)

    values = evaluate(weighted_jaccard, tp, fp, fn, g, workers=-1)   # float64 array

``evaluate`` runs a Numba kernel over the rows (``workers``: 1 serial, -1 all
cores), or the plain loop of ``user_ref`` when ``BENCHMINT_IMPL=reference``.
Functions the metric calls are marked ``@helper``: they stay plain Python for
the reference and are compiled into the kernel. ``score_batch(...,
user_metrics=[...])`` adds the columns beside the built-in
metrics and ``benchmint score --metric NAME=MODULE:FUNCTION`` adds them to
scores.jsonl and the summary.

Semantics. Row i is ``float(fn(tp[i], fp[i], fn[i], g[i]))``; the counts must
satisfy tp, fp, fn >= 0 and g = tp + fn (else ValueError). The compiled
function gets int64 arguments and is compiled with Python's error model, so
division by zero raises ZeroDivisionError as in Python. When rows fail, the
error of the lowest failing row is raised, and it is the error the reference
raises there: the Python function is called again on that row (its exception
carries a note naming the metric and the row). A function must return an int,
float or bool; anything else is a TypeError, raised when the kernel is
compiled (by the reference, at the first row that returns one). Where Numba's nopython
semantics differ from Python's, the compiled values follow Numba: int64
arithmetic wraps instead of growing, and math-domain errors
(``math.sqrt(-1)``, ``math.log(0)``) give NaN/-inf instead of ValueError;
keep large products in floats. A function Numba cannot compile raises
MetricCompileError naming the metric; there is no fallback to the loop.

Compilation and its cache. The kernel, with the user's function compiled into
it, is built on the first ``evaluate`` (or ``UserMetric.compile()``) with
``cache=True``: Numba stores it beside the file that defines the metric (its
``__pycache__``, or ``NUMBA_CACHE_DIR``), so the next process loads it instead
of compiling (about 2 s cold, 0.5 s loaded, most of it Numba's own start-up;
see benches/README.md). The cache entry is keyed by
everything the compiled code freezes: the function's bytecode, defaults and
closure values (two metrics made by one factory with different λ get
different entries), the globals it reads (numbers, arrays, helper functions
followed into other files) and this module's own source; Numba drops the
entry when the defining file changes. A function without a source file (a
lambda typed at ``python -c`` or built by ``exec``), or one that reads a
global whose value cannot be pinned down (an arbitrary object), is compiled
the same way in every process without the on-disk cache; ``cache_reason``
says why.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import inspect
import marshal
import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import prange
from numba.core import types as nbtypes
from numba.core.dispatcher import Dispatcher
from numba.core.errors import NumbaError
from numba.extending import overload, register_jitable

from benchmint import _dispatch
from benchmint.metrics import user_ref
from benchmint.parallel import resolve_workers

__all__ = ["MetricCompileError", "Run", "UserMetric", "add_columns", "evaluate", "helper", "jit", "load_metric",
           "metric"]

# Below this many rows per thread a thread costs more than it saves (as in the C++ kernels).
ROWS_PER_THREAD = 4096
_INVALID, _RAISED = 1, 2
_INT32 = np.iinfo(np.int32)
_OWN_SOURCE = hashlib.sha256(Path(__file__).read_bytes()).digest()
_LAUNCH_LOCK = threading.Lock()


class MetricCompileError(TypeError):
    """Numba cannot compile a user metric in nopython mode."""


def jit(*, parallel: bool = False, cache: bool = True):
    """Numba's njit with benchmint's options.

    ``error_model="python"``: integer and float division by zero raise
    ZeroDivisionError, as the Python reference does. No fastmath, so the
    compiled values equal the reference's bit for bit. ``parallel`` only for
    top-level kernels whose threads write disjoint rows and per-chunk buffers
    that the caller reduces afterwards.
    """
    return numba.njit(cache=cache, parallel=parallel, error_model="python", nogil=True)


def helper(fn):
    """Mark a plain function that metrics call: plain Python when called from Python (the reference), compiled
    into the kernel, with ``jit``'s error model, when called from a compiled metric."""
    return register_jitable(error_model="python")(fn)


def _as_float(value):
    return float(value)


@overload(_as_float)
def _as_float_typed(value):
    # Numbers only: any other return type fails typing, and compile() reports it.
    if isinstance(value, nbtypes.Boolean):
        return lambda value: 1.0 if value else 0.0
    if isinstance(value, (nbtypes.Integer, nbtypes.Float)):
        return lambda value: float(value)
    return None


# Templates of the two compiled functions; each metric gets copies whose
# globals name its own compiled function (_metric) and row loop (_rows).
def _rows_template(tp, fp, fn, g, out, begin, end):
    for i in range(begin, end):
        t = np.int64(tp[i])
        p = np.int64(fp[i])
        f = np.int64(fn[i])
        s = np.int64(g[i])
        if t < 0 or p < 0 or f < 0 or s != t + f:
            return i, _INVALID
        try:
            out[i] = _as_float(_metric(t, p, f, s))  # noqa: F821 - bound per metric
        except Exception:  # noqa: BLE001 - the caller re-raises the reference's error for this row
            return i, _RAISED
    return -1, 0


def _kernel_template(tp, fp, fn, g, out, first_bad, kind, thread):
    n = tp.shape[0]
    chunks = first_bad.shape[0]
    step = (n + chunks - 1) // chunks
    for c in prange(chunks):
        begin = min(n, c * step)
        end = min(n, begin + step)
        row, k = _rows(tp, fp, fn, g, out, begin, end)  # noqa: F821 - bound per metric
        first_bad[c] = row
        kind[c] = k
        thread[c] = numba.get_thread_id()


_I32 = nbtypes.Array(nbtypes.int32, 1, "C")
_I64 = nbtypes.Array(nbtypes.int64, 1, "C")
_KERNEL_SIG = (_I32, _I32, _I32, _I32, nbtypes.Array(nbtypes.float64, 1, "C"), _I64, _I64, _I64)

_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _fingerprint(obj, h, seen: set[int]) -> bool:
    """Feed ``h`` everything of ``obj`` that compiled code may freeze; False if some part cannot be pinned down."""
    if isinstance(obj, Dispatcher):
        obj = obj.py_func
    if isinstance(obj, _PLAIN):
        h.update(repr((type(obj).__qualname__, obj)).encode())
        return True
    if isinstance(obj, tuple):
        h.update(b"tuple%d" % len(obj))
        return all([_fingerprint(x, h, seen) for x in obj])
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        h.update(repr((arr.dtype.str, arr.shape)).encode() + arr.tobytes())
        return True
    if isinstance(obj, types.ModuleType):
        h.update(b"module " + obj.__name__.encode())
        return True
    if isinstance(obj, (type, types.BuiltinFunctionType, np.ufunc)):
        h.update(repr(("named", getattr(obj, "__module__", None), getattr(obj, "__qualname__", obj.__name__))).encode())
        return True
    if isinstance(obj, types.FunctionType):
        if id(obj) in seen:
            h.update(b"again " + obj.__qualname__.encode())
            return True
        seen.add(id(obj))
        code = obj.__code__
        h.update(marshal.dumps(code))
        try:
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
        except ValueError:  # an empty cell
            return False
        kwdefaults = tuple(sorted((obj.__kwdefaults__ or {}).items()))
        ok = _fingerprint((obj.__defaults__ or (), kwdefaults, cells), h, seen)
        for name in sorted(_global_names(code)):
            if name in obj.__globals__:
                h.update(b"global " + name.encode())
                ok = _fingerprint(obj.__globals__[name], h, seen) and ok
        return ok
    return False


def _copy(template: types.FunctionType, fn: types.FunctionType, kind: str, digest: str, glb: dict) -> types.FunctionType:
    # The copy claims the metric's file and first line, so Numba's cache lives
    # beside that file and is dropped when the file changes; the digest in its
    # name keeps metrics of one file (and one line) apart.
    qualname = f"{fn.__qualname__}.benchmint_{kind}_{digest[:20]}"
    code = template.__code__.replace(co_filename=fn.__code__.co_filename, co_firstlineno=fn.__code__.co_firstlineno,
                                     co_name=f"benchmint_{kind}", co_qualname=qualname)
    func = types.FunctionType(code, glb, code.co_name)
    func.__qualname__ = qualname
    return func


@dataclass(frozen=True)
class Run:
    """How the last ``evaluate`` of a metric ran: path "compiled" or "reference", rows, chunks, distinct threads."""

    path: str
    rows: int
    chunks: int
    threads: int


class UserMetric:
    """A named metric ``fn(tp, fp, fn, g) -> number`` and, once compiled, its batch kernel.

    Calling the object calls the Python function. Attributes set by
    ``compile()``: ``cached`` (the on-disk cache is used), ``cache_reason``
    (why not, else None), ``cache_hit`` (the kernel was loaded, not
    compiled) and ``compile_seconds`` (compiling or loading it).
    ``last_run`` records the path of the last ``evaluate``.
    """

    def __init__(self, name: str, fn, source: str | None = None) -> None:
        if isinstance(fn, UserMetric):
            fn = fn.fn
        if isinstance(fn, Dispatcher):
            fn = fn.py_func  # compiled again with benchmint's options (Python's error model)
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a user metric's name must be a Python identifier, got {name!r}")
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"user metric {name!r}: fn must be a Python function (def or lambda), got {type(fn).__name__}")
        try:
            inspect.signature(fn).bind(0, 0, 0, 0)
        except TypeError:
            raise TypeError(f"user metric {name!r}: fn must take four positional arguments (tp, fp, fn, g)") from None
        self.name = name
        self.fn: types.FunctionType = fn
        self.source = source or f"{fn.__module__}:{fn.__qualname__}"
        self.cached: bool | None = None
        self.cache_reason: str | None = None
        self.cache_hit: bool | None = None
        self.compile_seconds: float | None = None
        self.last_run: Run | None = None
        self._kernel: Any = None  # numba Dispatchers, set by compile()
        self._jitted: Any = None
        self._failed: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self, tp, fp, fn, g):
        return self.fn(tp, fp, fn, g)

    def __repr__(self) -> str:
        return f"UserMetric({self.name!r}, {self.source})"

    def compile(self) -> UserMetric:
        """Compile the kernel (or load it from Numba's cache); idempotent and thread-safe."""
        with self._lock:
            if self._failed is not None:  # compiling again would fail the same way, slowly
                raise self._failed
            if self._kernel is None:
                start = time.perf_counter()
                kernel = self._build()
                try:
                    kernel.compile(_KERNEL_SIG)
                except NumbaError as exc:
                    self._failed = self._compile_error(exc)
                    raise self._failed from exc
                self.cache_hit = bool(kernel.stats.cache_hits)
                self.compile_seconds = time.perf_counter() - start
                self._kernel = kernel
        return self

    def _build(self):
        h = hashlib.sha256(_OWN_SOURCE)
        cache = _fingerprint(self.fn, h, set())
        self.cache_reason = None if cache else "it reads a value whose content cannot be fingerprinted"
        digest = h.hexdigest()
        # The user's function is compiled into the kernel and cached with it, under the digest; a
        # cache entry of its own would be keyed by its file alone, not by these options.
        self._jitted = jit(cache=False)(self.fn)
        glb = {"__name__": __name__, "__builtins__": builtins, "np": np, "numba": numba, "prange": prange,
               "_as_float": _as_float, "_INVALID": _INVALID, "_RAISED": _RAISED, "_metric": self._jitted}
        glb["_rows"] = jit(cache=False)(_copy(_rows_template, self.fn, "rows", digest, glb))
        kernel = _copy(_kernel_template, self.fn, "kernel", digest, glb)
        self.cached = False
        if cache:
            try:
                compiled = jit(parallel=True, cache=True)(kernel)
                self.cached = True
            except RuntimeError as exc:  # Numba has no cache locator: no source file (python -c, exec)
                self.cache_reason = str(exc)
        return compiled if self.cached else jit(parallel=True, cache=False)(kernel)

    def _compile_error(self, exc: NumbaError) -> TypeError:
        where = f"{self.fn.__code__.co_filename}:{self.fn.__code__.co_firstlineno}"
        try:
            self._jitted.compile((nbtypes.int64,) * 4)
        except NumbaError as inner:
            return MetricCompileError(f"user metric {self.name!r} ({self.source}, {where}) cannot be compiled by "
                                      f"Numba in nopython mode:\n{inner}")
        returns = self._jitted.nopython_signatures[-1].return_type
        if not isinstance(returns, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean)):
            return TypeError(f"user metric {self.name!r} must return a number (int, float or bool); "
                             f"compiled, it returns {returns}")
        return MetricCompileError(f"user metric {self.name!r} ({self.source}, {where}) cannot be compiled into a "
                                  f"batch kernel:\n{exc}")

    def _run(self, tp, fp, fn, g, out, workers: int) -> np.ndarray:
        kernel = self.compile()._kernel
        n = len(tp)
        chunks = max(1, min(workers, numba.config.NUMBA_NUM_THREADS, n // ROWS_PER_THREAD))  # type: ignore[attr-defined]
        first_bad = np.empty(chunks, np.int64)
        kind = np.empty(chunks, np.int64)
        thread = np.empty(chunks, np.int64)
        # One launch at a time: each already runs on the threads asked for, and Numba's workqueue
        # layer (where neither TBB nor OpenMP is available) aborts the process on concurrent launches.
        with _LAUNCH_LOCK:
            previous = numba.get_num_threads()
            numba.set_num_threads(chunks)
            try:
                kernel(tp, fp, fn, g, out, first_bad, kind, thread)
            finally:
                numba.set_num_threads(previous)
        self.last_run = Run("compiled", n, chunks, len(set(thread.tolist())))
        failed = np.flatnonzero(first_bad >= 0)
        if failed.size:  # chunks are in row order: the first failing chunk holds the lowest failing row
            c = failed[0]
            self._raise_row(int(first_bad[c]), int(kind[c]), tp, fp, fn, g)
        return out

    def _raise_row(self, i: int, kind: int, tp, fp, fn, g):
        row = (int(tp[i]), int(fp[i]), int(fn[i]), int(g[i]))
        user_ref.check_row(i, *row)
        if kind == _RAISED:
            user_ref.row_value(self, i, *row)
            try:  # the Python function gave a value: show the compiled function's own error
                self._jitted(*row)
            except Exception as exc:
                exc.add_note(user_ref.row_note(self.name, i, *row))
                exc.add_note("the compiled function raised where the Python function returns a number")
                raise
        raise RuntimeError(f"user metric {self.name!r}: the kernel reported row {i} but it evaluates cleanly")


def metric(fn=None, *, name: str | None = None):
    """Decorator: ``@metric`` or ``@metric(name="...")`` turns ``fn(tp, fp, fn, g)`` into a UserMetric."""
    if fn is None:
        return lambda f: UserMetric(name or f.__name__, f)
    return UserMetric(name or fn.__name__, fn)


def _counts(label: str, a) -> np.ndarray:
    a = np.asarray(a)
    if a.size == 0:
        return np.empty(0, np.int32)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{label} must be an array of integers, got dtype {a.dtype}")
    a = a.ravel()
    if a.dtype != np.int32:
        if a.min() < _INT32.min or a.max() > _INT32.max:
            raise ValueError(f"{label} holds counts outside the int32 range")
        a = a.astype(np.int32)
    return np.ascontiguousarray(a)


def evaluate(metric: UserMetric, tp, fp, fn, g, *, workers: int = 1, out: np.ndarray | None = None) -> np.ndarray:
    """``metric`` on every row of the count arrays: a float64 array (``out`` if given, overwritten).

    ``workers``: 1 serial, -1 all cores, n threads (a thread per 4096 rows at most).
    """
    if not isinstance(metric, UserMetric):
        raise TypeError("metric must be a UserMetric (wrap the function with benchmint.metrics.user.metric)")
    workers = resolve_workers(workers)
    tp, fp, fn, g = (_counts(label, a) for label, a in (("tp", tp), ("fp", fp), ("fn", fn), ("g", g)))
    n = len(tp)
    if any(len(a) != n for a in (fp, fn, g)):
        raise ValueError(f"tp, fp, fn and g have different lengths ({', '.join(str(len(a)) for a in (tp, fp, fn, g))})")
    if out is None:
        out = np.empty(n, np.float64)
    elif (not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.ndim != 1 or out.shape[0] != n
          or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"out must be a writable contiguous 1-D float64 array of length {n}")
    if _dispatch.use_reference("user"):
        metric.last_run = Run("reference", n, 1, 1)
        return user_ref.evaluate(metric, tp, fp, fn, g, out)
    return metric._run(tp, fp, fn, g, out, workers)


def add_columns(arrays: dict[str, np.ndarray], metrics, workers: int = 1) -> dict[str, np.ndarray]:
    """Add one float64 column per user metric to a ``score_batch`` result (which has tp, fp and fn).

    A column already in ``arrays`` under a metric's name (a reused ``out``) is overwritten in place.
    """
    from benchmint.metrics.batch_ref import METRIC_NAMES

    names = [m.name for m in metrics]
    clash = sorted(set(names) & set(METRIC_NAMES))
    if clash or len(set(names)) != len(names):
        raise ValueError(f"user metric names must be unique and differ from the built-in metrics: {names}")
    gold = arrays["tp"] + arrays["fn"]
    for m in metrics:
        arrays[m.name] = evaluate(m, arrays["tp"], arrays["fp"], arrays["fn"], gold, workers=workers,
                                  out=arrays.get(m.name))
    return arrays


def load_metric(spec: str) -> UserMetric:
    """``NAME=package.module:function`` or ``NAME=path/to/file.py:function`` -> a UserMetric called NAME."""
    name, sep, target = spec.partition("=")
    where, colon, attr = target.rpartition(":")
    if not (sep and name and colon and where and attr):
        raise ValueError(f"a metric is given as NAME=MODULE:FUNCTION or NAME=FILE.py:FUNCTION, got {spec!r}")
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise ValueError(f"metric {name!r}: file not found: {where}")
        module_name = "benchmint_user_metrics_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
        module = sys.modules.get(module_name)
        if module is None:
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            if module_spec is None or module_spec.loader is None:
                raise ValueError(f"metric {name!r}: cannot load {where} as a Python module")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module  # Numba re-imports a cached function's module by name
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ValueError(f"metric {name!r}: cannot import {where!r}: {exc}") from exc
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"metric {name!r}: {where} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return UserMetric(name, obj, source=target)
