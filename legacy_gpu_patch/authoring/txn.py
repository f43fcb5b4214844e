"""Writing the user's recipe files so that a killed refresh leaves either all of its writes or none of them.

A refresh changes up to four files outside the work tree (a patch file, patchset.yaml, the recipe, the edit
marker). Before the first write, the journal (.git/lgpatch/journal.json, the engine's) records every path with a
backup of its old content; each file is then replaced atomically (rename). A process killed in between is repaired
by the next lgpatch command (WorkTree.repair calls `repair` below through the journal's `repair_hook`): every file is
put back as it was. The work tree itself is not touched while the files are written, so the user's edits are still
in it; they are also in a rescue ref from before the first write (see snapshot.py).

`checkpoint(name)` is a fault-injection point for the kill tests: with LGPATCH_FAULT_PAUSE=name the process says so
on stderr and sleeps, so a test can kill it at exactly that moment.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from legacy_gpu_patch.ledger.worktree import WorkTree

FAULT_ENV = "LGPATCH_FAULT_PAUSE"
REPAIR_HOOK = "legacy_gpu_patch.authoring.txn:repair"


def checkpoint(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        sys.stderr.write(f"lgpatch: fault point {name} reached (pid {os.getpid()})\n")
        sys.stderr.flush()
        time.sleep(300)


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.lgpatch-tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _backup_dir(wt: WorkTree) -> Path:
    return WorkTree.meta_dir(wt.root) / "refresh-backup"


@contextmanager
def file_transaction(wt: WorkTree, writes: dict[Path, bytes | None], **info: Any) -> Iterator[None]:
    """Replace (bytes) or delete (None) each file; on any exception or kill, all are restored."""
    backups = _backup_dir(wt)
    shutil.rmtree(backups, ignore_errors=True)
    backups.mkdir(parents=True)
    files = []
    for i, path in enumerate(writes):
        saved = backups / str(i)
        if path.exists():
            shutil.copy2(path, saved)
        files.append({"path": str(path), "backup": str(saved) if path.exists() else None})
    with wt.journal("refresh", repair_hook=REPAIR_HOOK, files=files, **info):
        try:
            for n, (path, data) in enumerate(writes.items()):
                if data is None:
                    path.unlink(missing_ok=True)
                else:
                    write_atomic(path, data)
                if n == 0:
                    checkpoint("refresh:files")
            yield
        except BaseException:
            restore(files)
            wt.journal_path.unlink(missing_ok=True)
            shutil.rmtree(backups, ignore_errors=True)
            raise
    shutil.rmtree(backups, ignore_errors=True)


def restore(files: list[dict[str, Any]]) -> None:
    for entry in files:
        path = Path(entry["path"])
        for stray in path.parent.glob(f".{path.name}.lgpatch-tmp-*"):  # a write killed before its rename
            stray.unlink(missing_ok=True)
        backup = entry.get("backup")
        if backup and Path(backup).exists():
            write_atomic(path, Path(backup).read_bytes())
        elif not backup:
            path.unlink(missing_ok=True)


def repair(wt: WorkTree, entry: dict[str, Any]) -> list[str]:
    """Called by WorkTree.repair for a refresh that was killed while writing the recipe files."""
    restore(list(entry.get("files") or []))
    shutil.rmtree(_backup_dir(wt), ignore_errors=True)
    done = ["put back the recipe and patchset files of an interrupted refresh"]
    rescue = entry.get("rescue")
    if rescue:
        done.append(f"your edits are still in the work tree (and in {rescue}); run `lgpatch refresh` again")
    return done


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
