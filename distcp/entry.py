"""The ``pydistcp`` process: the CLI, then an end without the interpreter's teardown (driver).

A run that used Spark has pandas, grpc and pyspark loaded, and tearing those modules
down at exit takes ~0.25 s here (``python -c "import pyspark.sql.connect.session"``
alone spends 0.23 s after its last line): a quarter of a warm run of a few files. The
process has nothing left to do then but what exit does first, so that is done here
(threads joined as at exit, ``atexit`` handlers, such as logging's flush, run, the
standard streams flushed) and the process ends with ``os._exit``.

``python -m distcp.entry SECONDS`` is the resident client (``distcp.resident``), whose
forks each call ``run_here`` for a command that handed its run over.

Only the command does this. ``distcp.cli.main`` called in a process of the user's (the
API's callers, click's test runner) returns or raises as any function does. The same
holds for the one OpenBLAS thread the command asks for (``one_blas_thread``) and its
choice of pyarrow's allocator (``system_arrow_pool``).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from distcp import timeline
from distcp.resident import forwarded, serve, system_arrow_pool


def run() -> None:
    """``pydistcp``: the run handed to the resident client when one answers
    (``distcp.resident``: the CLI is then not even imported here), else ``run_here``."""
    code = forwarded(sys.argv[1:])
    if code is not None:
        os._exit(code)
    run_here()


def run_here() -> None:
    """The CLI in this process, exiting with its status (an exception that escapes it is
    left to the interpreter, traceback and all)."""
    from distcp.cli import main
    from distcp.planning import beside

    timeline.client_started()
    one_blas_thread()
    system_arrow_pool()
    beside.enable()  # this process's own threads are known: planning may fork
    try:
        main(prog_name="pydistcp")
        code = 0
    except SystemExit as exc:
        code = status_of(exc)
    end_process(code)


#: How many threads numpy's bundled OpenBLAS starts, read once, when numpy is imported.
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def one_blas_thread() -> None:
    """Ask OpenBLAS for no threads of its own, unless the user chose a number.

    pydistcp does no linear algebra, but pyarrow (the plan's copy rows, the state's
    tables) imports numpy, whose OpenBLAS starts a thread per core that spins, waiting
    for work, on the same two cores the run walks and plans on; the variable reaches
    the processes this one starts too (a Spark job's Python workers, the warm engine).
    On data set B (20,000 files; benchmarks/RESULTS.md, 2026-12-02) the plan took
    0.25 s against 0.32 s by the medians of 6 runs each in turn, shorter in every pair
    (its walk, the import of pyarrow and the spinning threads share the two cores)."""
    os.environ.setdefault(BLAS_THREADS_ENV, "1")


def status_of(exc: SystemExit) -> int:
    """The exit status ``sys.exit`` would give: None is 0, a message is printed and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def end_process(code: int) -> None:
    """What the interpreter's exit does before its teardown, then ``os._exit``."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:  # thread pools told to stop, non-daemon threads joined
        shutdown()
    atexit._run_exitfuncs()
    timeline.mark("client exits")
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or the reader went away
            pass
    os._exit(code)


if __name__ == "__main__":  # the resident client (``resident.start``)
    sys.exit(serve(float(sys.argv[1]), run_here))
