"""Replace a small document (a state file, a record, a log entry) all at once.

Readers see the old or the new document, never half of one. Its own module
because both sides write such documents: the driver's state and commit log
(``distcp.state``, ``distcp.commit_log``) and executors' range records
(``distcp.ranges``), and executors must not import the state module.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from distcp import fs as fsutil
from distcp import s3


def write_atomic(url: str, data: bytes, options: dict[str, Any], durable: bool = True) -> None:
    """Replace ``url`` with ``data`` so that readers see the old or the new, never half.

    ``durable=False`` skips the local fsync, for records that only vouch for data that
    is not synced either (a split range's record: the whole file is re-checked at
    publish). On ext4 each fsync commits the journal, which stalls the writers of the
    big staging file next to it.
    """
    fs, path = fsutil.filesystem(url, options)
    if fsutil.is_local(fs):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    elif s3.is_s3(fs):  # one PUT: atomic; bounded, as a silent server would hang the run
        s3.sync_bounded(fs, f"writing {fsutil.display(url)}", fs._pipe_file, path, data)
    else:  # a write there can be cut half-way: write beside, then rename over
        tmp = f"{path}.tmp-{secrets.token_hex(4)}"
        try:
            fs.pipe_file(tmp, data)
            fs.mv(tmp, path)
        except BaseException:
            try:
                fs.rm_file(tmp)
            except Exception:  # noqa: BLE001, S110 - gone already, or the server is: keep the cause
                pass
            raise
