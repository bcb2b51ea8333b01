"""A privacy budget that outlives a job: one machine's budget file, with a cap.

The command line's ``--budget-file`` (docs/cli.md, docs/privacy.md "A machine's budget
across jobs"). The file is a journal of JSON lines, UTF-8, mode 0600:

- line 1, the header, written when the file is created: the cap (ε, δ) under replace-one
  (``"inf"``: no cap), fixed for the file's life;
- one line per charge: the job's (ε, δ) on this machine's data (replace-one) and a public
  description of the job;
- every line carries ``check``, the first 16 hex digits of the SHA-256 of its other fields
  (canonical JSON), so a damaged or foreign line is told from a good one.

The spend is the basic composition (:func:`dpnet.privacy.budget.composed`) of the charges,
the one rule of :mod:`dpnet.privacy.budget`; a charge that would pass the cap raises
:class:`~dpnet.privacy.budget.BudgetExceeded` and writes nothing. Everything in the file is a
function of the options and the job's privacy parameters: no data-derived value, no seed, no
random-stream state, no clock.

Durability and concurrency (proof sketch in docs/privacy.md):

- a charge is made under an exclusive ``flock`` on the file itself, held while the file is
  read, checked against the cap, appended to (one ``write`` of one whole line, ``O_APPEND``)
  and ``fsync``-ed, then the directory ``fsync``-ed: :func:`charge_budget` returns only once
  the charge is on disk, and two jobs charging at once are serialised (each sees the other's
  charge);
- a process killed while writing leaves at most one incomplete last line (no final newline).
  Its writer never returned from :func:`charge_budget`, so it released nothing: the line is
  not counted, and the next charger (holding the lock, so no writer is alive) cuts it off
  before appending. A line that ends with a newline but does not parse or check is damage:
  refused, naming the file and line, never repaired or reset;
- a write that fails (a full disk: ENOSPC, a short write) is cut off again under the lock
  and raises :class:`BudgetFileError`: the file is as before, the job is refused.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import stat
import threading
from dataclasses import dataclass, replace
from typing import Any

from dpnet.errors import PrivacyError
from dpnet.privacy.budget import (
    BudgetAccountant,
    BudgetExceeded,
    Charge,
    PicklableLock,
    check_cap,
    composed,
    replace_one_cost,
    within_cap,
)

FORMAT = "dpnet-budget"
VERSION = 1
RELATION = "replace_one"
_MAX_BYTES = 64 << 20  # a budget file of millions of charges; beyond it, no budget file


class BudgetFileError(PrivacyError):
    """A budget file that cannot be used: missing without a cap to create it, damaged,
    foreign, of another cap, or a charge that could not be written. Nothing was charged."""


@dataclass(frozen=True)
class BudgetState:
    """What a budget file says: its cap and the basic composition of its charges."""

    cap: tuple[float, float]
    spent: tuple[float, float]
    charges: int
    torn_tail: bool  # an incomplete last line (a writer killed mid-write): not counted
    entries: tuple[tuple[str, float, float], ...] = ()  # (job, epsilon, delta) of each charge

    @classmethod
    def new(cls, cap: tuple[float, float]) -> BudgetState:
        """A file with the cap ``cap`` and no charge yet."""
        return cls(cap, (0.0, 0.0), 0, False)


def _num(x: float) -> float | str:
    return float(x) if math.isfinite(x) else "inf"


def _float(value: Any) -> float:
    if value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _check(fields: dict[str, Any]) -> str:
    body = json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _line(fields: dict[str, Any]) -> bytes:
    """One journal line: the fields, their check, a newline."""
    record = {**fields, "check": _check(fields)}
    return (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()


def _parse_line(path: str, number: int, raw: bytes) -> dict[str, Any]:
    try:
        record = json.loads(raw.decode())
        if not isinstance(record, dict):
            raise ValueError("not an object")
        check = record.pop("check")
        if check != _check(record):
            raise ValueError("its check does not match")
    except KeyError as exc:
        raise BudgetFileError(_damaged(path, number, f"no field {exc.args[0]!r}")) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BudgetFileError(_damaged(path, number, str(exc))) from None
    return record


def _damaged(path: str, number: int, why: str) -> str:
    what = " is not a dpnet budget file" if number == 1 else f": line {number} is damaged"
    return (
        f"budget file {path}{what} ({why}); it is never reset or repaired: move it away "
        "only if you know what it spent"
    )


def describe(cost: tuple[float, float]) -> str:
    return f"epsilon = {cost[0]:.6g}, delta = {cost[1]:.3g}"


_PARSED: dict[str, tuple[bytes, BudgetState]] = {}
"""Per path, complete lines already parsed and their state: the journal only grows (a cut
removes an incomplete last line only), so a later content that starts with them is parsed
from there on (a spool charged by every fit of a session: each charge parsed the whole file)."""
_PARSED_MAX = 8 << 20  # bytes of complete lines kept per path


def parse_budget(path: str, content: bytes) -> tuple[BudgetState | None, int]:
    """The state of a budget file's ``content`` (None: not created yet: empty, or only an
    incomplete header) and the length of its complete lines; BudgetFileError if damaged."""
    end = content.rfind(b"\n") + 1  # the complete lines; after them at most a torn tail
    known = _PARSED.get(path)
    if known is not None and end >= len(known[0]) and content.startswith(known[0]):
        start, before = len(known[0]), known[1]
    else:
        start = content.find(b"\n") + 1
        if not start:
            return None, 0
        before = BudgetState.new(_parse_header(path, content[:start]))
    first = before.charges + 2  # the line number of the first line not parsed yet
    costs, jobs = [], []
    for number, raw in enumerate(content[start:end].split(b"\n")[:-1], start=first):
        record = _parse_line(path, number, raw)
        try:
            cost = (_float(record["epsilon"]), _float(record["delta"]))
            if not (cost[0] >= 0 and cost[1] >= 0):
                raise ValueError("a negative charge")
        except KeyError as exc:
            raise BudgetFileError(_damaged(path, number, f"no field {exc.args[0]!r}")) from None
        except ValueError as exc:
            raise BudgetFileError(_damaged(path, number, str(exc))) from None
        costs.append(cost)
        jobs.append(str(record.get("job", "")))
    entries = before.entries + tuple((job, *c) for job, c in zip(jobs, costs, strict=True))
    complete = BudgetState(
        before.cap, composed(before.spent, *costs), before.charges + len(costs), False, entries
    )
    if end <= _PARSED_MAX:
        _PARSED[path] = (content[:end], complete)
    return replace(complete, torn_tail=end < len(content)), end


def _parse_header(path: str, raw: bytes) -> tuple[float, float]:
    """The cap of a budget file's header line."""
    header = _parse_line(path, 1, raw)
    if header.get("format") != FORMAT:
        raise BudgetFileError(_damaged(path, 1, "no dpnet-budget header"))
    if header.get("version") != VERSION:
        raise BudgetFileError(
            f"budget file {path}: format version {header.get('version')!r}, this dpnet "
            f"reads version {VERSION}"
        )
    try:
        cap = check_cap(_float(header["cap"]["epsilon"]), _float(header["cap"]["delta"]))
        if header.get("relation") != RELATION:
            raise ValueError(f"relation {header.get('relation')!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise BudgetFileError(_damaged(path, 1, f"bad header: {exc}")) from None
    return cap


def read_budget(path: str) -> BudgetState | None:
    """The state of the budget file ``path`` (None if it does not exist or was never fully
    created), read under a shared lock; BudgetFileError if it cannot be read or is damaged."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BudgetFileError(f"budget file {path}: {_os_error(exc)}") from None
    try:
        _check_regular(fd, path)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return parse_budget(path, _read_all(fd, path))[0]
    finally:
        os.close(fd)  # releases the lock


def check_budget(
    path: str, cost: tuple[float, float], cap: tuple[float, float] | None, job: str
) -> None:
    """Whether a charge of ``cost`` would be accepted now (nothing is written): the refusal
    of :func:`charge_budget`, raised before the job reads anything. A later charge checks
    again under the lock (another job may have charged in between)."""
    state = read_budget(path)
    _admit(path, state, cost, cap, job)


def charge_budget(
    path: str,
    cost: tuple[float, float],
    cap: tuple[float, float] | None,
    job: str,
    *,
    durable: bool = True,
) -> BudgetState:
    """Charge ``cost`` = (ε, δ) under replace-one to the budget file ``path`` for ``job`` (a
    public description), creating the file with ``cap`` if it does not exist; durable when
    this returns (file and directory fsync-ed; ``durable=False``: not synced, for a spool that
    lives no longer than its process, :class:`~dpnet.privacy.budget.BudgetAccountant`). The
    state after the charge.

    Refused, with nothing written: :class:`BudgetExceeded` past the cap (ε = inf passes no
    finite cap); :class:`BudgetFileError` for a missing file and no ``cap``, a ``cap`` other
    than the file's, a damaged or foreign file, or a charge that could not be written (a full
    disk). Never refunded: a job that fails after this has spent it."""
    flags = os.O_RDWR | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | (os.O_CREAT if cap is not None else 0), 0o600)
    except FileNotFoundError:
        raise BudgetFileError(_missing(path)) from None
    except OSError as exc:
        raise BudgetFileError(f"budget file {path}: {_os_error(exc)}") from None
    try:
        _check_regular(fd, path)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until close: read, check, append, fsync
        content = _read_all(fd, path)
        state, end = parse_budget(path, content)
        lines: list[bytes] = []
        if state is None:  # new, or a creation that never finished: write the header
            if cap is None:
                raise BudgetFileError(_missing(path, empty=True))
            end = 0
            header = {"format": FORMAT, "version": VERSION, "relation": RELATION}
            header["cap"] = {"epsilon": _num(cap[0]), "delta": _num(cap[1])}
            lines.append(_line(header))
            state = BudgetState.new(cap)
        _admit(path, state, cost, cap, job)
        fields = {"epsilon": _num(cost[0]), "delta": _num(cost[1]), "job": job}
        lines.append(_line(fields))
        _append(fd, path, end, len(content), b"".join(lines), durable)
        if durable and len(lines) > 1:  # a new file: its directory entry made durable too
            _sync_directory(path)
        entries = (*state.entries, (job, *cost))
        return BudgetState(
            state.cap, composed(state.spent, cost), state.charges + 1, False, entries
        )
    finally:
        os.close(fd)


def _admit(
    path: str,
    state: BudgetState | None,
    cost: tuple[float, float],
    cap: tuple[float, float] | None,
    job: str,
) -> None:
    if state is None:
        if cap is None:
            raise BudgetFileError(_missing(path))
        state = BudgetState.new(cap)
    if cap is not None and tuple(cap) != state.cap:
        raise BudgetFileError(
            f"budget file {path} has the cap ({state.cap[0]:g}, {state.cap[1]:g}), "
            f"--budget-cap gives ({cap[0]:g}, {cap[1]:g}): a cap is fixed when its file is "
            "created; leave --budget-cap out, or give the file's"
        )
    if not within_cap(state.spent, cost, state.cap):
        raise BudgetExceeded(
            f"budget file {path}: {job} spends {describe(cost)} here, the file has spent "
            f"{describe(state.spent)} of its cap ({state.cap[0]:g}, {state.cap[1]:g}) in "
            f"{state.charges} charges: refused, nothing read"
        )


def _missing(path: str, empty: bool = False) -> str:
    what = "is empty (its creation never finished)" if empty else "does not exist"
    return f"budget file {path} {what}: give --budget-cap EPSILON[,DELTA] to create it"


def _os_error(exc: OSError) -> str:
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def _check_regular(fd: int, path: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise BudgetFileError(f"budget file {path} is not a regular file")


def _read_all(fd: int, path: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > _MAX_BYTES:
        raise BudgetFileError(f"budget file {path}: {size} bytes, more than a budget file holds")
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _append(fd: int, path: str, end: int, size: int, data: bytes, durable: bool) -> None:
    """Cut the file to ``end`` (a torn tail, or a header that never finished: not counted),
    then append ``data`` in one write and fsync (if ``durable``); on any failure cut it back
    to ``end`` and
    raise BudgetFileError (the file as it was, less an uncounted tail)."""
    try:
        if end < size:
            os.ftruncate(fd, end)
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if durable:
            os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, end)
            os.fsync(fd)
        except OSError:
            pass  # a charge left behind is counted by later jobs: over-counting is safe
        raise BudgetFileError(
            f"budget file {path}: the charge could not be written ({_os_error(exc)}); "
            "nothing was run"
        ) from None


def _sync_directory(path: str) -> None:
    """fsync the directory holding ``path``: its entry (a new file) is durable too."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EROFS):  # a file system without directory fsync
            return
        raise BudgetFileError(
            f"budget file {path}: the charge was written, its directory could not be synced "
            f"({_os_error(exc)}); it counts, nothing was run"
        ) from None


