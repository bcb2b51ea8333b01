"""``python -m dpnet.run`` (and the ``dpnet-run`` script): the main job of :mod:`dpnet.cli`,
ended by Ctrl-C or SIGTERM at any moment, the imports included, with one line and exit code
130 (SIGINT) or 143 (SIGTERM) (docs/cli.md, "Exit codes").

This module imports nothing heavy, so the handlers are in place before numpy, scipy and MPI
load (seconds on a cold cache, when an interrupt used to print a KeyboardInterrupt traceback,
or a segmentation fault under mpiexec). Files are written atomically, so an interrupted job
leaves each output either complete or untouched.
"""

from __future__ import annotations

import _thread
import gc
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, TextIO, cast

import dpnet
from dpnet.errors import (
    EXIT_MACHINE_FAILED,
    EXIT_TERMINATED,
    failure_line,
    interrupted_exit,
    signal_exception,
)
from dpnet.network.launcher import launched_by_open_mpi, launcher_rank


def _exit_now(signum: int, frame: FrameType | None) -> None:
    """During the imports: end at once (a KeyboardInterrupt raised inside importlib's own
    callbacks is swallowed, and the rank went on alone into MPI_Init)."""
    _stop(signal_exception(signum))


def _raise_signal(signum: int, frame: FrameType | None) -> None:
    """During the job: raise KeyboardInterrupt (SIGINT) or :class:`~dpnet.errors.Terminated`
    (SIGTERM), which every backend turns into the same stop; inside an import (the job loads
    dp_accounting and scipy's modules on first use) end at once, as during the imports: an
    extension module's initialization turned the exception into ``ImportError: initialization
    failed`` (pybind11), a machine failure (exit 1), and a fallback that catches ImportError
    would swallow it (no file is being written then: :func:`dpnet.cli.plots.save_figure`
    renders before it writes)."""
    if _importing(frame):
        _stop(signal_exception(signum))
    raise signal_exception(signum)


def _importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside an import (importlib's frames below it)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _stop(exc: KeyboardInterrupt) -> None:
    """One line (mpiexec signals every rank: from rank 0), then the process exits at once: no
    atexit, no Python teardown; a started MPI world ends through MPI_Abort (see
    :func:`dpnet.network.mpi_comm.end_after_signal`)."""
    code, line = interrupted_exit(exc)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C changes nothing now
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rank = launcher_rank()[0]
    mpi = sys.modules.get("dpnet.network.mpi_comm")
    end_world = getattr(mpi, "end_after_signal", None)  # None: not (fully) imported
    if end_world is not None:
        end_world(code, line, rank)  # returns if MPI does not run
    if rank == 0:
        print(line, file=sys.stderr, flush=True)
    os._exit(code)


def _watch_launcher_teardown() -> None:
    """Under Open MPI's launcher: SIGTERM from the parent process (the launcher's daemon) is
    its teardown of the whole job (after a signal to mpiexec, or another rank's abort or
    failure), which it reports itself; the rank then exits at once with 143 and no line of its
    own (it added "terminated (SIGTERM)" after the failed rank's line). SIGTERM is blocked in
    every thread (those MPI and BLAS start later inherit the mask) and taken by a daemon thread
    that knows the sender (the parent as it was at start: one that exited before the thread
    looked made ``os.getppid()`` 1); one from anyone else reaches the main thread as before."""
    if any(t.name == "launcher-teardown" for t in threading.enumerate()):
        return  # already watching (a test entry point started it before its own imports)
    launcher = os.getppid()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def watch() -> None:
        while True:
            sent = signal.sigwaitinfo({signal.SIGTERM})
            if sent.si_pid == launcher:
                os._exit(EXIT_TERMINATED)
            _thread.interrupt_main(signal.SIGTERM)

    threading.Thread(target=watch, name="launcher-teardown", daemon=True).start()


class _ReaderMayLeave:
    """stdout or stderr of the command line, whose reader may go away (``| head -2``): the
    first write or flush that meets the closed pipe points the stream's descriptor at
    /dev/null (the Python docs' "Note on SIGPIPE") instead of raising BrokenPipeError inside a
    machine, so the job goes on, writes its files and ends with its own exit code."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def entry() -> None:
    """Run the main job as a program. While the imports load, SIGINT and SIGTERM end the
    process at once (one line); from then on SIGINT raises KeyboardInterrupt and SIGTERM
    :class:`~dpnet.errors.Terminated` (:func:`_raise_signal`), which every backend turns into
    the same stop, and one that reaches this function ends the process here; once the job has
    returned, signals are ignored while the process tears down. A SIGINT the parent set to be
    ignored (``nohup``, a shell's background job) stays ignored."""
    if launched_by_open_mpi():
        _watch_launcher_teardown()
    sys.stdout = cast(TextIO, _ReaderMayLeave(sys.stdout))
    sys.stderr = cast(TextIO, _ReaderMayLeave(sys.stderr))
    sigint_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if not sigint_ignored:
        signal.signal(signal.SIGINT, _exit_now)
    signal.signal(signal.SIGTERM, _exit_now)
    # the imports and the kernels' load make ~300,000 objects that live as long as the
    # process: no collection scans them while they are made, and none after (gc.freeze);
    # the start-up of the default job was 0.15 s shorter
    gc.disable()
    try:
        from dpnet.cli.command import main
        from dpnet.decentralized import compile_kernels

        # numba's and LLVM's start-up (and, on a first run, the compilation) while a signal
        # still ends the process at once: interrupted inside them, LLVM's initialization
        # failed with an ImportError ("rank 0 failed") instead of the interrupt
        if compile_kernels():
            gc.collect()  # a compilation leaves ~450,000 objects of garbage: not frozen
        gc.freeze()
        gc.enable()
        if not sigint_ignored:
            signal.signal(signal.SIGINT, _raise_signal)
        signal.signal(signal.SIGTERM, _raise_signal)
        code = main(started_at=dpnet.IMPORTED_AT)  # the process's imports count
        # the job is over, its files written: a signal in the teardown (MPI_Finalize, atexit)
        # would kill the process by the signal (mpiexec then said "exit 2") for nothing lost
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except KeyboardInterrupt as exc:
        _stop(exc)
    except Exception as exc:
        if sys.excepthook is not sys.__excepthook__:
            raise  # under MPI: the abort hook ends every rank with this line
        print(failure_line(launcher_rank()[0], exc), file=sys.stderr, flush=True)
        code = EXIT_MACHINE_FAILED
    sys.exit(code)


def __getattr__(name: str) -> Any:
    """``from dpnet.run import main`` (and the other names of :mod:`dpnet.cli.command`), loaded
    when first asked for."""
    from dpnet.cli import command

    return getattr(command, name)


if __name__ == "__main__":
    entry()
