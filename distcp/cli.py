"""The ``pydistcp`` command: flags -> CopyConfiguration -> ``distcp.copy`` (driver).

Every error the user can cause ends as one line on stderr and a non-zero exit:
2 for a bad invocation or an impossible plan, 1 when files failed, 3 when the
environment refuses (Java, Spark master, S3 credentials or endpoint, permissions),
130 on Ctrl-C. Python tracebacks are for bugs only, and go to a file.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from distcp import __version__
from distcp.configuration import (
    LOG_LEVELS,
    parse_flag,
    parse_key_values,
    parse_options_file,
)
from distcp.driver_errors import driver_errors, storage_problem
from distcp.errors import (
    ConfigurationError,
    DestinationBusyError,
    DistcpError,
    EnvironmentProblem,
    PlanningError,
    one_line,
)
from distcp.names import printable
from distcp.quantities import parse_duration, parse_size

if TYPE_CHECKING:
    from distcp.jobs.keys import KeySpec
    from distcp.summary import Summary

COPY_HELP = """Copy SRC... to DST as a Spark job, verified, published per file set.

\b
How sources map to DST (rerunning never nests DST/SRC):
  one directory SRC   DST becomes a mirror of SRC's contents
  one file SRC        DST is the file, or DST/<name> if DST is a directory
                      (or ends with "/")
  several SRCs        each goes to DST/<its basename>
  --dataset-glob G    every directory matching SRC/G is a dataset, copied to
                      the same relative path under DST
  --finder stream     every topic folder under SRC is a dataset of time
                      partitions (SRC/topic/yyyy/MM/dd/HH), each partition
                      published on its own, with watermarks in the state
  --finder delta      SRC is a Delta table (with --dataset-glob: every table
                      matching SRC/G): the versions DST lacks are copied, each
                      version's data files published before its commit
  --finder iceberg    SRC is an Iceberg table: new snapshots' data files, then
                      manifests, manifest lists and metadata rewritten to DST

A file is skipped when DST already has it with the same size and mtime
(--checksum: the same size and contents). Paths are fsspec URLs: /local/path,
file://, s3://bucket/key, hdfs://, ...
"""

EXIT_HELP = """
\b
Exit status (every subcommand):
  0    success
  1    some files failed; nothing of their file sets was published
       (check: SRC and DST differ)
  2    the command or plan is wrong: bad flag value, missing source or DST,
       --include matching nothing, unknown --master
  3    the environment refuses: no Java, Spark master unreachable or Spark
       not starting, a warm engine that is not yours (--engine warm),
       S3 credentials missing/refused, endpoint unreachable, destination
       not writable
  130  interrupted (Ctrl-C); nothing unverified was published
