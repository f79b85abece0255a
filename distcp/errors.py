"""The DistcpError tree (driver and executor).

Errors are picklable (they cross from Spark executors to the driver inside task
results) and classified by behaviour: ``retryable`` says whether trying the same
file again can help, the rule rclone and Hadoop DistCp both follow.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DistcpError(Exception):
    """Base of every error pydistcp raises on purpose."""

    def __init__(self, message: str, **attrs: Any) -> None:
        super().__init__(message)
        self.message = message
        self.attrs = attrs
        for key, value in attrs.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        # Default exception pickling passes only args; keyword attributes would be lost.
        return (_rebuild, (type(self), self.message, self.attrs))

    def __str__(self) -> str:
        return self.message


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of what ``exc`` says (its type's name when it says nothing), cut to
    ``limit`` characters: a failed job's or task's reason as a summary line or a record
    carries it, without a JVM's stack trace."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


def _rebuild(cls: type[DistcpError], message: str, attrs: dict[str, Any]) -> DistcpError:
    return cls(message, **attrs)


class ConfigurationError(DistcpError, ValueError):
    """A flag, option or job file is wrong; the CLI turns it into a usage error."""


class PluginError(DistcpError, LookupError):
    """A plugin name is unknown, taken twice, or its module does not import."""


class PlanningError(DistcpError):
    """The copy cannot be planned: missing source, destination inside source, ..."""


class DuplicateDestinationError(PlanningError):
    """Two origin files would be written to the same destination path."""


class EnvironmentProblem(DistcpError):
    """The machine or a service around it is not ready (Java, Spark master, S3
    credentials or endpoint, a destination we may not write): the user fixes the
    environment, not the command line. Exit status 3."""


class JavaMissingError(EnvironmentProblem):
    """Spark cannot start because no suitable Java runtime was found."""


class SparkUnavailableError(EnvironmentProblem):
    """The Spark master is unreachable or Spark's JVM exited while starting."""


class CredentialsError(EnvironmentProblem):
    """A storage refused or lacks credentials (missing, invalid, access denied)."""


class EndpointUnreachableError(EnvironmentProblem):
    """A storage endpoint refused the connection or did not answer in time."""


class DestinationNotWritableError(EnvironmentProblem):
    """The destination (or a file we must write beside it) cannot be written."""


class EngineRefusedError(EnvironmentProblem):
    """The warm engine found is not this caller's to use: another identity's (its tasks
    would read and write with that identity's rights), or its directory or token file
    could have been planted or changed by someone else."""


class CopyError(DistcpError):
    """One file could not be copied; carried back to the driver as data."""

    retryable: ClassVar[bool] = False


class SourceReadError(CopyError):
    """Reading the origin failed (vanished, unreadable, changed while copying)."""

    retryable = True


class DestinationWriteError(CopyError):
    """Writing the staged copy failed (no permission, disk full, ...)."""

    retryable = True


class ConversionError(CopyError):
    """A converter rejected its input: corrupt gzip, wrong key, hostile archive."""


class StateCollisionError(CopyError):
    """A file or archive member would land in the destination's state directory: data
    never becomes the tool's own state (its name is refused, the rest of the run goes on)."""


class DestinationNameError(CopyError):
    """The destination cannot hold the file's name (an object key must be UTF-8, at most
    1,024 bytes, without empty segments): the file fails by name, the run goes on."""


class QualityCheckError(CopyError):
    """A staged output failed a ``--check``: discarded, nothing of its file published."""


class IntegrityError(CopyError):
    """The staged bytes do not match what was read from the origin."""


class PublishError(DistcpError):
    """A file set could not be moved to its final place."""


class CatalogError(PublishError):
    """A catalog (Hive metastore) refused or could not take a registration; the data
    it describes is published already, and the next run registers it again."""


class StateError(DistcpError):
    """A commit-log or state file is unreadable or corrupt."""


class DestinationBusyError(DistcpError):
    """Another run holds the destination's lock (one run per destination at a time)."""
