"""Where events go (``--events TARGET``) and how none is lost on the way (driver).

- a path: JSON lines appended to that file, one line per event, each written with one
  ``write`` of a whole line (a crash leaves whole lines before it);
- ``http://`` or ``https://``: POSTed as JSON, with the ``Idempotency-Key`` header,
  retried with exponential backoff within ``timeout`` seconds; an endpoint that
  fails once in a run is not tried again in that run, so a dead endpoint holds
  publishing for one timeout at most;
- ``-``: JSON lines on stdout;
- nothing: the default, ``STATE/events/events.jsonl`` where the state is on a local
  disk; where it is on an object store (which cannot append), each file set's event
  is only in its record ``STATE/events/<key>.json``. The default file is the
  destination's own log: a run that never made the state (nothing matched, a refusal)
  writes nothing there, so it leaves no folder behind.

At least once: an event that could not be delivered waits in ``STATE/events/outbox/``
and the next run (``flush``) sends it first, with the same key, in the order the events
were made (each outbox name begins with the time it was parked). An event is parked only
when delivery failed (no write before each send: that would cost an object store two
requests per event); a file set's event killed mid-send is sent again because its commit
step replays until its record exists. The ``Authorization``
header comes from ``PYDISTCP_EVENTS_AUTH``, never from argv, logs or the state.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distcp.state.layout import BARE, StateLayout
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.atomic import write_atomic

log = logging.getLogger("pydistcp.events")
AUTH_ENV = "PYDISTCP_EVENTS_AUTH"
#: Seconds an HTTP endpoint gets for one event, retries included (--events-timeout).
DEFAULT_TIMEOUT = 10.0
#: An event, or how to make it when it is delivered (``distcp.events.run``).
Event = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class DeliveryError(OSError):
    """The target did not take the event."""


@dataclass
class EventSink:
    """One run's way of sending events: the target, and the state root holding the
    records and the outbox. Lives on the driver, never in the commit log."""

    target: str | None
    state_root: str
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    #: An HTTP endpoint that failed in this run: later events go to the outbox at once.
    dead: bool = False
    undelivered: int = 0
    _outbox_made: bool = field(default=False, repr=False)
    #: Default-log events held until the state exists (see ``_held``), not yet made.
    _waiting: list[tuple[str, Event]] = field(default_factory=list, repr=False)

    @property
    def outbox(self) -> str:
        return StateLayout(self.state_root).outbox

    def record_url(self, key: str) -> str:
        """A file set's event as it was first sent: the commit step's proof it ran."""
        return StateLayout(self.state_root).event(key)

    def send(self, key: str, event: Event) -> bool:
        """Deliver ``event`` at least once: kept in the outbox until the target took it.
        False when it waits there for the next run."""
        if self._held(key, event):
            return True
        return self._deliver(key, _body(event))

    def _held(self, key: str, event: Event) -> bool:
        """The default log is the state's: until a run has made the state folder its
        events wait in memory, and a run that never makes it (nothing to copy, a
        refusal) leaves no trace in the destination (nor makes its events)."""
        if self.target is not None or default_jsonl(self.state_root) is None:
            return False
        self._waiting.append((key, event))
        if not _state_made(str(fsutil.local_path(self.state_root))):
            return True
        waiting, self._waiting = self._waiting, []
        for k, e in waiting:
            self._deliver(k, _body(e))
        return True

    def flush(self) -> int:
        """Send what earlier runs could not deliver, oldest first; how many went."""
        storage = storage_for(self.outbox, dict(self.options))
        try:
            names = storage.names(self.outbox)
        except FileNotFoundError:
            return 0
        sent = 0
        for name in sorted(names, key=_parked_order):
            url = fsutil.join(self.outbox, name)
            try:
                parked = json.loads(storage.read_bytes(url, "event"))
            except FileNotFoundError:
                continue
            except ValueError:
                log.warning("events: %s is not an event document; left in the outbox",
                            fsutil.display(url))
                continue
            if not self._deliver(parked["key"], json.dumps(parked["event"], sort_keys=True),
                                 park=False):
                break  # the target is down: the rest wait too, in order
            self._unpark(url)
            sent += 1
        return sent

    def _make_outbox(self) -> None:
        """The outbox folder, once per run: the run's START comes before the state's
        folders are made, and some stores (FTP) write no file into a missing folder."""
        if not self._outbox_made:
            storage_for(self.outbox, dict(self.options)).makedirs(self.outbox)
            self._outbox_made = True

    def _unpark(self, url: str) -> None:
        storage_for(url, dict(self.options)).remove_file(url)

    def _deliver(self, key: str, body: str, park: bool = True) -> bool:
        try:
            deliver(self.target, self.state_root, key, body, self.timeout, self.dead)
        except DeliveryError as exc:
            self.dead = self.dead or is_http(self.target)
            self.undelivered += 1
            if park:
                self._park(key, body)
            log.warning("events: %s; kept in %s for the next run", exc,
                        fsutil.display(self.outbox))
            return False
        return True

    def _park(self, key: str, body: str) -> None:
        self._make_outbox()
        write_atomic(fsutil.join(self.outbox, f"{_parked_at()}-{key}.json"),
                     json.dumps({"key": key, "event": json.loads(body)}).encode(),
                     dict(self.options))


_last_parked = 0


def _parked_at() -> str:
    """The outbox name's prefix: when the event was parked, in nanoseconds, strictly
    increasing in this process. Keys say nothing of order (a run's ``<job>-complete``
    sorts before its ``<job>-start``), and a consumer must receive events in the order
    they were made."""
    global _last_parked
    _last_parked = max(time.time_ns(), _last_parked + 1)
    return f"{_last_parked:020d}"


def _parked_order(name: str) -> tuple[int, str]:
    """Oldest first by the parking time in the name; a name without one (parked by a
    version before it) first, by name."""
    stamp, _, rest = name.partition("-")
    return (int(stamp), rest) if len(stamp) == 20 and stamp.isdigit() else (0, name)


def _body(event: Event) -> str:
    return json.dumps(event() if callable(event) else event, sort_keys=True)


def _state_made(folder: str) -> bool:
    """The state holds more than this run's lock (which goes again, with the folders
    it made, when a run leaves nothing)."""
    try:
        return any(name not in BARE for name in os.listdir(folder))
    except OSError:
        return False


def is_http(target: str | None) -> bool:
    return bool(target) and str(target).startswith(("http://", "https://"))


def default_jsonl(state_root: str) -> str | None:
    """``STATE/events/events.jsonl`` where the state is local (appendable), else None."""
    local = fsutil.local_path(state_root)
    return StateLayout(local).events_log if local is not None else None


def deliver(target: str | None, state_root: str, key: str, body: str, timeout: float,
            dead: bool = False) -> None:
    """Send one event's JSON ``body`` to ``target``; DeliveryError when it did not go."""
    if target == "-":
        sys.stdout.write(body + "\n")
        sys.stdout.flush()
    elif is_http(target):
        if dead:
            raise DeliveryError(f"{_shown(str(target))} failed earlier in this run")
        _post(str(target), key, body, timeout)
    else:
        path = target or default_jsonl(state_root)
        if path is not None:
            if not target:  # the state's own folder (the user's file's was checked first)
                os.makedirs(os.path.dirname(path), exist_ok=True)
            _append_line(path, body)


def _append_line(path: str, body: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (body + "\n").encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise DeliveryError(f"cannot append to {path}: {exc.strerror or exc}") from exc


def _post(url: str, key: str, body: str, timeout: float) -> None:
    """POST with backoff (0.25 s, doubling) until ``timeout`` seconds have passed."""
    import urllib.error  # here: most runs post no event (0.01 s)
    import urllib.request

    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    if os.environ.get(AUTH_ENV):
        headers["Authorization"] = os.environ[AUTH_ENV]
    deadline, pause, cause = time.monotonic() + timeout, 0.25, "no attempt"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeliveryError(f"{_shown(url)} did not take event {key} within "
                                f"{timeout:g}s ({cause})")
        request = urllib.request.Request(url, data=body.encode(), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=max(0.1, left)) as answer:
                if 200 <= answer.status < 300:
                    return
                cause = f"HTTP {answer.status}"
        except urllib.error.HTTPError as exc:
            cause = f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:  # refused, reset, timed out, bad URL
            cause = str(getattr(exc, "reason", None) or exc)
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
        pause *= 2


def _shown(url: str) -> str:
    """The endpoint without its query (a token may be there)."""
    return url.split("?", 1)[0]