class BudgetFileAccountant(BudgetAccountant):
    """An estimator's accountant (``accountant=``) whose charges are a budget file's: each fit
    charges the file under its lock and is on disk when the charge returns, so every process
    that opens the same ``path`` charges one budget against one cap: GridSearchCV(n_jobs=2)'s
    worker processes (a pickled copy is the same file), later sessions, and a command line
    given ``--budget-file path`` on the same data. ``epsilon``, ``delta``: the cap that
    creates the file (a file that exists keeps its own; another cap is refused). Never reset
    (:meth:`reset` raises): a file's spend is never refunded. ``durable=False``: no fsync,
    for a file that lives no longer than its process (an accountant's spool)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        epsilon: float | None = None,
        delta: float = 0.0,
        *,
        durable: bool = True,
    ):
        self.path = os.fspath(path)
        self.durable = durable
        given = None if epsilon is None else check_cap(epsilon, delta)
        state = read_budget(self.path)
        if state is None and given is None:
            raise BudgetFileError(
                f"budget file {self.path} does not exist: give its cap (epsilon, delta) to "
                "create it"
            )
        if state is not None and given is not None and given != state.cap:
            raise BudgetFileError(
                f"budget file {self.path} has the cap ({state.cap[0]:g}, {state.cap[1]:g}), "
                f"not ({given[0]:g}, {given[1]:g}): a cap is fixed when its file is created"
            )
        self.epsilon, self.delta = state.cap if state is not None else given  # type: ignore[misc]
        self._lock = threading.Lock()
        self._home_pid = None  # a copy in another process charges the same file: no warning

    def __getstate__(self) -> dict[str, Any]:
        """A copy is the same file: no spool (:meth:`BudgetAccountant.share`)."""
        return PicklableLock.__getstate__(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        PicklableLock.__setstate__(self, state)

    def __repr__(self) -> str:
        epsilon, delta = self.spent
        return (
            f"BudgetFileAccountant({self.path!r}, epsilon={self.epsilon:g}, "
            f"delta={self.delta:g}; spent epsilon={epsilon:.6g}, delta={delta:.3g} in "
            f"{self.n_charges} charges)"
        )

    def _state(self) -> BudgetState:
        """The file's state (a new one's until the first charge creates it)."""
        state = read_budget(self.path)
        return state if state is not None else BudgetState.new((self.epsilon, self.delta))

    @property
    def charges(self) -> tuple[Charge, ...]:
        return tuple(Charge(*entry) for entry in self._state().entries)

    @property
    def n_charges(self) -> int:
        return self._state().charges

    @property
    def spent(self) -> tuple[float, float]:
        return self._state().spent

    def charge(
        self, epsilon: float, delta: float, *, label: str, relation: str = "replace_one"
    ) -> Charge:
        """Add one fit's guarantee to the file, or raise BudgetExceeded (nothing written)."""
        cost = replace_one_cost(epsilon, delta, relation)
        charge_budget(self.path, cost, (self.epsilon, self.delta), label, durable=self.durable)
        return Charge(label, *cost)

    def reset(self) -> None:
        raise BudgetFileError(
            f"budget file {self.path}: a budget file is never reset (its spend is not "
            "refunded); start a new file for a new data set"
        )
