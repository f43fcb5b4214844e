"""The CUDA libraries that come as pip wheels (nvidia-cublas, nvidia-cudnn-cu13, ...), made usable for a build.

Why: since CUDA 12 the math libraries are also published as wheels that unpack under ``site-packages/nvidia/``:
one folder per library for CUDA 12 (``nvidia/cublas/{include,lib}``), one merged folder for CUDA 13
(``nvidia/cu13/{include,lib}``), and ``nvidia/cudnn/{include,lib}`` for cuDNN. A build must find their headers and
link against them, but the wheels ship only versioned sonames (``libcublas.so.13``) while ``-lcublas`` looks for
``libcublas.so``. ``link-dir`` makes a folder of unversioned links for the linker (LIBRARY_PATH); the linker still
records the versioned soname, so nothing of this folder is needed at run time.

    python -m legacy_gpu_patch.tools.nvidia_wheels link-dir --site-packages SP --out DIR [--require cublas ...]
    python -m legacy_gpu_patch.tools.nvidia_wheels show --site-packages SP
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

EXIT_TOOL = 14  # legacy_gpu_patch.errors.ExitCode.TOOL (not imported: this runs under the build's interpreter)
_VERSIONED_RE = re.compile(r"^lib(?P<name>[A-Za-z0-9_+-]+)\.so\.(?P<version>\d+(?:\.\d+)*)$")
# Which wheel provides a library, for messages that say what to install.
_WHEEL_OF = {
    "cublas": "nvidia-cublas", "cublasLt": "nvidia-cublas", "curand": "nvidia-curand",
    "cusolver": "nvidia-cusolver", "cusparse": "nvidia-cusparse", "nvJitLink": "nvidia-nvjitlink",
    "cudnn": "nvidia-cudnn-cu13", "cudart": "nvidia-cuda-runtime", "nccl": "nvidia-nccl-cu13",
}


@dataclass(frozen=True)
class WheelLayout:
    """Where the wheel headers and libraries are, in search order."""

    include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]

    def libraries(self) -> dict[str, Path]:
        """Library name (``cublas``) -> its versioned file, the highest version when several are present."""
        found: dict[str, tuple[tuple[int, ...], Path]] = {}
        for folder in self.library_dirs:
            for entry in sorted(folder.iterdir()):
                m = _VERSIONED_RE.match(entry.name)
                if not m or not entry.is_file():
                    continue
                version = tuple(int(x) for x in m.group("version").split("."))
                name = m.group("name")
                if name not in found or version > found[name][0]:
                    found[name] = (version, entry)
        return {name: path for name, (_, path) in sorted(found.items())}


def find_layout(site_packages: list[Path]) -> WheelLayout:
    """The include and lib folders of every nvidia wheel under the given site-packages folders.

    Merged CUDA 13 folders (``cu13``) come first, then cuDNN, then CUDA 12's per-library folders.
    """
    includes: list[Path] = []
    libs: list[Path] = []
    for sp in site_packages:
        root = sp / "nvidia"
        if not root.is_dir():
            continue
        subdirs = sorted(p for p in root.iterdir() if p.is_dir())
        ordered = sorted(subdirs, key=lambda p: (not re.fullmatch(r"cu\d+", p.name), p.name != "cudnn", p.name))
        for sub in ordered:
            if (sub / "include").is_dir():
                includes.append(sub / "include")
            if (sub / "lib").is_dir():
                libs.append(sub / "lib")
    return WheelLayout(tuple(includes), tuple(libs))


def make_link_dir(layout: WheelLayout, out: Path) -> dict[str, Path]:
    """Fill `out` with ``lib<name>.so`` links to the versioned wheel libraries; returns name -> target.

    Links that lgpatch made earlier and that are no longer wanted are removed; other files are left alone.
    """
    out.mkdir(parents=True, exist_ok=True)
    wanted = layout.libraries()
    for entry in out.iterdir():
        if entry.is_symlink() and entry.name.endswith(".so"):
            entry.unlink()
    for name, target in wanted.items():
        (out / f"lib{name}.so").symlink_to(target.resolve())
    return wanted


def _site_packages(values: list[str]) -> list[Path]:
    paths = [Path(v) for v in values]
    missing = [str(p) for p in paths if not p.is_dir()]
    if missing:
        raise SystemExit(f"nvidia_wheels: not a folder: {', '.join(missing)}")
    return paths


def _check_required(found: dict[str, Path], required: list[str], where: list[Path]) -> str | None:
    missing = [name for name in required if name not in found]
    if not missing:
        return None
    wheels = sorted({_WHEEL_OF.get(name, f"the wheel providing lib{name}") for name in missing})
    return (f"nvidia_wheels: no {', '.join('lib' + n + '.so.*' for n in missing)} under "
            f"{', '.join(str(p / 'nvidia') for p in where)}; install {', '.join(wheels)} into that environment")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m legacy_gpu_patch.tools.nvidia_wheels", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    link = sub.add_parser("link-dir", help="make a folder of unversioned lib*.so links for the linker")
    link.add_argument("--out", required=True)
    show = sub.add_parser("show", help="print the include and library folders (as CPATH / LIBRARY_PATH)")
    for p in (link, show):
        p.add_argument("--site-packages", action="append", required=True,
                       help="a site-packages folder holding nvidia/ (repeatable)")
        p.add_argument("--require", nargs="*", default=[], metavar="NAME",
                       help="library names that must be present, e.g. cublas curand cusolver cudnn")
    args = parser.parse_args(argv)
    where = _site_packages(args.site_packages)
    layout = find_layout(where)
    found = layout.libraries()
    problem = _check_required(found, args.require, where)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_TOOL
    if args.command == "show":
        print("CPATH=" + os.pathsep.join(str(p) for p in layout.include_dirs))
        print("LIBRARY_PATH=" + os.pathsep.join(str(p) for p in layout.library_dirs))
        for name, path in found.items():
            print(f"  lib{name}: {path}")
        return 0
    linked = make_link_dir(layout, Path(args.out))
    print(f"nvidia_wheels: {len(linked)} links in {args.out}: " + ", ".join(f"lib{n}.so" for n in linked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
