"""python-gnupg in bounded memory: a pull-based reader over its push callback (executor).

python-gnupg holds the whole output in memory unless given an output path or an
``on_data`` callback (PITFALLS.md: about 2x the file). We pass ``on_data`` and
hand each chunk to the reading side through a bounded queue, so memory is
``QUEUE_CHUNKS * CHUNK`` whatever the file size, and no plaintext ever touches a
path we did not choose: the writer stages it in the task's private staging area.

The outcome of gpg (exit status and status lines) is known only at the end, so
``readinto`` raises a ConversionError at EOF when the run failed: the writer
then discards what it staged and nothing of the file is published.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable
from typing import Any

from distcp.errors import CopyError, SourceReadError

#: python-gnupg's read and write size, and the number of chunks in flight.
CHUNK = 256 << 10
QUEUE_CHUNKS = 8
_END = object()


class _GuardedInput:
    """The input gpg's feeder thread reads; stops at once when the reader aborts.

    Read errors are kept (python-gnupg would only log them) and re-raised on the
    reading side; the lock lets ``close`` wait until no read is in flight
    before the task closes the source.
    """

    def __init__(self, source: Any) -> None:
        self.source = source
        self.lock = threading.Lock()
        self.aborted = False
        self.error: BaseException | None = None

    def read(self, size: int = -1) -> bytes:
        with self.lock:
            if self.aborted or self.error is not None:
                return b""
            try:
                data: bytes = self.source.read(size)
            except Exception as exc:  # noqa: BLE001 - re-raised by GpgPipe
                self.error = exc
                return b""
            return data

    def abort(self) -> None:
        self.aborted = True
        with self.lock:
            pass


class GpgPipe(io.RawIOBase):
    """Runs ``call(on_data_gpg, guarded_input) -> result`` in a thread; read its output.

    ``check(result)`` raises a CopyError when the run must be rejected; it is
    called once, at EOF, after gpg has exited.
    """

    def __init__(self, gpg: Any, call: Callable[[Any, Any], Any], source: Any,
                 check: Callable[[Any], None], describe: Callable[[BaseException], CopyError]):
        self.gpg = gpg
        self.input = _GuardedInput(source)
        self.check = check
        self.describe = describe
        self.chunks: queue.Queue[Any] = queue.Queue(QUEUE_CHUNKS)
        self.pending = memoryview(b"")
        self.finished = False
        self.result: Any = None
        self.failure: BaseException | None = None
        #: The CopyError the finished run was refused with, once known.
        self.refusal: CopyError | None = None
        gpg.on_data = self._on_data
        gpg.buffer_size = CHUNK
        self.results: list[Any] = []
        _capture_results(gpg, self.results)
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True,
                                       name="pydistcp-gpg")
        self.thread.start()

    def _run(self, call: Callable[[Any, Any], Any]) -> None:
        try:
            self.result = call(self.gpg, self.input)
        except BaseException as exc:  # noqa: BLE001 - handed to the reading side
            self.failure = exc
        finally:
            self._put(_END)

    def _on_data(self, chunk: bytes) -> bool:
        if chunk and not self.input.aborted:
            self._put(chunk)
        return False  # never let python-gnupg keep a copy

    def _put(self, item: Any) -> None:
        while True:
            try:
                self.chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                if self.input.aborted:
                    return

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            if self.finished:
                return 0
            item = self.chunks.get()
            if item is _END:
                self._finish()
                return 0
            self.pending = memoryview(item)
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def damage(self) -> CopyError | None:
        """Why gpg refuses this stream, if it does, asked when a reader downstream found
        its plaintext bad. A tampered ciphertext decrypts to garbage that a decoder (a
        gzip CRC, a tar header) may reject before gpg has read the end where its
        integrity check is: the rest is read (its plaintext dropped) so that the user
        reads the cause, not its symptom."""
        if self.closed:
            return self.refusal
        scratch = bytearray(CHUNK)
        try:
            while self.readinto(scratch):
                pass
        except CopyError as exc:
            return exc
        return None

    def _finish(self) -> None:
        try:
            self._conclude()
        except CopyError as exc:
            self.refusal = exc
            raise

    def _conclude(self) -> None:
        self.finished = True
        self.thread.join()
        if self.input.error is not None:
            error = self.input.error
            if isinstance(error, CopyError):
                raise error
            raise SourceReadError(str(error)) from error
        if self.failure is not None:
            if isinstance(self.failure, OSError) and self.results:
                # gpg quit before reading all input (bad key, bad recipient): its
                # status lines say why, the broken pipe does not.
                self.check(self.results[-1])
            raise self.describe(self.failure) from self.failure
        self.check(self.result)

    def close(self) -> None:
        """Stop gpg early (the consumer failed): no more input, drop its output."""
        if not self.closed and not self.finished:
            self.input.abort()
            while self.thread.is_alive():
                try:
                    self.chunks.get(timeout=0.1)
                except queue.Empty:
                    pass
            self.finished = True
        super().close()


def _capture_results(gpg: Any, into: list[Any]) -> None:
    """Keep the result python-gnupg creates: it raises a feeder's broken pipe instead
    of returning it, and the result holds gpg's exit status and status lines."""
    factories = dict(gpg.result_map)
    crypt = factories["crypt"]

    def make(owner: Any) -> Any:
        result = crypt(owner)
        into.append(result)
        return result

    factories["crypt"] = make
    gpg.result_map = factories
