"""Converters: peak memory of one task on a 1 GiB archive, and speed against the CLI tools.

    python benchmarks/bench_converters.py [--size-mib 1024]

1. Builds (once, under benchmarks/data/converters/, git-ignored) a tar of about
   ``--size-mib`` MiB made of this machine's /usr/share/doc (copied several
   times, so it is real text and already-compressed files), its .tar.gz and a
   .tar.gz.gpg encrypted with the real gpg to a throwaway key.
2. Runs one task (``distcp.copying.task.run_work_unit``, no Spark) decrypting +
   gunzipping + expanding the .tar.gz.gpg in a child process and reports its
   peak RSS (``ru_maxrss``) and gpg's.
3. Times each converter against the matching command-line tool on the same
   file: ``decrypt`` vs ``gpg --decrypt``, ``gunzip`` vs ``gzip -d``, ``untar``
   vs ``tar -x``; the ratio is our throughput / the tool's. Our side includes
   what a task always does: xxh3 hashing and the verifying re-read of every
   staged file (``--verify digest``, the default).

Writes benchmarks/results/converters.md (and .json); the .md is the run's table, not kept
in git: results worth keeping go to benchmarks/RESULTS.md, dated.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

DATA = HERE / "data" / "converters"
RESULTS = HERE / "results"
PASSPHRASE = "bench passphrase"


def sh(*cmd: str, stdin: bytes | None = None, stdout: object = subprocess.DEVNULL) -> None:
    subprocess.run(cmd, input=stdin, stdout=stdout, stderr=subprocess.PIPE, check=True)  # type: ignore[call-overload]


def keyring() -> str:
    home = Path("/tmp/pdbench-gpg")
    if (home / "pubring.kbx").exists():
        return str(home)
    home.mkdir(mode=0o700, exist_ok=True)
    spec = (f"Key-Type: EDDSA\nKey-Curve: ed25519\nSubkey-Type: ECDH\nSubkey-Curve: cv25519\n"
            f"Name-Email: bench@example.org\nExpire-Date: 0\nPassphrase: {PASSPHRASE}\n"
            "%commit\n")
    sh("gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--gen-key",
       stdin=spec.encode())
    return str(home)


def build(size_mib: int, home: str) -> dict[str, Path]:
    """The archive in its three forms; reused when already there."""
    DATA.mkdir(parents=True, exist_ok=True)
    paths = {"tar": DATA / "docs.tar", "tgz": DATA / "docs.tar.gz",
             "gpg": DATA / "docs.tar.gz.gpg"}
    if not paths["tar"].exists():
        _write_tar(paths["tar"], size_mib << 20)
    if not paths["tgz"].exists():
        with open(paths["tgz"], "wb") as out:
            sh("gzip", "-6", "-c", str(paths["tar"]), stdout=out)
    if not paths["gpg"].exists():
        sh("gpg", "--homedir", home, "--batch", "--trust-model", "always", "-r",
           "bench@example.org", "-o", str(paths["gpg"]), "--encrypt", str(paths["tgz"]))
    return paths


def _write_tar(path: Path, target: int) -> None:
    doc = Path("/usr/share/doc")
    files = [p for p in sorted(doc.rglob("*")) if p.is_file() and not p.is_symlink()]
    total, copy = 0, 0
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        while total < target:
            for p in files:
                tar.add(p, arcname=f"copy{copy}/{p.relative_to(doc)}", recursive=False)
                total += p.stat().st_size + 512
                if total >= target:
                    break
            copy += 1


def task_child(src: str, converters: str, home: str, out: str) -> None:
    """Run in a child process: one task over one file; print timing and peak RSS."""
    import resource

    from distcp.converters.base import ConverterOptions, build_chain, rename_through
    from distcp.copying.task import TaskSpec, run_work_unit
    from distcp.model import CopyableFile, FileStatus, WorkUnit

    names = tuple(converters.split(","))
    options = ConverterOptions(gpg_home=home, gpg_passphrase=PASSPHRASE,
                               max_expansion_ratio=1000.0)
    st = os.stat(src)
    dest = rename_through(build_chain(names, options), f"file://{out}/{Path(src).name}")
    f = CopyableFile(FileStatus(f"file://{src}", st.st_size, st.st_mtime), dest, "bench",
                     "s", converters=names)
    spec = TaskSpec("bench", f"file://{out}/staging", f"file://{out}/progress",
                    converter_options=options)
    t = time.monotonic()
    results = run_work_unit(WorkUnit(0, (f,)), spec, "a0")
    seconds = time.monotonic() - t
    bad = [r.message for r in results if not r.ok]
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"seconds": seconds, "outputs": len(results), "errors": bad[:3],
                      "bytes": sum(r.bytes_written for r in results),
                      "rss_mib": me / 1024, "children_rss_mib": kids / 1024}))


def ours(src: Path, converters: str, home: str) -> dict:
    out = DATA / "out-ours"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    proc = subprocess.run([sys.executable, __file__, "--child", str(src), converters, home,
                           str(out)], capture_output=True, text=True, check=True)
    shutil.rmtree(out, ignore_errors=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not result["errors"], result["errors"]
    return result


def tool(cmd: list[str], out_file: Path | None = None) -> float:
    out = DATA / "out-tool"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    t = time.monotonic()
    if out_file is not None:
        with open(out / out_file, "wb") as f:
            subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, check=True, cwd=out)
    else:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True,
                       cwd=out)
    seconds = time.monotonic() - t
    shutil.rmtree(out, ignore_errors=True)
    return seconds


def compare(paths: dict[str, Path], home: str) -> list[dict]:
    gpg = ["gpg", "--homedir", home, "--batch", "--pinentry-mode", "loopback",
           "--passphrase", PASSPHRASE, "--decrypt", str(paths["gpg"])]
    cases = [
        ("decrypt", paths["gpg"], "gpg --decrypt", gpg, Path("docs.tar.gz")),
        ("gunzip", paths["tgz"], "gzip -d", ["gzip", "-d", "-c", str(paths["tgz"])],
         Path("docs.tar")),
        ("untar", paths["tar"], "tar -x", ["tar", "-x", "-f", str(paths["tar"])], None),
    ]
    rows = []
    for name, src, tool_name, cmd, out_file in cases:
        mine = ours(src, name, home)
        theirs = tool(cmd, out_file)
        size = src.stat().st_size
        rows.append({"converter": name, "input_mib": round(size / 2**20),
                     "ours_s": round(mine["seconds"], 2), "tool": tool_name,
                     "tool_s": round(theirs, 2),
                     "ours_mib_s": round(size / 2**20 / mine["seconds"], 1),
                     "tool_mib_s": round(size / 2**20 / theirs, 1),
                     "ratio": round(theirs / mine["seconds"], 2),
                     "rss_mib": round(mine["rss_mib"], 1)})
        print(rows[-1], flush=True)
    return rows


def report(memory: dict, rows: list[dict], size_mib: int, paths: dict[str, Path]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "converters.json").write_text(json.dumps(
        {"memory": memory, "throughput": rows}, indent=2))
    gib = paths["gpg"].stat().st_size / 2**30
    lines = [
        "# Converters: memory and throughput",
        "",
        f"Machine: {os.cpu_count()} cores; data: a {size_mib} MiB tar of /usr/share/doc "
        f"(copied until large enough), gzip -6 and gpg-encrypted: {gib:.2f} GiB .tar.gz.gpg. "
        "Generated by `python benchmarks/bench_converters.py`. Our timings include xxh3 "
        "hashing and the verifying re-read of every staged file (the default `--verify "
        "digest`), which the tools do not do; page cache warm for both sides.",
        "",
        "## One task: decrypt + gunzip + untar of the whole archive",
        "",
        "| measure | value |",
        "|---|---|",
        f"| peak RSS of the task process | {memory['rss_mib']:.0f} MiB (limit 256 MiB) |",
        f"| peak RSS of its largest child (gpg) | {memory['children_rss_mib']:.0f} MiB |",
        f"| entries expanded | {memory['outputs']} files and directories, "
        f"{memory['bytes'] / 2**20:.0f} MiB |",
        f"| time | {memory['seconds']:.1f} s ({paths['gpg'].stat().st_size / 2**20 / memory['seconds']:.0f} MiB/s of ciphertext) |",
        "",
        "## Each converter against the command-line tool, same input",
        "",
        "| converter | input | ours | tool | ratio (ours/tool throughput) | our peak RSS |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['converter']} | {r['input_mib']} MiB | {r['ours_s']} s "
                     f"({r['ours_mib_s']} MiB/s) | {r['tool']}: {r['tool_s']} s "
                     f"({r['tool_mib_s']} MiB/s) | {r['ratio']} | {r['rss_mib']} MiB |")
    (RESULTS / "converters.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        task_child(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    args = parser.parse_args()
    home = keyring()
    paths = build(args.size_mib, home)
    memory = ours(paths["gpg"], "decrypt,gunzip,untar", home)
    print("memory:", memory, flush=True)
    rows = compare(paths, home)
    report(memory, rows, args.size_mib, paths)
    subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], check=False)


if __name__ == "__main__":
    main()
