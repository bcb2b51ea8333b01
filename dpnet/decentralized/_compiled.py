"""The compiler of dpnet's compiled kernels (:mod:`dpnet.decentralized._newton`, :mod:`._edges`).

numba compiles each function on its first call and caches the machine code on disk, so a
process after the first loads it instead: beside the source (``__pycache__``) where the
package's folder is writable, else in the user's cache folder (``~/.cache/numba``), or in
the folder named by the environment variable ``NUMBA_CACHE_DIR``. Where none is writable the
functions are compiled in memory by every process, with one warning saying so.

Division follows numpy's error model: by zero it gives inf or NaN as numpy does, never
Python's ZeroDivisionError, so a non-finite value reaches the stop rule (which ends the run
as non-finite) and the compiler may vectorise loops that divide (numba's check for a zero
divisor, a branch, kept them scalar).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numba

_uncached: list[str] = []
_dispatchers: list[Any] = []


def compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba (nopython), its code cached on disk where it can be."""
    try:
        dispatcher = numba.njit(cache=True, error_model="numpy")(function)
        _dispatchers.append(dispatcher)
        return dispatcher
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        if not _uncached:
            warnings.warn(
                "dpnet: no writable folder for numba's cache (set NUMBA_CACHE_DIR): the theta "
                "step is compiled anew by every process (a few seconds at start-up)",
                RuntimeWarning,
                stacklevel=2,
            )
        _uncached.append(function.__name__)
        return numba.njit(error_model="numpy")(function)


def entry(dispatcher: Any) -> Any:
    """A compiled function as Python calls it: a KeyboardInterrupt (Ctrl-C, or SIGTERM's
    :class:`~dpnet.errors.Terminated`) whose handler ran inside the call is raised as itself.
    numba's code calls back into Python (to box the arrays it returns), where a signal's
    handler can run and raise; the call then ended in ``SystemError: ... returned a result
    with an exception set``, which a job took for a machine failure (exit 1). Functions that
    only other compiled functions call stay bare dispatchers."""

    @functools.wraps(dispatcher.py_func)
    def call(*args: Any) -> Any:
        try:
            return dispatcher(*args)
        except SystemError as exc:
            cause: BaseException | None = exc
            while isinstance(cause, SystemError):  # one for each C call it came through
                cause = cause.__cause__
            if isinstance(cause, KeyboardInterrupt):
                raise cause from None
            raise

    return call


def compiled_anew() -> bool:
    """Whether this process compiled any kernel function rather than loading them all from
    the cache (a first run, an edited source, or no writable cache folder)."""
    return bool(_uncached) or any(d.stats.cache_misses for d in _dispatchers)
