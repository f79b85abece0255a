"""One run at a time per destination: the lock in the state directory (driver).

Two runs publishing into one destination would sweep each other's staging as
"dead" and interleave their commit sequences, so a run (and ``recover`` and
``cleanup``) holds ``<state root>/lock`` while it works. The lock document says
who holds it (job id, pid, host, start, heartbeat), so a refused run can name
the holder. A holder refreshes its heartbeat every ``HEARTBEAT_S``; a lock is
broken when its holder is provably gone: on this host, its pid is dead (or was
reused by a younger process); elsewhere, its heartbeat is older than
``STALE_S``. Creation is exclusive where the filesystem can say so (``O_EXCL``
on local disk, ``If-None-Match`` on an S3 server shown to honour it:
``Storage.creates_exclusively``); elsewhere the writer reads the lock back and yields
if another run's document is there.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Self

from distcp.errors import DestinationBusyError, PlanningError
from distcp.state.layout import StateLayout
from distcp.storage import Storage, storage_for
from distcp.storage import filesystems as fsutil

#: How often a holder rewrites its heartbeat, and when a silent holder on another
#: host counts as gone (several missed heartbeats: a paused VM or a slow store is
#: not mistaken for a dead run).
HEARTBEAT_S = 30.0
STALE_S = 10 * 60.0
UNREADABLE_S = 3.0


@dataclass(frozen=True)
class Holder:
    """Who holds a destination's lock."""

    job_id: str
    pid: int
    host: str
    started: float
    heartbeat: float
    command: str = "copy"

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return (f"{self.command} job {self.job_id} (pid {self.pid} on {self.host}, "
                f"started {when})")


def _process_start(pid: int) -> float | None:
    """Start time of ``pid`` (seconds since boot) from /proc, or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _boot_time() -> float:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def holder_alive(holder: Holder, now: float | None = None) -> bool:
    """Whether the run that wrote ``holder`` may still be running."""
    now = time.time() if now is None else now
    if holder.host != socket.gethostname():
        return now - holder.heartbeat < STALE_S
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # exists, owned by someone else
    started = _process_start(holder.pid)
    boot = _boot_time()
    if started is not None and boot:
        # A process that started after the lock was taken is a reused pid, not the holder.
        return boot + started <= holder.started + 5
    return True


class DestinationLock:
    """``with DestinationLock(root, options, job_id):`` holds the lock or raises
    ``DestinationBusyError`` naming the run that holds it."""

    def __init__(self, state_root: str, options: dict[str, Any], job_id: str,
                 command: str = "copy") -> None:
        self.root = state_root
        self.url = StateLayout(state_root).lock
        self.options = options
        self.storage = storage_for(self.url, options)
        now = time.time()
        self.me = Holder(job_id, os.getpid(), socket.gethostname(), now, now, command)
        #: Local folders this lock creates (the state root, and DST if new): removed again
        #: when still empty at release, so a run refused while planning leaves no trace.
        self._created: list[str] = []
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def holder(self) -> Holder | None:
        return read_holder(self.url, self.storage)

    def acquire(self) -> None:
        for _ in range(3):
            try:
                created = self._create()
            except OSError as exc:
                raise PlanningError(
                    f"cannot write to the state directory {fsutil.display(self.root)}: "
                    f"{exc.strerror or exc}", path=self.url) from exc
            if created:
                self._start_heartbeat()
                return
            other = self.holder()
            if other is None:
                self._remove_unreadable()
                continue
            if other.job_id == self.me.job_id:
                continue
            if holder_alive(other):
                raise DestinationBusyError(
                    f"destination busy: its state {fsutil.display(self.root)} is held by "
                    f"{other.describe()}; wait for it to finish (one run per destination at "
                    f"a time), or remove {fsutil.display(self.url)} if that run is gone",
                    path=self.url)
            self._break(other)
        raise DestinationBusyError(f"cannot take the lock {fsutil.display(self.url)}: another "
                                   "run keeps taking it", path=self.url)

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        try:
            current = self.holder()
            if current is not None and current.job_id == self.me.job_id:
                self.storage.remove_file(self.url)
        except OSError:
            pass  # a lock left behind is broken by the next run (its holder is gone)
        for folder in self._created:  # deepest first
            try:
                os.rmdir(folder)
            except OSError:
                break  # not empty: the run wrote there

    def _document(self, holder: Holder) -> bytes:
        return json.dumps(asdict(holder)).encode()

    def _create(self) -> bool:
        """Write our document only if no lock exists; True if we hold it now."""
        data = self._document(self.me)
        try:
            if self.storage.capabilities.local_paths:
                self._created = _missing_folders(os.path.dirname(fsutil.os_path(self.url)))
            if not self.storage.create_new(self.url, data):
                return False
            if self.storage.creates_exclusively(self.url):
                return True
        except FileExistsError:
            return False
        except OSError as exc:
            if "PreconditionFailed" in str(exc) or "412" in str(exc):
                return False
            raise
        # Stores that cannot create exclusively: the last writer wins; read it back.
        time.sleep(0.05)
        current = self.holder()
        return current is not None and current.job_id == self.me.job_id

    def _break(self, stale: Holder) -> None:
        """Remove a lock whose holder is gone, unless it changed since it was read."""
        current = self.holder()
        if current != stale:
            return
        self.storage.remove_file(self.url)

    def _remove_unreadable(self) -> None:
        """A lock with no readable holder, left by a run killed while writing it (its
        holder writes it whole within milliseconds), is removed once a few seconds old."""
        try:
            if time.time() - self.storage.stat(self.url).mtime > UNREADABLE_S:
                self.storage.remove_file(self.url)
            else:
                time.sleep(UNREADABLE_S)
        except FileNotFoundError:
            pass

    def _start_heartbeat(self) -> None:
        self._beat = threading.Thread(target=self._heartbeat, name="pydistcp-lock",
                                      daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        from distcp.state.store import write_atomic

        while not self._stop.wait(HEARTBEAT_S):
            beat = Holder(**{**asdict(self.me), "heartbeat": time.time()})
            try:
                write_atomic(self.url, self._document(beat), self.options, durable=False)
            except OSError:
                pass  # the next beat tries again; a long silence lets others break it


def _missing_folders(path: str) -> list[str]:
    """``path`` and its missing ancestors, deepest first."""
    missing: list[str] = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def read_holder(url: str, storage: Storage) -> Holder | None:
    """The lock's holder, or None when there is no lock (or only a half-written one).
    Every request is bounded by the storage (a silent server must not hang a run's last
    step, the lock's release, or the next run's first)."""
    try:
        data = json.loads(storage.read_bytes(url, "lock"))
        return Holder(**data)
    except (FileNotFoundError, ValueError, TypeError):
        return None


def live_holder(state_root: str, options: dict[str, Any]) -> Holder | None:
    """The run holding the destination now, or None if none (or only a dead one) does."""
    url = StateLayout(state_root).lock
    holder = read_holder(url, storage_for(url, options))
    return holder if holder is not None and holder_alive(holder) else None