"""


def _split(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for v in value for n in v.split(",") if n.strip())


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             help="pydistcp: distcp-style file replication between any fsspec filesystems, "
                  "on Spark.\n" + EXIT_HELP)
@click.version_option(__version__, prog_name="pydistcp")
def main() -> None:
    """pydistcp: distcp-style file replication between any fsspec filesystems, on Spark."""


# Commands whose help starts "SRC... " name their summary: click 8.4 ends the summary at
# the first "." followed by a space, which cut it to "Copy SRC...".
@main.command("copy", help=COPY_HELP + EXIT_HELP, no_args_is_help=True,
              short_help="Copy SRC... to DST as a Spark job, verified, published per file set.")
@click.argument("paths", nargs=-1, required=True, metavar="SRC... DST")
@click.option("--dataset-glob", metavar="GLOB", help="Each directory matching SRC/GLOB is a dataset.")
@click.option("--finder", type=click.Choice(["single", "glob", "stream", "delta", "iceberg"]),
              help="How datasets are found: single (SRC is one dataset), glob (each directory "
                   "matching --dataset-glob; a Delta table among them is copied as one), "
                   "stream (each topic folder under SRC, or matching --dataset-glob, holds "
                   "time partitions: one file set each) or delta (SRC, or each folder "
                   "matching --dataset-glob, is a Delta table: its new versions copied, data "
                   "before commits) or iceberg (the same for Iceberg tables: data, then "
                   "rewritten manifests, lists and metadata). Default: glob with --dataset-glob, else single.")
@click.option("--partition-pattern", metavar="PATTERN",
              help="--finder stream: the partition folders below a topic, from the tokens "
                   "yyyy MM dd HH mm (UTC); default yyyy/MM/dd/HH. E.g. dt=yyyy-MM-dd/hr=HH.")
@click.option("--lookback", metavar="DURATION",
              help="--finder stream: list again only partitions no older than the low "
                   "watermark minus DURATION (e.g. 24h); default: every partition. "
                   "--min-age/--max-age apply to partitions' end times too.")
@click.option("--ready-marker", metavar="NAME",
              help="--finder stream: copy a partition only once it holds NAME (_SUCCESS, "
                   "copied too), or, with {file} in NAME ({file}.ready), each file only once "
                   "its marker is beside it (markers not copied). Others wait for a later run.")
@click.option("--include", multiple=True, metavar="GLOB",
              help="Copy only matching files (repeatable). A pattern with '/' matches the path "
                   "relative to the dataset root, otherwise the file name.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files (repeatable); wins over --include.")
@click.option("--min-size", metavar="SIZE", help="rclone: copy only files of at least SIZE (e.g. 10K).")
@click.option("--max-size", metavar="SIZE", help="rclone: copy only files of at most SIZE (e.g. 2G).")
@click.option("--min-age", metavar="DURATION",
              help="rclone: copy only files modified at least DURATION ago (e.g. 30m, 2d).")
@click.option("--max-age", metavar="DURATION",
              help="rclone: copy only files modified at most DURATION ago (e.g. 24h). Files a "
                   "filter leaves out are not deleted by --delete either.")
@click.option("--files-from", metavar="FILE",
              help="rclone: copy only the files FILE lists, one path a line relative to SRC "
                   "('-': stdin; blank and #/; lines skipped, a leading / is SRC); SRC is not "
                   "walked. A listed file SRC lacks is a failed file (exit 1); a path above "
                   "SRC ('..') is refused (exit 2).")
@click.option("--files-from-manifest", metavar="FILE",
              help="Copy only the objects a manifest lists, like an S3 Inventory report: CSV "
                   "(optionally gzip'd; columns bucket,key[,size,last_modified_date,e_tag] or "
                   "a header row naming them; keys URL-encoded), Parquet, or an Inventory "
                   "manifest.json (all its data files). Rows with size "
                   "and last_modified_date cost no request at planning. A path or URL.")
@click.option("--overwrite", is_flag=True, help="Copy every file, even those DST already has.")
@click.option("--checksum", "-c", is_flag=True,
              help="rclone -c: skip a file whose size and contents match (mtimes "
                   "ignored). A file of the same size is compared before it is copied: "
                   "by the checksums both stores keep (S3 single-part ETags), else by "
                   "hashing both sides on Spark; copied when they differ or a side "
                   "cannot be read.")
@click.option("--size-only", is_flag=True, help="rclone: skip a file of the same size; ignore mtime.")
@click.option("--max-delete", type=click.IntRange(min=0), metavar="N",
              help="rclone: with --delete, refuse the run (exit 2, nothing changed) when the "
                   "plan deletes more than N entries (under 'move': source files too).")
@click.option("--ignore-existing", is_flag=True,
              help="rclone: skip every file DST has, whatever its size or mtime.")
@click.option("--delete", is_flag=True,
              help="Remove files under each copied dataset in DST that its source lacks.")
@click.option("--dry-run", is_flag=True, help="Print the plan (copy/skip/delete and why); change nothing.")
@click.option("-p", "--preserve", default="pt", show_default=True, metavar="LETTERS",
              help="Attributes to keep: u owner, g group, p permissions, t mtime, b block size "
                   "(where the filesystems have them; owner/group only where allowed).")
@click.option("--chmod", metavar="RULES",
              help="rsync: the permissions of what the run writes (files and the "
                   "directories it makes), applied to the source's: D755,F644, "
                   "u+rwx,g-w,o= or Fu+x (D/F: directories/files only). Wins over -p p. "
                   "Refused for a destination without modes (S3).")
@click.option("--chown", metavar="USER:GROUP",
              help="rsync: the owner and group of what the run writes (USER, :GROUP or "
                   "USER:GROUP; names or numeric ids; needs root or a group you are in). "
                   "Wins over -p ug. Refused for a destination without owners (S3).")
@click.option("--convert", "converters", multiple=True, callback=_split, metavar="NAMES",
              help="Converters to apply in order, e.g. 'decrypt,gunzip,untar'.")
@click.option("--check", "check", multiple=True, metavar="NAME[=ARG]",
              help="Quality check every staged output must pass before it may publish "
                   "(repeatable): not-empty, min-size=SIZE, max-size=SIZE, gzip, parquet, "
                   "schema=COL:TYPE,... or schema=@FILE, or a plugin's name. A failure "
                   "fails that file.")
@click.option("--gpg-home", type=click.Path(file_okay=False), help="GnuPG home with the keyring.")
@click.option("--gpg-passphrase-file", type=click.Path(dir_okay=False, exists=True),
              help="File holding the key passphrase (or set PYDISTCP_GPG_PASSPHRASE).")
@click.option("--gpg-recipient", "gpg_recipients", multiple=True, help="Encrypt to this key (repeatable).")
@click.option("--gpg-require-signature", is_flag=True, help="Fail input that is not validly signed.")
@click.option("--max-expansion-ratio", type=click.FloatRange(min=1.0), default=100.0, show_default=True,
              help="Fail an archive or stream that expands more than this many times.")
@click.option("--max-expanded-bytes", metavar="SIZE", help="Fail an archive that expands beyond SIZE.")
@click.option("--archive-links", type=click.Choice(["refuse", "skip"]), default="refuse",
              show_default=True,
              help="Links inside a tar: refuse the archive, or skip them (each named in the "
                   "summary) and expand the rest; with skip, a hard link to an earlier file "
                   "of the archive up to 1 MiB is expanded as a copy of its bytes.")
@click.option("--expand-into-parent", is_flag=True,
              help="Expand archives straight into their directory, not DST/<archive name>/.")
@click.option("--master", default="local[*]", show_default=True, envvar="PYDISTCP_MASTER",
              help="Spark master: local[N], spark://host:port, yarn, k8s://..., or sc://host:port "
                   "for Spark Connect.")
@click.option("--engine", type=click.Choice(["auto", "warm", "cold"]), default="auto",
              show_default=True, envvar="PYDISTCP_ENGINE",
              help="Local masters: warm runs on the warm engine, a Spark server kept for later "
                   "runs (started if needed); cold starts a JVM for this run; auto uses the "
                   "warm engine when it runs (see 'pydistcp engine').")
@click.option("--listing", type=click.Choice(["auto", "driver", "spark"]), default="auto",
              show_default=True,
              help="Who lists the trees: driver (this process, one listing after another; "
                   "past 1,000 files to copy, a plain copy not staged as multipart uploads "
                   "leaves its files and results to the copy tasks, in files), spark (the "
                   "driver lists the top, Spark tasks list subtrees or S3 key "
                   "ranges in parallel; a plain tree is then planned on Spark too, only "
                   "what is acted on collected) or auto (spark for a local tree of more "
                   "than 250,000 entries when Spark costs little to start: the warm "
                   "engine runs, or a cluster; and for an S3 prefix of more than 100,000 "
                   "keys; else driver).")
@click.option("--publishing", type=click.Choice(["auto", "driver", "spark"]), default="auto",
              show_default=True,
              help="Who carries out the per-file steps of publishing (renames, multipart "
                   "completes, move's source deletes): driver (this process), spark (Spark "
                   "tasks, in pieces; the commit log still records each file set first) or "
                   "auto (spark on a cluster master for a step of 2,000 objects or 200,000 "
                   "local files, or on a local master for 500,000 local files; else driver: "
                   "local executors share the driver's cores).")
@click.option("--copying", type=click.Choice(["auto", "driver", "spark"]), default="auto",
              show_default=True, envvar="PYDISTCP_COPYING",
              help="Who runs the copy tasks: spark (a Spark job), driver (this process, the "
                   "same tasks in forked processes, one per core, and the ranges of "
                   "--split-size, into a local tree from local trees, S3 or GCS; threads "
                   "when another object store is in the run, or S3 is the destination) or auto "
                   "(driver for a plan into a local tree from local trees, S3 or GCS "
                   "on a local master of at most 20,000 files, whatever their size and "
                   "the engine; with another object store 10,000 files of any "
                   "size, 1,000 when the warm engine runs (5,000 uploads of local files to "
                   "S3 without write options), 256 MiB with a converter "
                   "(threads): where a Spark job's start costs more "
                   "than the copy; past that, a run into a local tree from local trees, "
                   "S3 or GCS, cold or on the warm engine, copies its kept files' chunks in "
                   "forked processes too (and the ranges of --split-size); "
                   "a fork by the smallest of its branches' bounds; spark for the rest, a "
                   "cluster, or ranges a join task concatenates, as on GCS, FTP and SFTP).")
@click.option("--cores", "--parallelism", "parallelism", type=click.IntRange(min=1),
              metavar="N", help="Cores to plan for: 2 tasks per core, 1 when each core's "
                                "share is under 1.5 GiB (default: Spark's cores); "
                                "--parallelism is its old name.")
@click.option("--tasks", type=int, metavar="N",
              help="Exactly N tasks copy whole files (fewer only when there are fewer files, "
                   "more when a task would hold over 10,000 files); wins over --cores.")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="Spark setting (repeatable).")
@click.option("--bwlimit", metavar="SIZE",
              help="rclone: bytes per second for the whole run (e.g. 10M), shared by the "
                   "tasks running at once.")
@click.option("--buffer-size", default="8M", show_default=True, metavar="SIZE", help="Copy buffer per task.")
@click.option("--verify", type=click.Choice(["digest", "size"]), default="digest", show_default=True,
              help="Check each staged copy's size and xxh3 digest by re-reading it, or its size only.")
@click.option("--split-size", metavar="SIZE",
              help="Copy files larger than SIZE (e.g. 256M) as byte ranges in parallel tasks, "
                   "joined at publish and resumed after a crash (local and S3 destinations). "
                   "Unset, a file over 256M that holds more than 1.5x an even share of the "
                   "run's bytes per core is cut into ranges of half a share (on an object "
                   "store or a local disk), so no core waits idle for it; 0 never splits.")
@click.option("--links", type=click.Choice(["skip", "follow", "copy"]), default="skip",
              show_default=True,
              help="Symbolic links in a local source tree: skip (each one reported), follow "
                   "(copy the target's content; dangling links and loops reported) or copy "
                   "(as links with the same target text, dangling ones too, like rsync -l; "
                   "local DST only).")
@click.option("--src-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option for sources.")
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option for DST.")
@click.option("--src-options-file", type=click.Path(dir_okay=False, exists=True), metavar="FILE",
              help="Source storage options, one key=value a line (keeps secrets out of argv); "
                   "--src-option wins.")
@click.option("--dst-options-file", type=click.Path(dir_okay=False, exists=True), metavar="FILE",
              help="DST storage options, one key=value a line (keeps secrets out of argv); "
                   "--dst-option wins.")
@click.option("--storage-class", metavar="CLASS",
              help="Object stores: the storage class every object written gets (S3: "
                   "STANDARD_IA, GLACIER_IR...; GCS: NEARLINE, COLDLINE...; Azure: the access "
                   "tier Hot, Cool, Cold or Archive).")
@click.option("--kms-key-id", "--kms-key", "kms_key_id", metavar="KEY",
              help="Object stores: encrypt every object written with this managed key (S3: "
                   "SSE-KMS, the key's id or ARN; GCS: CMEK, projects/.../cryptoKeys/NAME; "
                   "Azure: the encryption scope's name).")
@click.option("--acl", metavar="NAME",
              help="Object stores: the canned ACL every object written gets (S3: private, "
                   "bucket-owner-full-control...; GCS's predefined ACLs: projectPrivate, "
                   "publicRead...). Azure has none: refused.")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE",
              help="Object stores: user metadata every object written carries (repeatable; "
                   "S3 x-amz-meta-KEY, GCS and Azure metadata). A key pydistcp keeps the "
                   "source's mtime under is refused.")
@click.option("--tag", "--tags", "tags", multiple=True, metavar="KEY=VALUE",
              help="Object stores: a tag every object written carries (repeatable; S3 object "
                   "tags, Azure blob index tags). GCS has no object tags: refused.")
@click.option("--requester-pays", is_flag=True,
              help="Object stores: this run pays for the requests to requester-pays buckets, "
                   "sources and DST (S3 RequestPayer; GCS userProject: the storage option "
                   "'project' or the credentials' project). Azure has none: refused.")
@click.option("--state-dir", metavar="URL",
              help="Where commits, dataset state and recovery live [default: DST/.pydistcp].")
@click.option("--commit-policy", type=click.Choice(["full", "successful", "partial"]),
              default="successful", show_default=True,
              help="full: publish nothing if any file set fails; successful: every file set "
                   "whose files all succeeded; partial: every file that succeeded.")
@click.option("--visibility", type=click.Choice(["file-set", "file"]), default="file-set",
              show_default=True,
              help="Object stores: file-set makes a set's objects appear when it is "
                   "published; file makes each object appear, whole, as soon as it is "
                   "copied (one PUT for a file smaller than a part; a crash may leave some "
                   "objects of a set published). A set of one file is always per file.")
@click.option("--fork", multiple=True, metavar="DST2",
              help="Also write every file to DST2 (repeatable): each source file is read once "
                   "and teed to DST (branch fork_0) and each --fork (fork_1, ...), each with "
                   "its own skip decisions, state and publish. A job file's [[branches]] "
                   "give each branch every setting.")
@click.option("--fork-convert", multiple=True, metavar="N=CHAIN",
              help="Converters of the N-th --fork (from 1), e.g. 1=decrypt,gunzip,untar "
                   "(repeatable; --convert is DST's). A fork has none by default.")
@click.option("--fork-policy", type=click.Choice(["all", "independent"]), default="all",
              show_default=True,
              help="all: a file is published in no branch unless every branch staged and "
                   "checked it; independent: each branch publishes what it completed, and "
                   "the next run redoes only the branches that failed.")
@click.option("--fork-operator", metavar="NAME",
              help="Which branches receive each file: identity (all), rules (the route_* "
                   "keys of a job file's branches) or a 'pydistcp.forks' entry point "
                   "[default: rules if a branch has route_* keys, else identity].")
@click.option("--fork-queue", type=click.IntRange(min=1), default=4, show_default=True,
              metavar="CHUNKS",
              help="Chunks of 1 MiB each branch's queue holds: a slower branch slows the "
                   "one read instead of filling memory.")
@click.option("--fork-queue-timeout", default="10m", show_default=True, metavar="DURATION",
              help="Fail a branch that takes nothing from its full queue this long; the "
                   "other branches go on.")
@click.option("--max-replays", type=int, default=3, show_default=True,
              help="Set an unfinished commit of an earlier run aside after this many replays.")
@click.option("--incremental", is_flag=True,
              help="Skip what the state's manifest says was published (same size and "
                   "source mtime), without listing DST: a faster rerun for a DST only "
                   "pydistcp writes. A file changed or removed at DST by someone else is "
                   "not seen; a run without it finds it.")
@click.option("--continuous", is_flag=True,
              help="Keep running: a Spark Structured Streaming query that lists the sources "
                   "every --interval and publishes each batch of new files through the "
                   "commit log, exactly once across crashes and restarts. It first copies "
                   "whatever DST lacks; SIGTERM or Ctrl-C finishes the current batch and "
                   "exits 0 (a second Ctrl-C stops at once). On the warm engine the query "
                   "runs in the engine. See docs/guide/continuous.md.")
@click.option("--interval", metavar="DURATION", default="10s", show_default=True,
              help="--continuous: how often the sources are listed for new files.")
@click.option("--max-files-per-batch", type=click.IntRange(min=1), metavar="N",
              default=10_000, show_default=True,
              help="--continuous: at most N files in one batch, oldest first; the rest "
                   "wait for the next batches.")
@click.option("--until-idle", is_flag=True,
              help="--continuous: stop (exit 0, or 1 if a file failed) once a listing finds "
                   "nothing new and nothing waiting: a backfill that catches up and ends.")
@click.option("--settle", metavar="DURATION", default="1s", show_default=True,
              help="--continuous: leave a file modified less than DURATION ago for a later "
                   "batch, as its writer may not be done (0: copy at once).")
@click.option("--listing-after-seen", is_flag=True,
              help="--continuous: where the source's store lists from a key (S3), list only "
                   "the keys after those already seen, for sources whose new files' names "
                   "sort last (time-stamped names); the whole tree is still listed every "
                   "--full-listing-every, which finds any other new file.")
@click.option("--full-listing-every", metavar="DURATION", default="10m", show_default=True,
              help="--listing-after-seen: how often the whole source is listed anyway.")
@click.option("--recovery-retention", default="24h", show_default=True, metavar="DURATION",
              help="Keep verified but unpublished copies this long for the next run to reuse.")
@click.option("--catalog-table", metavar="DB.TABLE",
              help="Register each published partition in this Spark/Hive catalog table "
                   "(ALTER TABLE ... ADD IF NOT EXISTS PARTITION ... LOCATION), after its "
                   "data; the run's --conf gives the metastore. A failure leaves the data "
                   "published and the next run registers it.")
@click.option("--iceberg-catalog", metavar="URI",
              help="--finder iceberg: register each replicated metadata version in this SQL "
                   "catalog (sqlite:///path/catalog.db), one atomic swap after its files; "
                   "default: the destination's metadata files only.")
@click.option("--iceberg-table", metavar="NAMESPACE.TABLE",
              help="--iceberg-catalog: the table's name there [default: <parent folder>."
                   "<folder> of the destination table, a .db suffix dropped].")
@click.option("--catalog-partitions", metavar="PATTERN",
              help="Partition values from folders below DST: COL=TEMPLATE parts joined by "
                   "'/', {N} the N-th folder, e.g. 'dt={0}-{1}-{2}/hr={3}' for yyyy/MM/dd/HH "
                   "[default: the key=value folders].")
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines.")
@click.option("-v", "--verbose", count=True,
              help="-v: also print every decision (copy/skip/delete and why); -vv: and debug "
                   "messages. Same as --log-level info / debug.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print only errors: no progress, no summary (the exit status tells).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
              help="error, notice (default), info or debug; wins over -v/-q.")
@click.option("--log-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Append one JSON line per decision and outcome (copied, skipped, deleted, "
                   "failed, not-published, not-copied) with its reason.")
@click.option("--summary-json", type=click.Path(dir_okay=False), help="Write the run's summary as JSON to this file; '-': to stdout (the human summary then goes to stderr).")
@click.option("--events", metavar="TARGET",
              help="Where data-availability events go, as OpenLineage RunEvents (START, "
                   "COMPLETE or FAIL of the run; COMPLETE of each published file set): a file "
                   "of JSON lines, an http(s):// URL to POST them to (Authorization header from "
                   "PYDISTCP_EVENTS_AUTH), or '-' for stdout. Default: "
                   "STATE/events/events.jsonl. An event not delivered is re-sent by the next "
                   "run, with the same idempotency key.")
@click.option("--events-timeout", metavar="DURATION",
              help="How long an HTTP endpoint gets for one event, retries included; an "
                   "endpoint that fails is not tried again in the run  [default: 10s].")
@click.option("--metrics-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write Prometheus text-format metrics to FILE (for node_exporter's textfile "
                   "collector) on every progress tick while copying and at the end: the run's "
                   "totals, per dataset and per branch, watermarks, duration, success and "
                   "the last success time (kept across runs).")
@click.option("--log-dir", type=click.Path(file_okay=False),
              help="Where Spark's log goes [default: ~/.cache/pydistcp/logs].")
def copy_command(paths: tuple[str, ...], **flags: Any) -> None:
    if len(paths) < 2:
        raise click.UsageError("give at least one SRC and a DST")
    _compare_mode(flags)  # a usage error (exit 2) before anything starts
    _log_level(flags)
    _run(lambda: _copy(paths, flags))


def _copy(paths: tuple[str, ...], flags: dict[str, Any]) -> int:
    return _copy_and_report(list(paths[:-1]), paths[-1], _options(flags))


def _copy_and_report(sources: list[str], destination: str, options: dict[str, Any],
                     run: Any = None) -> int:
    """``distcp.copy`` (or ``run``, which takes the same arguments) with ``options`` (its
    keywords), then the plan, failures and summary on the terminal; the exit status.
    Shared by ``copy`` and ``run``."""
    from distcp import copy, move
    from distcp.callbacks import Callback, TextProgress

    level, dry_run = options.get("log_level") or "notice", bool(options.get("dry_run"))
    progress = options.get("progress", True) and not dry_run and level != "error"
    callback: Callback = TextProgress() if progress else Callback()
    _debug_logging(level)
    options = dict(options)
    if options.pop("move", False):
        run = move
    summary = (run or copy)(sources, destination, callback=callback, **options)
    # --summary-json - keeps stdout one JSON document (the API wrote it): the human
    # lines go to stderr
    to_stdout = options.get("summary_json") == "-"
    for row in summary.plan:  # a dry run's plan is its output; -v's decisions are status
        branch = f"[{row['branch']}] " if "branch" in row else ""
        _line(f"{branch}{row['action']:<6} {row['path']}  ({row['reason']})",
              err=to_stdout or not dry_run)
    if level in ("info", "debug"):  # -v: how it planned and copied, and why
        _echo_strategies(summary.strategy)
    _echo_failures(summary)
    if level != "error" or dry_run:
        click.echo(summary.render(), err=to_stdout)
    return 0 if summary.ok else 1


def _echo_failures(summary: Summary) -> None:
    """One line on stderr per failed file, failed registration, and registration of an
    earlier run still pending (which fails no run: ``Summary.catalog_pending``)."""
    for label, failures in (("FAILED", summary.failures),
                            ("CATALOG FAILED", summary.catalog_failures),
                            ("CATALOG PENDING", summary.catalog_pending)):
        for failure in failures:
            _line(f"pydistcp: {label} {failure.error}", err=True)


def _echo_strategies(strategy: dict[str, list[dict[str, str]]]) -> None:
    """How the run planned and copied, and why: one line each, on stderr."""
    for phase, rows in strategy.items():
        for row in rows:
            where = " ".join(f"{row[k]}" for k in ("branch", "dataset") if k in row)
            _line(f"pydistcp: {phase}{' ' + where if where else ''}: "
                  f"{row['strategy']} ({row['why']})", err=True)


def _line(text: str, err: bool = False) -> None:
    """One line of output: a name in it cannot end it or forge the next one
    (``distcp.names.printable``)."""
    click.echo(printable(text), err=err)


MOVE_HELP = """Move SRC... to DST: copy them as 'copy' does (same options), then
delete each source file once its file set is published and its copy is found at
DST with the copied size.

