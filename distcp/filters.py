"""Which source files a run considers: rclone's filter flags as one value (driver and executor).

``--include``/``--exclude`` match names or relative paths; ``--min-size``/``--max-size``
bound the size; ``--min-age``/``--max-age`` bound the age of the modification time at
the moment the run started (one ``now`` for the whole listing, so two files of the same
mtime are never judged differently). The same filter protects destination entries from
``--delete``: a file the filter leaves out of the source is not the run's business at
the destination either (rclone's rule; it has ``--delete-excluded`` for the other one).
"""

from __future__ import annotations

import fnmatch
import posixpath
import time
from dataclasses import dataclass, field

from distcp.model import FileStatus


@dataclass(frozen=True)
class FileFilter:
    """The run's filters; ``admits`` is the single question the listing asks."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    min_size: int | None = None
    max_size: int | None = None
    #: Seconds: only files whose mtime is at least this old (rclone --min-age).
    min_age: float | None = None
    #: Seconds: only files whose mtime is at most this old (rclone --max-age).
    max_age: float | None = None
    now: float = field(default_factory=time.time)

    @property
    def by_status(self) -> bool:
        """True when size or age matter (not only names)."""
        return any(v is not None for v in (self.min_size, self.max_size, self.min_age,
                                           self.max_age))

    @property
    def active(self) -> bool:
        return bool(self.include or self.exclude) or self.by_status

    def admits(self, rel: str, status: FileStatus | None = None) -> bool:
        """Whether the file at ``rel`` (relative to its dataset root) is copied."""
        return self.admits_name(rel) and (status is None or self.admits_status(status))

    def admits_name(self, rel: str) -> bool:
        """rclone-like patterns: a pattern with "/" matches the relative path, else the
        name. Exclude wins over include; with any include pattern, a file must match one."""
        if not self.include and not self.exclude:  # asked of every file listed
            return True

        def hit(pattern: str) -> bool:
            target = rel if "/" in pattern else posixpath.basename(rel)
            return fnmatch.fnmatchcase(target, pattern.strip("/"))

        if any(hit(p) for p in self.exclude):
            return False
        return not self.include or any(hit(p) for p in self.include)

    def admits_status(self, status: FileStatus) -> bool:
        if self.min_size is not None and status.size < self.min_size:
            return False
        if self.max_size is not None and status.size > self.max_size:
            return False
        age = self.now - status.mtime
        if self.min_age is not None and age < self.min_age:
            return False
        return self.max_age is None or age <= self.max_age

    def describe(self) -> str:
        """The flags as the user typed them, for the "nothing matched" error."""
        parts = [f"--include {p}" for p in self.include] + [f"--exclude {p}" for p in self.exclude]
        for name in ("min_size", "max_size", "min_age", "max_age"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"--{name.replace('_', '-')} {value:g}")
        return " ".join(parts)
