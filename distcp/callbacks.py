"""Progress reporting, in the shape of ``fsspec.callbacks`` (driver).

``set_size`` announces the totals, ``update`` reports absolute progress (the
driver sums the tasks' counters), ``close`` ends the display.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from distcp.names import printable


class Callback:
    """Receives progress; the base class ignores it."""

    def set_size(self, files: int, nbytes: int) -> None:
        """Totals of the copy phase."""

    def update(self, files: int, nbytes: int) -> None:
        """Files and bytes done so far (absolute, not deltas)."""

    def message(self, text: str) -> None:
        """A phase change worth telling the user ("listing", "publishing", ...)."""

    def close(self) -> None:
        """The copy phase is over."""


NoOpCallback = Callback
DEFAULT_CALLBACK = Callback()


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class TextProgress(Callback):
    """A one-line bar redrawn in place on a terminal; plain lines every
    ``interval`` seconds otherwise (logs, CI), so both stay readable."""

    def __init__(self, out: TextIO | None = None, interval: float | None = None) -> None:
        self.out = out or sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.5 if self.tty else 5.0)
        self.files_total = self.bytes_total = 0
        self.start = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False

    def set_size(self, files: int, nbytes: int) -> None:
        self.files_total, self.bytes_total = files, nbytes
        self.start = time.monotonic()

    def message(self, text: str) -> None:
        self._end_line()
        print(printable(f"pydistcp: {text}"), file=self.out, flush=True)

    def update(self, files: int, nbytes: int) -> None:
        now = time.monotonic()
        if now - self.last_draw < self.interval and files < self.files_total:
            return
        self.last_draw = now
        line = self.render(files, nbytes, now - self.start)
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=self.out, flush=True)
            self.drawn = True
        else:
            print(line, file=self.out, flush=True)

    def render(self, files: int, nbytes: int, elapsed: float) -> str:
        rate = nbytes / elapsed if elapsed > 0 else 0.0
        frac = nbytes / self.bytes_total if self.bytes_total else (
            files / self.files_total if self.files_total else 1.0)
        # no ETA before the first bytes: "ETA 0s" at 0 % reads as "done"
        eta = f"{(self.bytes_total - nbytes) / rate:.0f}s" if rate > 0 else "--"
        bar = "#" * int(frac * 20)
        return (f"[{bar:<20}] {frac:4.0%} {files}/{self.files_total} files "
                f"{human_bytes(nbytes)}/{human_bytes(self.bytes_total)} "
                f"{human_bytes(rate)}/s ETA {eta}")

    def close(self) -> None:
        self._end_line()

    def _end_line(self) -> None:
        if self.drawn:
            print(file=self.out, flush=True)
            self.drawn = False
