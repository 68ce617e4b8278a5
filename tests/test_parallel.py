"""benchmint.parallel: worker counts and the ordered thread map."""

import os

import pytest

from benchmint.parallel import resolve_workers, thread_map


def test_resolve_workers():
    assert resolve_workers(-1) == (os.cpu_count() or 1)
    assert resolve_workers(3) == 3
    for bad in (0, -2, True, 1.5, "2"):
        with pytest.raises(ValueError, match="workers must be -1"):
            resolve_workers(bad)


def test_thread_map_order_and_first_error():
    assert thread_map(lambda x: x * x, range(50), 4) == [x * x for x in range(50)]
    assert thread_map(str, [], -1) == []

    def fail_on_odd(x):
        if x % 2:
            raise KeyError(x)
        return x

    with pytest.raises(KeyError, match="1"):  # the first failing item in input order
        thread_map(fail_on_odd, range(10), 3)
