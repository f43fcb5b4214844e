"""lgpatch export DIR: the applied steps as a git format-patch series plus a quilt `series` file.

DIR is new, empty, or an earlier export: lgpatch records what it wrote in DIR/.lgpatch-export.json (name and
sha256 of each file) and replaces only those files, and only while they are unchanged. Any other file in DIR (a
stale `*.patch` of someone else, an edited patch) makes it refuse before anything is written: a series that mixes
old and new patches would apply the wrong tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import workdir_option
from legacy_gpu_patch.errors import StateError
from legacy_gpu_patch.ledger.engine import export
from legacy_gpu_patch.ledger.worktree import WorkTree

MANIFEST = ".lgpatch-export.json"
MANIFEST_FORMAT = 1


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest(dest: Path) -> dict[str, list[str]]:
    """name → the sha256 values lgpatch wrote under that name (two while a replacement was under way)."""
    try:
        data = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
        files = data["files"]
        return {str(name): [str(h) for h in hashes] for name, hashes in files.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise StateError(f"{dest / MANIFEST}: unreadable export manifest ({exc}); nothing was written",
                         hint="remove the folder's files yourself, or export into a new folder") from None


def own_old_series(dest: Path) -> list[str]:
    """The files of DEST an earlier `lgpatch export` wrote and nobody changed since; refuses on anything else."""
    if not dest.exists():
        return []
    written = _read_manifest(dest)
    present = sorted(p.name for p in dest.iterdir() if p.name != MANIFEST)
    foreign = [n for n in present if n not in written or not (dest / n).is_file()]
    edited = [n for n in present if n not in foreign and _sha256(dest / n) not in written[n]]
    if foreign or edited:
        what = (f"{len(foreign)} file(s) lgpatch did not write ({', '.join(foreign[:5])}"
                + (" …" if len(foreign) > 5 else "") + ")") if foreign else ""
        what += ("; " if foreign and edited else "") + (f"edited since the last export: {', '.join(edited[:5])}"
                                                         if edited else "")
        raise StateError(f"{dest} is not empty: {what}; nothing was written",
                         hint="export into a new or empty folder, or move those files away first")
    return present


def _write_manifest(dest: Path, files: dict[str, list[str]]) -> None:
    tmp = dest / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"format": MANIFEST_FORMAT, "files": files}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, dest / MANIFEST)  # a killed export leaves the old or the new manifest, never half of one


def replace_series(dest: Path, fresh: Path, old: list[str]) -> list[str]:
    """Move the series in `fresh` into `dest` in place of the old one; returns the old names not written again."""
    new = sorted(p.name for p in fresh.iterdir())
    hashes = {n: [_sha256(fresh / n)] for n in new}
    # While old and new files are both there, the manifest names both: a kill here is repaired by the next export.
    transition = {n: sorted(set(_read_manifest(dest).get(n, [])) | set(hashes.get(n, []))) for n in {*old, *new}}
    _write_manifest(dest, transition)
    for name in old:
        (dest / name).unlink()
    for name in new:
        os.replace(fresh / name, dest / name)
    _write_manifest(dest, hashes)
    return sorted(set(old) - set(new))


@click.command("export")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@workdir_option()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary on stdout.")
@click.pass_context
def command(ctx: click.Context, dest: Path, workdir: Path, as_json: bool) -> None:
    """Write the applied steps to DEST (git am / quilt compatible).

    DEST must be new, empty or an earlier export of lgpatch (whose files are then replaced).
    """
    wt = WorkTree.open(workdir, shared=True)
    try:
        old = own_old_series(dest)
        dest.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=f".{dest.name}.lgpatch-export-", dir=dest.parent))
        try:
            names = export(wt, fresh)
            removed = replace_series(dest, fresh, old)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    finally:
        wt.release_lock()
    for name in names:
        console.detail(f"wrote {dest / name}")
    console.info(f"wrote {len(names)} patch(es) and a series file to {dest}"
                 + (f" (replaced an earlier export; {len(removed)} old patch(es) removed)" if old else ""))
    if as_json:
        console.emit_json({"dest": str(dest), "patches": names, "series": str(dest / "series"),
                           "manifest": str(dest / MANIFEST), "replaced": old, "removed": removed})
