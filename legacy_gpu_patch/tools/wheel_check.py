"""Check a built wheel: every extension module it must hold is there, and the run paths are right.

Why: a build that skips an extension module can still exit 0 (Chainer 1.x's setup silently installs Chainer
without CuPy when a header or library is not found). And a run path that names a folder of the build machine (the
building Python's lib folder, the CUDA toolkit's lib64, a driver stub in the build tree) works there and fails, or
worse picks the stub, everywhere else. So only $ORIGIN-relative entries may be in a wheel's run path (auditwheel's
rule): any other entry fails the check, naming it, unless --allow-absolute-runpath says the wheel is for this
machine only.

    python -m legacy_gpu_patch.tools.wheel_check --dist dist --expect cupy.core.core cupy.cuda.cublas ...
        [--require-runpath '$ORIGIN/../../nvidia/cu13/lib'] [--forbid-runpath-under DIR ...]
        [--allow-absolute-runpath] [--expect-requires nvidia-cublas nvidia-cudnn-cu13 ...]

--expect-requires: a wheel whose libraries load others from pip wheels through $ORIGIN run paths must name those
wheels in its metadata (Requires-Dist), or pip installs it into an environment where it cannot import.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from legacy_gpu_patch.tools.elf import DynamicInfo, ElfError, read_dynamic

EXIT_BUILD = 9  # legacy_gpu_patch.errors.ExitCode.BUILD (not imported: this runs under the build's interpreter)
EXIT_TOOL = 14


@dataclass(frozen=True)
class Extension:
    module: str  # cupy.core.core
    member: str  # cupy/core/core.cpython-311-x86_64-linux-gnu.so
    dynamic: DynamicInfo


def newest_wheel(dist: Path) -> Path:
    wheels = sorted(dist.glob("*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise FileNotFoundError(f"no wheel in {dist}")
    return wheels[-1]


def module_name(member: str) -> str | None:
    """cupy/core/core.cpython-311-x86_64-linux-gnu.so -> cupy.core.core; None for non-extensions."""
    if not member.endswith(".so"):
        return None
    path, name = os.path.split(member)
    stem = name.split(".", 1)[0]
    return ".".join([*path.split("/"), stem]) if path else stem


def extensions(wheel: Path) -> list[Extension]:
    found = []
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if member.split("/", 1)[0].endswith(".data"):
                continue  # <name>.data/: headers, scripts and data, not importable modules
            module = module_name(member)
            if module is None:
                continue
            found.append(Extension(module, member, read_dynamic(zf.read(member))))
    return sorted(found, key=lambda e: e.module)


def requirements(wheel: Path) -> list[str] | None:
    """The Requires-Dist lines of the wheel's METADATA (its *.dist-info/METADATA), as written; None without one."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if not names:
            return None
        text = zf.read(names[0]).decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def requirement_name(spec: str) -> str:
    """nvidia-cublas<14,>=13.0 ; extra == "x" -> nvidia-cublas (PEP 503 normalised)."""
    name = re.split(r"[\s;<>=!~\[(@]", spec.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements(declared: list[str] | None, expected: list[str]) -> list[str]:
    have = {requirement_name(spec) for spec in declared or ()}
    return [name for name in expected if requirement_name(name) not in have]


def relocatable(entry: str) -> bool:
    """A run path entry that holds wherever the wheel is installed: $ORIGIN (or ${ORIGIN}) and what follows."""
    return entry == "$ORIGIN" or entry.startswith(("$ORIGIN/", "${ORIGIN}"))


def problems(exts: list[Extension], expect: list[str], require_runpath: list[str],
             forbid_under: list[Path], allow_absolute: bool = False) -> list[str]:
    out = []
    have = {e.module for e in exts}
    missing = [m for m in expect if m not in have]
    if missing:
        out.append(f"missing extension modules: {', '.join(missing)} (the build skipped them: see its log)")
    forbidden = [p.resolve() for p in forbid_under]
    for ext in exts:
        path = ext.dynamic.search_path
        for entry in require_runpath:
            if entry not in path:
                out.append(f"{ext.member}: run path {':'.join(path) or '(none)'} lacks {entry}")
        for entry in path:
            if relocatable(entry):
                continue
            if not allow_absolute:
                out.append(f"{ext.member}: run path entry {entry} is not $ORIGIN-relative: it names a folder of the "
                           "build machine (only $ORIGIN/... entries belong in a wheel)")
            if not os.path.isabs(entry):
                continue
            resolved = Path(entry).resolve()
            for bad in forbidden:
                if resolved == bad or bad in resolved.parents:
                    out.append(f"{ext.member}: run path entry {entry} points into {bad} (build-only folder)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m legacy_gpu_patch.tools.wheel_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--wheel", help="the wheel to check")
    where.add_argument("--dist", help="check the newest wheel in this folder")
    parser.add_argument("--expect", nargs="+", default=[], metavar="MODULE",
                        help="extension modules the wheel must contain (dotted names)")
    parser.add_argument("--require-runpath", action="append", default=[], metavar="ENTRY",
                        help="an entry every extension's run path must contain (repeatable)")
    parser.add_argument("--forbid-runpath-under", action="append", default=[], metavar="DIR",
                        help="no run path entry may point into this folder (repeatable), e.g. the build tree")
    parser.add_argument("--allow-absolute-runpath", action="store_true",
                        help="accept run path entries that are not $ORIGIN-relative (a wheel for this machine only)")
    parser.add_argument("--expect-requires", nargs="+", default=[], metavar="DIST",
                        help="distributions the wheel's metadata must require (Requires-Dist), e.g. nvidia-cublas")
    args = parser.parse_args(argv)
    try:
        wheel = Path(args.wheel) if args.wheel else newest_wheel(Path(args.dist))
        exts = extensions(wheel)
        declared = requirements(wheel)
    except (OSError, zipfile.BadZipFile, ElfError) as exc:
        print(f"wheel_check: {exc}", file=sys.stderr)
        return EXIT_TOOL
    found = problems(exts, args.expect, args.require_runpath, [Path(p) for p in args.forbid_runpath_under],
                     args.allow_absolute_runpath)
    absent = missing_requirements(declared, args.expect_requires)
    if absent and declared is None:
        found.append(f"no *.dist-info/METADATA in {wheel.name}: not a wheel pip can install")
    elif absent:
        found.append(f"Requires-Dist lacks {', '.join(absent)} (pip would install a wheel that cannot load them)")
    needed = sorted({n for e in exts for n in e.dynamic.needed})
    print(f"wheel_check: {wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB, {len(exts)} extension modules")
    print(f"  libraries needed: {', '.join(needed) or 'none'}")
    paths = sorted({":".join(e.dynamic.search_path) for e in exts})
    print(f"  run paths: {' | '.join(paths) or 'none'}")
    if declared is not None:
        print(f"  requires: {', '.join(declared) or 'nothing'}")
    if found:
        for line in found:
            print(f"wheel_check: {line}", file=sys.stderr)
        return EXIT_BUILD
    print(f"wheel_check: ok ({len(args.expect)} expected modules present)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
