"""Exceptions with messages meant for users, each naming the problem in one line, and the
exit codes of ``python -m dpnet.run`` (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import signal

EXIT_MACHINE_FAILED = 1  # an unexpected exception on some machine (MachineFailure)
EXIT_BAD_INPUT = 2  # before the first round, or NetworkDataError: one line from rank 0
EXIT_NO_ESTIMATE = 3  # stop_reason "non-finite" or "diverged"
EXIT_PLOT_FAILED = 4  # the results were written, a plot was not
EXIT_PEER_FAULT = 5  # a neighbour went silent (PeerFault)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (a scheduler's cancel, kill)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, and handled the same way
    (every machine stops at its next wait), with exit code EXIT_TERMINATED."""


def interrupted_exit(exc: KeyboardInterrupt) -> tuple[int, str]:
    """(exit code, the one line) of a Ctrl-C or a SIGTERM."""
    if isinstance(exc, Terminated):
        return EXIT_TERMINATED, "dpnet: terminated (SIGTERM): every machine stopped"
    return EXIT_INTERRUPTED, "dpnet: interrupted: every machine stopped"


def signal_exception(signum: int) -> KeyboardInterrupt:
    """The exception a signal stands for: Terminated for SIGTERM, else KeyboardInterrupt."""
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


class DpnetError(Exception):
    """Base class of every error dpnet raises for bad input or configuration."""


class ConfigError(DpnetError, ValueError):
    """A command-line option or parameter is out of range or inconsistent."""


class DataError(DpnetError, ValueError):
    """A data file is missing or malformed, or arrays violate a documented assumption."""


class NetworkDataError(DataError):
    """The job cannot go on, and every machine knows it in the same exchange: raised from
    values that network sums made bitwise identical on every machine (e.g. --cv's lambda_max
    on randomized labels of one class), so no machine is left waiting. Exit code 2 on every
    backend, one line from rank 0."""


class MachineFailure(Exception):
    """An unexpected exception on one machine after set-up: the job stops with exit code 1
    and the one line of :func:`failure_line`, on every backend."""

    def __init__(self, rank: int, cause: BaseException) -> None:
        super().__init__(rank, cause)
        self.rank, self.cause = rank, cause

    def __str__(self) -> str:
        return failure_line(self.rank, self.cause)


def failure_line(rank: int, exc: BaseException) -> str:
    """The line a failed machine's job ends with (in-process and under MPI alike)."""
    return f"dpnet: rank {rank} failed: {type(exc).__name__}: {exc}"


class TopologyError(DpnetError, ValueError):
    """A graph is unknown, malformed, disconnected or does not match the number of machines."""


class PrivacyError(DpnetError, ValueError):
    """A privacy parameter is invalid or an accountant does not support a release."""