\b
Files skipped as identical at DST lose their source too; failed files, files
skipped by --ignore-existing, symbolic links and archives expanded by --convert
keep theirs. Source directories are left (--delete-empty-src-dirs: those left
empty go too, the SRC root excepted). --max-delete N refuses the run
(exit 2, nothing changed) when it would delete more than N source files (plus
--delete's extras). A move killed at any instant loses no file: the next run
(or 'pydistcp recover') finishes its commit.
"""


@main.command("move", help=MOVE_HELP + EXIT_HELP, no_args_is_help=True,
              short_help="Move SRC... to DST: copy them, then delete each source once published.")
@click.argument("paths", nargs=-1, required=True, metavar="SRC... DST")
@click.option("--delete-empty-src-dirs", is_flag=True,
              help="rclone: remove the source directories the move left empty.")
def move_command(paths: tuple[str, ...], **flags: Any) -> None:
    if len(paths) < 2:
        raise click.UsageError("give at least one SRC and a DST")
    _compare_mode(flags)
    _log_level(flags)
    _run(lambda: _copy_and_report(list(paths[:-1]), paths[-1],
                                  {**_options(flags), "move": True}))


def _log_level(flags: dict[str, Any]) -> str:
    """--log-level wins; else -q is error, -v info, -vv debug (rclone's levels)."""
    if flags["log_level"]:
        return str(flags["log_level"]).lower()
    if flags["quiet"] and flags["verbose"]:
        raise click.UsageError("-q and -v are mutually exclusive")
    if flags["quiet"]:
        return "error"
    return ("notice", "info")[min(flags["verbose"], 1)] if flags["verbose"] < 2 else "debug"


def _debug_logging(level: str) -> None:
    """-vv: pydistcp's own loggers (commit steps, events) on stderr."""
    if level == "debug":
        import logging

        class OneLine(logging.Formatter):
            """A name in a message cannot forge a log line (a traceback still can span
            lines: it is added after the message)."""

            def formatMessage(self, record: logging.LogRecord) -> str:
                return printable(super().formatMessage(record))

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(OneLine("pydistcp: %(name)s: %(message)s"))
        logging.basicConfig(handlers=[handler])
        for name in ("distcp", "pydistcp"):
            logging.getLogger(name).setLevel(logging.DEBUG)


def _compare_mode(flags: dict[str, Any]) -> str:
    """The one comparison flag given; two of them are a usage error (exit 2)."""
    given = [n for n in ("overwrite", "checksum", "size_only", "ignore_existing") if flags[n]]
    if len(given) > 1:
        a, b = ("--" + n.replace("_", "-") for n in given[:2])
        raise click.UsageError(f"{a} and {b} are mutually exclusive")
    return given[0].replace("_", "-") if given and given[0] != "overwrite" else "default"


#: Flags of ``copy`` whose value the API takes under another name or shape (every
#: other flag is the API parameter of the same name: tests/unit/test_api_contract.py).
_RENAMED = {"converters": "convert", "gpg_recipients": "gpg_recipient", "spark_conf": "conf"}
_NOT_PASSED = ("paths", "src_option", "dst_option", "src_options_file", "dst_options_file",
               "gpg_passphrase_file", "no_progress", "spark_conf", "verbose", "quiet")


def _options(flags: dict[str, Any]) -> dict[str, Any]:
    """Flags -> keyword parameters of ``distcp.copy``; secrets read from files, never argv.

    A flag is passed under its own name, so a flag added to ``copy`` reaches the API
    parameter of that name without a line here; sizes and durations are parsed here
    so that an error names the flag the user typed."""
    from distcp.options import DURATIONS, SIZES

    opts = {_RENAMED.get(k, k): v for k, v in flags.items() if k not in _NOT_PASSED}
    for name in SIZES:
        if opts.get(name):
            opts[name] = parse_flag(parse_size, opts[name], name)
    for name in DURATIONS:
        if opts.get(name):
            opts[name] = parse_flag(parse_duration, opts[name], name)
    opts["log_level"] = _log_level(flags)
    opts["conf"] = parse_key_values(flags["spark_conf"], "--conf")
    opts["src_options"] = _side_options(flags["src_option"], flags["src_options_file"], "src")
    opts["dst_options"] = _side_options(flags["dst_option"], flags["dst_options_file"], "dst")
    _write_tables(opts)
    if flags["gpg_passphrase_file"]:
        opts["gpg_passphrase"] = Path(flags["gpg_passphrase_file"]).read_text().rstrip("\r\n")
    opts["progress"] = not flags["no_progress"]
    return opts


RUN_HELP = """Run the job JOB.toml describes: its datasets, its branch and the copy's
settings (docs/guide/jobs-and-fork.md; the format: docs/job.schema.json).

\b
A relative path in the file is under the file's folder. Secrets are given
by reference only: { env = "NAME" } or { file = "path" }. The flags below
are copy's run settings: one given here (or by its PYDISTCP_* variable)
wins over the file's key of the same name.
"""


@main.command("run", help=RUN_HELP + EXIT_HELP, no_args_is_help=True)
@click.argument("job_file", metavar="JOB.toml")
@click.pass_context
def run_command(ctx: click.Context, /, job_file: str, **flags: Any) -> None:
    from click.core import ParameterSource

    given = {name: value for name, value in flags.items() if ctx.get_parameter_source(name)
             in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)}
    _run(lambda: _run_job(job_file, given))


def job_keys() -> tuple[KeySpec, ...]:
    """The job file's keys: ``copy``'s options, as distcp.jobs.keys reads them."""
    from distcp.jobs.keys import keys_from_options

    return keys_from_options(copy_command.params)


def _run_job(job_file: str, given: dict[str, Any]) -> int:
    from distcp.jobs import load_job

    job = load_job(job_file, job_keys()).with_overrides(_overrides(given))
    if len(job.branches) > 1:  # a fork: one read, every branch written
        from functools import partial

        from distcp.run.forkjob import fork_job

        return _copy_and_report(*job.copy_arguments(), run=partial(fork_job, job))
    return _copy_and_report(*job.copy_arguments())


def _overrides(given: dict[str, Any]) -> dict[str, Any]:
    """``run``'s flags the user gave, as job keys: sizes and durations parsed (an error
    names the flag), --conf as a mapping, -v/-q as log_level."""
    from distcp.options import DURATIONS, SIZES

    out = {_RENAMED.get(k, k): v for k, v in given.items()
           if k not in ("verbose", "quiet", "spark_conf")}
    if {"log_level", "verbose", "quiet"} & set(given):
        out["log_level"] = _log_level({"log_level": None, "verbose": 0, "quiet": False,
                                       **given})
    if "spark_conf" in given:
        out["conf"] = parse_key_values(given["spark_conf"], "--conf")
    for names, parse in ((SIZES, parse_size), (DURATIONS, parse_duration)):
        for name in set(names) & set(out):
            out[name] = parse_flag(parse, out[name], name)
    _write_tables(out)
    return out


def _write_tables(opts: dict[str, Any]) -> None:
    """``--metadata``/``--tag``'s ``KEY=VALUE`` strings as the mappings the API and the
    job file take (an unset one left out); a bad pair is a usage error naming the flag."""
    from distcp.storage.writes import pairs

    for name, flag in (("metadata", "--metadata"), ("tags", "--tag")):
        if name in opts:
            value = opts.pop(name)
            if value:
                opts[name] = dict(pairs(value, flag))


def _run(action: Any) -> None:
    """Run a command; map our errors onto one line and an exit status."""
    try:
        code = action()
    except (ConfigurationError, PlanningError) as exc:
        _fail(str(exc), 2)
    except (EnvironmentProblem, DestinationBusyError) as exc:
        _fail(str(exc), 3)
    except DistcpError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        _ending_on_interrupt()
        _fail("interrupted; nothing unverified was published, rerun to finish", 130)
    except Exception as exc:  # noqa: BLE001 - storage refusals are ours, the rest a bug
        problem = storage_problem(exc)
        if problem is not None:  # S3 credentials or endpoint (the API raises them too)
            _fail(str(problem), 3)
        if isinstance(exc, OSError):  # the storage failed the driver (gone, full, silent)
            _fail(f"{exc}; nothing unverified was published, rerun to finish once it is "
                  "fixed", 3)
        _fail(f"internal error: {type(exc).__name__}: {exc} (traceback in {_dump_trace()})", 1)
    sys.exit(code)


def _ending_on_interrupt() -> None:
    """From the first Ctrl-C on the run only ends: a second one (a user pressing it
    again, or one that reaches us while Python finalizes, when its handler is already
    gone) must not kill the process by the signal instead of exit 130 after our line.

    An interrupt that landed inside a string ``exec`` (dataclasses and namedtuple build
    their methods so, e.g. while pyspark is imported) leaves CPython's "unhandled
    KeyboardInterrupt" flag set although we caught it, and under ``python -m`` the
    interpreter then kills itself with SIGINT after exiting 130. Every string eval
    clears that flag as it starts, so one empty eval, once no further interrupt can
    come, clears it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exec("pass", {})  # noqa: S102 - a constant: clears the flag, see above
    _quiet_py4j()


def _quiet_py4j() -> None:
    """After Ctrl-C, py4j's callback-server threads report the broken gateway on stderr
    while the JVM shuts down (its logger is already quiet, see spark.session): keep the
    terminal to our one line by sending fd 2 nowhere from here on."""
    sys.stderr.flush()
    message_fd = os.dup(2)
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 2)
    os.close(sink)
    sys.stderr = os.fdopen(message_fd, "w", closefd=False)


def _fail(message: str, code: int) -> None:
    _line(f"pydistcp: error: {message}", err=True)
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

        from distcp.commit.status import existing_state_root, render_status, status_report
        from distcp.storage.filesystems import display

        options = _state_options(dst_option, dst_options_file)
        with driver_errors(state_dir or destination):  # as distcp.status
            root, has_state = existing_state_root(destination, state_dir, options)
            if not has_state and not as_json:
                _line(f"no pydistcp state at {display(root)}: nothing was copied here "
                      "by pydistcp")
                return 0
            report = status_report(root, options)
        click.echo(json.dumps(report, indent=2) if as_json else render_status(report))
        return 0

    _run(action)


@main.command("recover")
@click.argument("destination", required=False, metavar="[DST]")
@click.option("--state-dir", metavar="URL", help="State directory [default: DST/.pydistcp].")
@click.option("--max-replays", type=int, default=3, show_default=True)
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option.")
@_DST_OPTIONS_FILE
@click.option("--src-option", multiple=True, metavar="KEY=VALUE",
              help="fsspec storage option of the sources: a pending move deletes the sources "
                   "it published with them.")
@click.option("--src-options-file", type=click.Path(dir_okay=False, exists=True), metavar="FILE",
              help="The sources' storage options, one key=value a line; --src-option wins.")
@click.option("--events", metavar="TARGET",
              help="Where the replayed commits' events go, as copy's --events (default: "
                   "STATE/events/events.jsonl); events earlier runs could not deliver go first.")
@click.option("--events-timeout", metavar="DURATION", default="10s", show_default=True,
              help="How long an HTTP endpoint gets for one event, retries included.")
def recover_command(destination: str | None, state_dir: str | None, max_replays: int,
                    dst_option: tuple[str, ...], dst_options_file: str | None,
                    src_option: tuple[str, ...], src_options_file: str | None,
                    events: str | None, events_timeout: str) -> None:
    """Finish unfinished commits of earlier runs without copying anything new."""
    def action() -> int:
        from distcp import recover

        summary = recover(destination, state_dir=state_dir, max_replays=max_replays,
                          dst_options=_state_options(dst_option, dst_options_file),
                          src_options=_side_options(src_option, src_options_file, "src"),
                          events=events, events_timeout=events_timeout)
        _echo_failures(summary)
        click.echo(f"replayed {summary.sequences_replayed} commit(s), set aside "
                   f"{summary.sequences_set_aside}")
        for note in summary.notes:
            _line(note)
        return 0 if summary.ok else 1

    _run(action)


@main.command("cleanup")
@click.argument("destination", metavar="DST")
@click.option("--older-than", default="1h", show_default=True, metavar="DURATION",
              help="Free only what was left longer ago than this (0s: everything dead runs "
                   "left).")
@click.option("--state-dir", metavar="URL", help="State directory [default: DST/.pydistcp].")
@click.option("--dry-run", is_flag=True, help="Say what would be freed; remove nothing.")
@click.option("--forget-registrations", is_flag=True,
              help="Also drop the catalog registrations (--catalog-table) that earlier runs "
                   "could not make and every run retries: their data is published; the "
                   "partitions are then yours to register (ALTER TABLE ... ADD PARTITION).")
@click.option("--dst-option", multiple=True, metavar="KEY=VALUE", help="fsspec storage option.")
@_DST_OPTIONS_FILE
def cleanup_command(destination: str, older_than: str, state_dir: str | None, dry_run: bool,
                    forget_registrations: bool, dst_option: tuple[str, ...],
                    dst_options_file: str | None) -> None:
    """Free what runs that are no longer running left under DST.

    Removes, when older than --older-than: staging and progress folders of dead
    runs, split files no run resumed, verified copies kept for recovery, and
    (object stores) orphaned multipart uploads. Staged files a pending commit
    will publish are kept. Refused while a run holds DST.
    """
    def action() -> int:
        from distcp import cleanup

        report = cleanup(destination, older_than=older_than, state_dir=state_dir,
                         dst_options=_state_options(dst_option, dst_options_file),
                         dry_run=dry_run, forget_registrations=forget_registrations)
        click.echo(report.render())
        return 0

    _run(action)


@main.group("engine")
def engine_group() -> None:
    """The warm engine: a local Spark server that later runs reuse, so that they pay no
    JVM start of their own (figures: benchmarks/RESULTS.md). It stops itself after an
    idle time; runs use it with --engine warm, or --engine auto (the default) while it
    runs."""


@engine_group.command("start")
@click.option("--master", default="local[*]", show_default=True, envvar="PYDISTCP_MASTER",
              help="The local master the engine serves (local[N] or local[*]).")
@click.option("--idle-timeout", metavar="DURATION", envvar="PYDISTCP_ENGINE_IDLE",
              help="Stop after this long unused [default: 30m].")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="Spark setting (repeatable); runs with the same --conf use this engine.")
def engine_start(master: str, idle_timeout: str | None, spark_conf: tuple[str, ...]) -> None:
    """Start the warm engine now (runs with --engine auto then use it) with its Python
    workers ready and the resident client, a Python process with pydistcp imported that
    copy runs fork from (PYDISTCP_RESIDENT=0: runs start their own), and build the
    class-data-sharing archive if it is missing (PYDISTCP_CDS=0: no archive)."""
    def action() -> int:
        from distcp.spark import cds
        from distcp.spark.engine import idle_timeout as parse_idle
        from distcp.spark.jvm import check_java, is_local_master
        from distcp.spark.session import engine_settings, start_engine

        if not is_local_master(master):
            raise ConfigurationError(f"--master {master}: the warm engine serves local masters "
                                     "(local[N], local[*]) only")
        conf = parse_key_values(spark_conf, "--conf")
        idle = parse_idle(idle_timeout)
        eng, inputs = engine_settings(master, conf)
        if cds.enabled():  # pay the archive's one-time cost now, not in a user's run
            click.echo("pydistcp: building the class-data-sharing archive if missing ...",
                       err=True)
            archive = cds.build_archive(check_java())
            shown = archive or "not built (another build runs, or see its log)"
            click.echo(f"class-data-sharing archive: {shown}")
        click.echo(f"pydistcp: starting the warm engine for {master} ...", err=True)
        started = start_engine(eng, master, conf, inputs, idle)
        _warm_up(master, conf, eng.log_dir / "warm-up.log")
        info = eng.info()
        verb = "started" if started else "already running"
        click.echo(f"warm engine {verb}: pid {info.pid}, {info.url}, stops after "
                   f"{(info.idle_timeout_s or idle) / 60:.0f} min idle; logs in {eng.log_dir}")
        _start_resident(info.idle_timeout_s or idle, eng.log_dir / "resident.log")
        return 0

    _run(action)


def _warm_up(master: str, conf: dict[str, str], log_file: Path) -> None:
    """Start the engine's Python workers ahead of the first run; a failure only means
    that run starts them (said in one line, never an error of ``engine start``)."""
    from distcp.spark.session import warm_workers

    click.echo("pydistcp: starting the engine's Python workers ...", err=True)
    try:
        warm_workers(master, conf, str(log_file))
    except Exception as exc:  # noqa: BLE001 - Spark raises many types; the engine still runs
        reason = one_line(exc, 200)
        click.echo(f"pydistcp: warning: the Python workers did not start ({reason}); the "
                   "next run starts them", err=True)


def _start_resident(idle_s: float, log_file: Path) -> None:
    """Start the resident client (``distcp.resident``), which later ``copy`` commands hand
    their runs to; one that does not start only means they run themselves (a warning)."""
    from distcp import resident

    pid = resident.start(idle_s, str(log_file))
    if pid is None:
        click.echo(f"pydistcp: warning: the resident client did not start (see {log_file}); "
                   "runs start their own Python", err=True)
    else:
        click.echo(f"resident client: pid {pid}, copy runs fork from it")


@engine_group.command("stop")
@click.option("--all", "stop_all", is_flag=True,
              help="Stop every engine (other versions and settings too).")
@click.option("--master", default="local[*]", show_default=True, envvar="PYDISTCP_MASTER")
def engine_stop(stop_all: bool, master: str) -> None:
    """Stop the warm engine and the resident client (runs then start their own JVM and
    Python, or a new engine)."""
    def action() -> int:
        from distcp import resident
        from distcp.spark.engine import all_engines
        from distcp.spark.session import engine_settings

        engines = all_engines() if stop_all else [engine_settings(master, {})[0]]
        stopped = [e for e in engines
                   if e.refusal() is None and e.server() is not None and e.stop()]
        click.echo(f"stopped {len(stopped)} warm engine(s)" if stopped
                   else "no warm engine was running")
        if resident.stop():
            click.echo("stopped the resident client")
        return 0

    _run(action)


@engine_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the engines as JSON.")
@click.option("--master", default="local[*]", show_default=True, envvar="PYDISTCP_MASTER")
def engine_status(as_json: bool, master: str) -> None:
    """Show the warm engines: running or not, pid, address, idle time, logs."""
    def action() -> int:
        import json
        import time
        from dataclasses import asdict

        from distcp import resident
        from distcp.spark.engine import all_engines
        from distcp.spark.session import engine_settings

        current = engine_settings(master, {})[0].dir.name
        infos = [e.info(current=e.dir.name == current) for e in all_engines()]
        if as_json:
            click.echo(json.dumps([asdict(i) for i in infos], indent=2))
            return 0
        if not any(i.running for i in infos):
            click.echo("no warm engine is running")
        for i in infos:
            if not i.running:
                continue
            idle = time.time() - i.last_used if i.last_used else 0.0
            left = max(0.0, (i.idle_timeout_s or 0) - idle)
            which = "this version and settings" if i.current else "other version or settings"
            click.echo(f"running: pid {i.pid}, {i.url}, master {i.master} ({which}); idle "
                       f"{idle / 60:.0f} min, stops in {left / 60:.0f} min; key {i.key}; "
                       f"logs in {i.directory}/logs")
        pid = resident.pid_of()
        if pid is not None and not as_json:
            click.echo(f"resident client: pid {pid}, copy runs fork from it")
        return 0

    _run(action)


def _add_run_flags() -> None:
    """``run`` takes ``copy``'s run-time flags: the same click options, so the same help,
    types and defaults (distcp.jobs.keys.run_flags chooses them)."""
    from distcp.jobs.keys import run_flags

    run_command.params.extend(run_flags(copy_command.params))


_add_run_flags()


CHECK_HELP = """Compare SRC... with their copy at DST, like rclone check: list both sides,
compare sizes, and compare the digests of files of equal size, read on Spark.

\b
Each path is reported with rclone's symbols (--combined):
  = equal                 - only in the source (missing on DST)
  * differing             + only in DST (missing on the source)
  ! could not be read
SRC and DST pair up as in copy (and --dataset-glob, --include... select the
same files). Where DST's state directory records the digest of a file whose
source still has the size and mtime it had when copied, that digest stands
in for the source and only DST's copy is read. Changes nothing on either side.

\b
Exit status: 0 identical, 1 any difference or unreadable file, 2 usage,
3 the environment refuses (as copy's).
"""

#: ``copy``'s options that ``check`` takes too: the same files selected, the same
#: Spark and storage settings.
_CHECK_SHARED = ("finder", "dataset_glob", "include", "exclude", "min_size", "max_size",
                 "min_age", "max_age", "files_from", "links", "master", "engine",
                 "parallelism", "tasks", "spark_conf", "buffer_size", "src_option",
                 "dst_option", "src_options_file", "dst_options_file", "state_dir",
                 "no_progress", "quiet", "summary_json", "log_dir", "iceberg_catalog",
                 "iceberg_table", "copying")
#: Where copy's help speaks of copying: check's own words.
_CHECK_HELP_TEXTS = {
    "finder": "How datasets are found, as copy finds them: single, glob, delta (SRC is "
              "a Delta table, compared at the version DST holds: that version's files and "
              "log) or iceberg (SRC is an Iceberg table, compared at the snapshot DST holds: "
              "its data and delete files compared, its metadata, manifest list and "
              "manifests, rewritten for DST, only required at DST). A table behind its "
              "source is said in a line, not a difference. stream is refused.",
    "iceberg_catalog": "--finder iceberg: the SQL catalog the copy registered DST's table "
                       "in (sqlite:///path/catalog.db): its table's metadata is the "
                       "version checked [default: DST's newest metadata file].",
    "max_age": "rclone: check only files modified at most DURATION ago (e.g. 24h).",
    "files_from": "rclone: check only the files FILE lists, one path a line relative to SRC "
                  "('-': stdin; blank and #/; lines skipped); SRC is not walked, and only "
                  "the listed files are compared on both sides.",
    "links": "Symbolic links in a local source tree: skip, follow (compare the target's "
             "content) or copy (compare the link's target text), as copy was run.",
    "tasks": "Exactly N tasks read the files (fewer only when there are fewer files).",
    "copying": "Who reads the files whose digests are compared: spark (a Spark job), "
               "driver (this process: forked processes, one per core, when DST is a "
               "local tree and SRC a local tree or S3; threads when another object store "
               "is in the check) or auto (driver on a local master: forked processes "
               "whatever the number of files, which they read at Spark's local tasks' "
               "pace; threads 10,000 reads, 1,000 when the warm engine runs; else "
               "spark).",
    "buffer_size": "Read buffer per task.",
    "summary_json": "Write the report as JSON to this file (counts and every difference); "
                    "'-': to stdout (the human lines then go to stderr).",
}
#: Report files: rclone check's flags.
_CHECK_REPORTS = {
    "combined": "Write every path with its symbol (= - + * !), one a line.",
    "missing_on_dst": "Write the paths only in the source (missing on DST), one a line.",
    "missing_on_src": "Write the paths only in DST (missing on the source), one a line.",
    "differ": "Write the paths that differ, one a line.",
    "match": "Write the paths that are equal, one a line.",
    "error": "Write the paths that could not be read, one a line.",
}


@main.command("check", help=CHECK_HELP, no_args_is_help=True,
              short_help="Compare SRC... with their copy at DST, like rclone check.")
@click.argument("paths", nargs=-1, required=True, metavar="SRC... DST")
@click.option("--one-way", is_flag=True,
              help="Only check that every source file is at DST and equal; files only in "
                   "DST are not reported.")
@click.option("--size-only", is_flag=True, help="Compare sizes only; read nothing.")
@click.option("--stored-digests/--no-stored-digests", default=True, show_default=True,
              help="Let digests DST's state recorded stand in for unchanged sources; "
                   "--no-stored-digests reads both sides of every file.")
def check_command(paths: tuple[str, ...], **flags: Any) -> None:
    if len(paths) < 2:
        raise click.UsageError("give at least one SRC and a DST")
    _run(lambda: _check(paths, flags))


def _check(paths: tuple[str, ...], flags: dict[str, Any]) -> int:
    from distcp import check
    from distcp.callbacks import Callback, TextProgress
    from distcp.options import DURATIONS, SIZES

    opts = {_RENAMED.get(k, k): v for k, v in flags.items()
            if k not in _NOT_PASSED and k != "no_progress"}
    for names, parse in ((SIZES, parse_size), (DURATIONS, parse_duration)):
        for name in set(names) & set(opts):
            if opts[name]:
                opts[name] = parse_flag(parse, opts[name], name)
    opts["conf"] = parse_key_values(flags["spark_conf"], "--conf")
    opts["src_options"] = _side_options(flags["src_option"], flags["src_options_file"], "src")
    opts["dst_options"] = _side_options(flags["dst_option"], flags["dst_options_file"], "dst")
    _write_tables(opts)
    quiet = flags["quiet"]
    callback = Callback() if quiet or flags["no_progress"] else TextProgress()
    report = check(list(paths[:-1]), paths[-1], callback=callback, **opts)
    to_stdout = flags["summary_json"] == "-"
    if not quiet:
        for outcome in report.outcomes:
            if outcome.verdict != "=":
                _line(f"{outcome.verdict} {outcome.path}  ({outcome.reason})",
                      err=to_stdout)
        click.echo(report.render(), err=to_stdout)
    return 0 if report.ok else 1


def _add_check_flags() -> None:
    """``check`` takes ``copy``'s selection, Spark and storage flags (the same click
    options, their help saying "check" where copy's says "copy"), and rclone check's
    report files."""
    import copy as copying

    by_name = {p.name: p for p in copy_command.params}
    for name in _CHECK_SHARED:
        option = copying.copy(by_name[name])
        assert isinstance(option, click.Option)  # every shared parameter is an option
        option.help = _CHECK_HELP_TEXTS.get(name, option.help)
        if option.help:
            option.help = (option.help.replace("copy only", "check only")
                           .replace("Copy only", "Check only"))
        check_command.params.append(option)
    for name, text in _CHECK_REPORTS.items():
        check_command.params.append(click.Option(
            ["--" + name.replace("_", "-")], metavar="FILE",
            type=click.Path(dir_okay=False), help=text))


_add_check_flags()


def _add_move_flags() -> None:
    """``move`` takes every option of ``copy``: the same click options."""
    move_command.params.extend(p for p in copy_command.params if isinstance(p, click.Option))


_add_move_flags()
