"""The ``pydistcp`` command: flags -> CopyConfiguration -> ``distcp.copy``.

Every error the user can cause ends as one line on stderr and a non-zero exit:
2 for a bad invocation or an impossible plan, 1 when files failed, 3 when
Spark cannot start. Python tracebacks are for bugs only, and go to a file.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import click

from distcp import __version__
from distcp.configuration import parse_key_values, parse_options_file, parse_size
from distcp.errors import ConfigurationError, DistcpError, JavaMissingError, PlanningError

COPY_HELP = """Copy SRC... to DST as a Spark job, verified, published per file set.

\b
How sources map to DST (rerunning never nests DST/SRC):
  one directory SRC   DST becomes a mirror of SRC's contents
  one file SRC        DST is the file, or DST/<name> if DST is a directory
                      (or ends with "/")
  several SRCs        each goes to DST/<its basename>
  --dataset-glob G    every directory matching SRC/G is a dataset, copied to
                      the same relative path under DST

A file is skipped when DST already has it with the same size and mtime (or
the same checksum when both are known). Paths are fsspec URLs: /local/path,
file://, s3://bucket/key, hdfs://, ... Exit status: 0 all copied, 1 some files
failed (nothing of their file set was published), 2 bad invocation or plan,
3 Spark could not start.
"""


def _split(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for v in value for n in v.split(",") if n.strip())


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pydistcp")
def main() -> None:
    """pydistcp: distcp-style file replication between any fsspec filesystems, on Spark."""


@main.command("copy", help=COPY_HELP, no_args_is_help=True)
@click.argument("paths", nargs=-1, required=True, metavar="SRC... DST")
@click.option("--dataset-glob", metavar="GLOB", help="Each directory matching SRC/GLOB is a dataset.")
@click.option("--include", multiple=True, metavar="GLOB",
              help="Copy only matching files (repeatable). A pattern with '/' matches the path "
                   "relative to the dataset root, otherwise the file name.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files (repeatable); wins over --include.")
@click.option("--overwrite", is_flag=True, help="Copy every file, even those DST already has.")
@click.option("--delete", is_flag=True,
              help="Remove files under each copied dataset in DST that its source lacks.")
@click.option("--dry-run", is_flag=True, help="Print the plan (copy/skip/delete and why); change nothing.")
@click.option("-p", "--preserve", default="pt", show_default=True, metavar="LETTERS",
              help="Attributes to keep: u owner, g group, p permissions, t mtime, b block size "
                   "(where the filesystems have them; owner/group only where allowed).")
@click.option("--convert", "converters", multiple=True, callback=_split, metavar="NAMES",
              help="Converters to apply in order, e.g. 'decrypt,gunzip,untar'.")
@click.option("--gpg-home", type=click.Path(file_okay=False), help="GnuPG home with the keyring.")
@click.option("--gpg-passphrase-file", type=click.Path(dir_okay=False, exists=True),
              help="File holding the key passphrase (or set PYDISTCP_GPG_PASSPHRASE).")
@click.option("--gpg-recipient", "gpg_recipients", multiple=True, help="Encrypt to this key (repeatable).")
@click.option("--gpg-require-signature", is_flag=True, help="Fail input that is not validly signed.")
@click.option("--max-expansion-ratio", type=float, default=100.0, show_default=True,
              help="Fail an archive or stream that expands more than this many times.")
@click.option("--max-expanded-bytes", metavar="SIZE", help="Fail an archive that expands beyond SIZE.")
@click.option("--expand-into-parent", is_flag=True,
              help="Expand archives straight into their directory, not DST/<archive name>/.")
@click.option("--master", default="local[*]", show_default=True, envvar="PYDISTCP_MASTER",
              help="Spark master: local[N], spark://host:port, yarn, k8s://..., or sc://host:port "
                   "for Spark Connect.")
@click.option("--parallelism", type=int, help="Tasks are about 2x this (default: Spark's cores).")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="Spark setting (repeatable).")
@click.option("--buffer-size", default="8M", show_default=True, metavar="SIZE", help="Copy buffer per task.")
@click.option("--verify", type=click.Choice(["digest", "size"]), default="digest", show_default=True,
              help="Check each staged copy's size and xxh3 digest by re-reading it, or its size only.")
@click.option("--split-size", metavar="SIZE",
              help="Copy files larger than SIZE (e.g. 256M) as byte ranges in parallel tasks, "
                   "joined at publish and resumed after a crash (local and S3 destinations).")
@click.option("--src-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option for sources.")
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option for DST.")
@click.option("--src-options-file", type=click.Path(dir_okay=False, exists=True), metavar="FILE",
              help="Source storage options, one key=value a line (keeps secrets out of argv); "
                   "--src-option wins.")
@click.option("--dst-options-file", type=click.Path(dir_okay=False, exists=True), metavar="FILE",
              help="DST storage options, one key=value a line (keeps secrets out of argv); "
                   "--dst-option wins.")
@click.option("--state-dir", metavar="URL",
              help="Where commits, dataset state and recovery live [default: DST/.pydistcp].")
@click.option("--commit-policy", type=click.Choice(["full", "successful", "partial"]),
              default="successful", show_default=True,
              help="full: publish nothing if any file set fails; successful: every file set "
                   "whose files all succeeded; partial: every file that succeeded.")
@click.option("--max-replays", type=int, default=3, show_default=True,
              help="Set an unfinished commit of an earlier run aside after this many replays.")
@click.option("--incremental", is_flag=True,
              help="Skip what the state says was published, without listing DST.")
@click.option("--recovery-retention", default="24h", show_default=True, metavar="DURATION",
              help="Keep verified but unpublished copies this long for the next run to reuse.")
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines.")
@click.option("--summary-json", type=click.Path(dir_okay=False), help="Write the run's summary as JSON.")
@click.option("--log-dir", type=click.Path(file_okay=False),
              help="Where Spark's log goes [default: ~/.cache/pydistcp/logs].")
def copy_command(paths: tuple[str, ...], **flags: Any) -> None:
    if len(paths) < 2:
        raise click.UsageError("give at least one SRC and a DST")
    _run(lambda: _copy(paths, flags))


def _copy(paths: tuple[str, ...], flags: dict[str, Any]) -> int:
    from distcp import copy
    from distcp.callbacks import Callback, TextProgress

    options = _options(flags)
    progress = not flags["no_progress"] and not flags["dry_run"]
    callback: Callback = TextProgress() if progress else Callback()
    summary = copy(list(paths[:-1]), paths[-1], callback=callback, **options)
    for row in summary.plan:
        click.echo(f"{row['action']:<6} {row['path']}  ({row['reason']})")
    for failure in summary.failures:
        click.echo(f"pydistcp: FAILED {failure.error}", err=True)
    click.echo(summary.render())
    if flags["summary_json"]:
        Path(flags["summary_json"]).write_text(summary.to_json())
    return 0 if summary.ok else 1


def _options(flags: dict[str, Any]) -> dict[str, Any]:
    """Flags -> keyword options of ``distcp.copy``; secrets read from files, never argv."""
    opts: dict[str, Any] = {k: flags[k] for k in (
        "dataset_glob", "include", "exclude", "overwrite", "delete", "dry_run", "preserve",
        "converters", "master", "parallelism", "verify", "summary_json", "log_dir",
        "gpg_home", "gpg_recipients", "gpg_require_signature", "max_expansion_ratio",
        "expand_into_parent", "state_dir", "commit_policy", "max_replays", "incremental",
        "recovery_retention")}
    opts["buffer_size"] = parse_size(flags["buffer_size"])
    if flags["split_size"]:
        opts["split_size"] = parse_size(flags["split_size"])
    opts["spark_conf"] = parse_key_values(flags["spark_conf"], "--conf")
    opts["src_options"] = _side_options(flags["src_option"], flags["src_options_file"], "src")
    opts["dst_options"] = _side_options(flags["dst_option"], flags["dst_options_file"], "dst")
    if flags["max_expanded_bytes"]:
        opts["max_expanded_bytes"] = parse_size(flags["max_expanded_bytes"])
    if flags["gpg_passphrase_file"]:
        opts["gpg_passphrase"] = Path(flags["gpg_passphrase_file"]).read_text().rstrip("\r\n")
    opts["progress"] = not flags["no_progress"]
    return opts


def _run(action: Any) -> None:
    """Run a command; map our errors onto one line and an exit status."""
    try:
        code = action()
    except (ConfigurationError, PlanningError) as exc:
        _fail(str(exc), 2)
    except JavaMissingError as exc:
        _fail(str(exc), 3)
    except DistcpError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        _fail("interrupted; nothing unverified was published, rerun to finish", 130)
    except OSError as exc:  # the storage failed the driver (gone, full, silent): not a bug
        _fail(f"{exc}; nothing unverified was published, rerun to finish once it is fixed", 1)
    except Exception as exc:  # noqa: BLE001 - a bug: keep the trace, show one line
        _fail(f"internal error: {type(exc).__name__}: {exc} (traceback in {_dump_trace()})", 1)
    sys.exit(code)


def _fail(message: str, code: int) -> None:
    click.echo(f"pydistcp: error: {message}", err=True)
    sys.exit(code)


def _dump_trace() -> str:
    fd, path = tempfile.mkstemp(prefix="pydistcp-trace-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        traceback.print_exc(file=f)
    return path


def _side_options(pairs: tuple[str, ...], path: str | None, side: str) -> dict[str, str]:
    """``--<side>-options-file`` overlaid with ``--<side>-option`` flags (flags win)."""
    from_file = parse_options_file(path, f"--{side}-options-file") if path else {}
    return {**from_file, **parse_key_values(pairs, f"--{side}-option")}


def _state_options(dst_option: tuple[str, ...], path: str | None = None) -> dict[str, str]:
    return _side_options(dst_option, path, "dst")


_DST_OPTIONS_FILE = click.option(
    "--dst-options-file", type=click.Path(dir_okay=False, exists=True), metavar="FILE",
    help="Storage options, one key=value a line (keeps secrets out of argv); "
         "--dst-option wins.")


@main.command("status")
@click.argument("destination", required=False, metavar="[DST]")
@click.option("--state-dir", metavar="URL", help="State directory [default: DST/.pydistcp].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option.")
@_DST_OPTIONS_FILE
def status_command(destination: str | None, state_dir: str | None, as_json: bool,
                   dst_option: tuple[str, ...], dst_options_file: str | None) -> None:
    """Show pending commits, watermarks per dataset, recoverable files and last runs."""
    def action() -> int:
        import json

        from distcp.inspect import render_status, resolve_state_root, status_report

        options = _state_options(dst_option, dst_options_file)
        report = status_report(resolve_state_root(destination, state_dir, options), options)
        click.echo(json.dumps(report, indent=2) if as_json else render_status(report))
        return 0

    _run(action)


@main.command("recover")
@click.argument("destination", required=False, metavar="[DST]")
@click.option("--state-dir", metavar="URL", help="State directory [default: DST/.pydistcp].")
@click.option("--max-replays", type=int, default=3, show_default=True)
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option.")
@_DST_OPTIONS_FILE
def recover_command(destination: str | None, state_dir: str | None, max_replays: int,
                    dst_option: tuple[str, ...], dst_options_file: str | None) -> None:
    """Finish unfinished commits of earlier runs without copying anything new."""
    def action() -> int:
        from distcp.inspect import recover_only, resolve_state_root

        options = _state_options(dst_option, dst_options_file)
        summary = recover_only(resolve_state_root(destination, state_dir, options), options,
                               max_replays)
        for failure in summary.failures:
            click.echo(f"pydistcp: FAILED {failure.error}", err=True)
        click.echo(f"replayed {summary.sequences_replayed} commit(s), set aside "
                   f"{summary.sequences_set_aside}")
        return 0 if summary.ok else 1

    _run(action)


@main.command("cleanup")
@click.argument("destination", metavar="DST")
@click.option("--older-than", default="1h", show_default=True, metavar="DURATION",
              help="Abort only uploads started (and split files left) longer ago than this.")
@click.option("--state-dir", metavar="URL", help="State directory [default: DST/.pydistcp].")
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option.")
@_DST_OPTIONS_FILE
def cleanup_command(destination: str, older_than: str, state_dir: str | None,
                    dst_option: tuple[str, ...], dst_options_file: str | None) -> None:
    """Abort multipart uploads left under DST by killed or failed runs.

    Uploads a pending commit will complete are kept; split files that a later
    run could resume are kept until they are older than --older-than.
    """
    def action() -> int:
        from distcp.configuration import parse_duration
        from distcp.inspect import resolve_state_root
        from distcp.orphans import abort_orphans

        options = _state_options(dst_option, dst_options_file)
        root = resolve_state_root(destination, state_dir, options)
        n = abort_orphans(destination, root, options, parse_duration(older_than),
                          expire_splits=True)
        click.echo(f"aborted {n} orphaned multipart upload(s) under {destination}")
        return 0

    _run(action)
