"""Refuse arrays that cannot fit in memory before allocating them, with their size.

A LIBSVM file whose one index is 2e9 densified into a 2.9 TiB array (MemoryError, a
traceback), ``--n-samples 1e8`` into 36 GiB; now either is one line naming the size. The bound
is the memory the kernel reports available (``MemAvailable``) for the copies the job holds at
once (rank 0's rows, their temporaries, the machines' shards); the simulated backend adds
its own arrays (:func:`dpnet.cli.simulation.simulator_bytes`, checked with :func:`check_bytes`).
"""

from __future__ import annotations

import math
import os

from dpnet.errors import DataError

COPIES = 2  # a loaded data set and the machines' shards cut from it


def available_bytes() -> int:
    """Memory the kernel can give this process now (MemAvailable; else all physical pages)."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def byte_size(count: float) -> str:
    """``count`` bytes in the largest binary unit that keeps it >= 1 (3 significant digits)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    power = min(int(math.log(max(count, 1), 1024)), len(units) - 1)
    return f"{count / 1024**power:.3g} {units[power]}"


def check_fits(shape: tuple[int, ...], what: str, itemsize: int = 8, copies: int = COPIES) -> None:
    """DataError if ``copies`` arrays of ``shape`` (``itemsize`` bytes each) need more than
    the available memory."""
    size = math.prod(shape) * itemsize
    have = available_bytes()
    if copies * size > have:
        dims = " x ".join(f"{n:,}" for n in shape)
        raise DataError(
            f"{what}: {dims} values are {byte_size(size)}, held {copies} times: more than the "
            f"{byte_size(have)} of memory available here"
        )


def check_bytes(size: int, what: str) -> None:
    """DataError if ``size`` bytes, described by ``what``, exceed the available memory."""
    have = available_bytes()
    if size > have:
        raise DataError(
            f"{what} need about {byte_size(size)}: more than the {byte_size(have)} of memory "
            f"available here"
        )
