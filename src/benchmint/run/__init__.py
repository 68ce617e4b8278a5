"""Resumable runs over keyed units: the SQLite ledger, executors and the runner.

A unit is anything with a content key: a file (its bytes and the settings that
shape its result), a page range, an (item, model, setting) triple. The runner
skips the keys the ledger holds, runs the rest on an executor, records each
result in the ledger as it arrives (the driver is the ledger's only writer),
and reads the results back in the order of the units, so outputs do not
depend on the executor or on how often the run was interrupted.
"""

from benchmint.run.executors import (
    Executor,
    ProcessExecutor,
    SerialExecutor,
    ThreadExecutor,
    UnitTimeout,
    WorkerDied,
    executor_for,
    stage,
)
from benchmint.run.ledger import Ledger, content_key
from benchmint.run.runner import (
    FoundFile,
    Hashed,
    Unit,
    executor_for_files,
    find_files,
    find_files_into,
    hash_file,
    hash_files,
    hash_threads,
    in_workers,
    read_error,
    run_files,
    run_units,
)

__all__ = ["Executor", "FoundFile", "Hashed", "Ledger", "ProcessExecutor", "SerialExecutor", "ThreadExecutor", "Unit", "UnitTimeout",
           "WorkerDied", "content_key", "executor_for", "executor_for_files", "find_files", "find_files_into", "hash_file",
           "hash_files", "hash_threads", "in_workers", "read_error",
           "run_files", "run_units", "stage"]
