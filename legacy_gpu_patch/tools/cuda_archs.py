"""Which GPU code a built CUDA binary holds: every SASS (cubin) architecture and every PTX, from cuobjdump.

    python -m legacy_gpu_patch.tools.cuda_archs torch/lib/libtorch_cuda.so \\
        --expect sm_80,sm_86,sm_89,sm_90 --expect-ptx sm_90

Why: TORCH_CUDA_ARCH_LIST reaches nvcc through several layers (setup.py, CMake's FindCUDA, caffe2's
select_compute_arch), and a lost entry still builds a library that imports; it only fails at the first kernel on that
GPU ("no kernel image is available for execution on the device"). So a wheel that claims sm_80..sm_90+PTX is checked
for what it really embeds. `--expect` takes the recipe spelling too: sm_90+ptx expects SASS sm_90 and PTX
compute_90, compute_90 PTX only; 8.0;9.0+PTX (TORCH_CUDA_ARCH_LIST) works as well.

Prints one line per file (stdout; `--json` for machines): the SASS architectures with how many cubins each, then
the PTX. Exit 0 when every expected architecture is there, 9 (ExitCode.BUILD) naming each one missing, 14
(ExitCode.TOOL) when cuobjdump or a file is missing. cuobjdump is looked for in --cuobjdump, $CUOBJDUMP, PATH,
$CUDA_HOME/bin, /usr/local/cuda/bin and the nvidia wheels of this interpreter (`pip install
nvidia-cuda-cuobjdump` puts it in site-packages/nvidia/cu13/bin). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

EXIT_BUILD = 9  # legacy_gpu_patch.errors.ExitCode.BUILD (not imported: this runs under the build's interpreter)
EXIT_TOOL = 14
TIMEOUT_S = 900  # a multi-architecture libtorch_cuda.so is over 1 GB

# "ELF file    1: libtorch_cuda.1.sm_80.cubin", "PTX file    1: libtorch_cuda.1.sm_90.ptx" (PTX of compute_90)
_LISTED_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.(cubin|ptx)\s*$")
_NVCC_RE = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)(\+ptx)?$")
_DOTTED_RE = re.compile(r"^(\d{1,2})\.(\d)([af]?)(\+ptx)?$")


class ToolMissing(Exception):
    """cuobjdump or an input file is not there (exit 14)."""


def parse_expected(items: list[str], *, ptx_only: bool = False) -> tuple[set[str], set[str]]:
    """(SASS sm_XX, PTX compute_XX) expected from "sm_80,sm_90+ptx", "compute_90", "8.0;9.0+PTX"."""
    sass: set[str] = set()
    ptx: set[str] = set()
    for text in (t for item in items for t in re.split(r"[;,\s]+", item) if t):
        low = text.lower()
        m = _NVCC_RE.match(low)
        if m:
            kind, num, suffix, plus_ptx = m.groups()
        elif (d := _DOTTED_RE.match(low)) is not None:
            kind, num, suffix, plus_ptx = "sm", d.group(1) + d.group(2), d.group(3), d.group(4)
        else:
            raise ValueError(f"{text!r} is not a GPU architecture (like sm_86, sm_90+ptx, compute_90 or 9.0+PTX)")
        name = f"{num}{suffix}"
        if ptx_only or kind == "compute":
            ptx.add(f"compute_{name}")
            continue
        sass.add(f"sm_{name}")
        if plus_ptx:
            ptx.add(f"compute_{name}")
    return sass, ptx


def find_cuobjdump(given: str | None = None) -> str:
    """The cuobjdump to run, or ToolMissing naming every place looked at."""
    candidates: list[str] = [c for c in (given, os.environ.get("CUOBJDUMP")) if c]
    if given or os.environ.get("CUOBJDUMP"):
        for c in candidates:
            if os.access(c, os.X_OK) and os.path.isfile(c):
                return c
        raise ToolMissing(f"cuobjdump not found at {' or '.join(candidates)}")
    on_path = shutil.which("cuobjdump")
    if on_path:
        return on_path
    places = [Path(os.environ[v]) / "bin" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    places.append(Path("/usr/local/cuda/bin"))
    for entry in sys.path:  # the nvidia-cuda-cuobjdump wheel: site-packages/nvidia/cu13/bin (CUDA 12: cuda_cuobjdump)
        places += [Path(entry or ".") / "nvidia" / sub / "bin" for sub in ("cu13", "cuda_cuobjdump")]
    for folder in places:
        exe = folder / "cuobjdump"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    raise ToolMissing("cuobjdump not found (looked on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin and this "
                      "interpreter's nvidia wheels); install the toolkit's cuobjdump or `pip install "
                      "nvidia-cuda-cuobjdump`, or pass --cuobjdump PATH")


def _list(cuobjdump: str, what: str, path: Path) -> list[str]:
    """The architecture of every cubin (`what`="elf") or PTX ("ptx") embedded in `path`, one entry per file."""
    try:
        proc = subprocess.run([cuobjdump, f"--list-{what}", str(path)], capture_output=True, text=True,
                              errors="replace", timeout=TIMEOUT_S)
    except OSError as exc:
        raise ToolMissing(f"cannot run {cuobjdump}: {exc}") from None
    if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
        raise RuntimeError(f"cuobjdump --list-{what} {path}: rc {proc.returncode}: "
                           f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'no message'}")
    archs = []
    for line in proc.stdout.splitlines():
        m = _LISTED_RE.match(line.strip())
        if m:
            archs.append(m.group(2) if m.group(1) == "ELF" else m.group(2).replace("sm_", "compute_", 1))
    return archs


def _arch_key(arch: str) -> tuple[int, str]:
    return int(re.sub(r"\D", "", arch)), arch  # sm_100 after sm_90


def inspect(path: Path, cuobjdump: str) -> dict[str, dict[str, int]]:
    """{"sass": {"sm_80": cubins, ...}, "ptx": {"compute_90": files, ...}} of one binary."""
    if not path.is_file():
        raise ToolMissing(f"{path}: no such file")
    sass, ptx = Counter(_list(cuobjdump, "elf", path)), Counter(_list(cuobjdump, "ptx", path))
    return {"sass": {a: sass[a] for a in sorted(sass, key=_arch_key)},
            "ptx": {a: ptx[a] for a in sorted(ptx, key=_arch_key)}}


def _describe(path: Path, found: dict[str, dict[str, int]]) -> str:
    if not found["sass"] and not found["ptx"]:
        return f"{path}: no device code"
    sass = ", ".join(f"{a} ({n})" for a, n in found["sass"].items()) or "none"
    ptx = ", ".join(f"{a} ({n})" for a, n in found["ptx"].items()) or "none"
    return f"{path}: SASS {sass}; PTX {ptx}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m legacy_gpu_patch.tools.cuda_archs",
                                     description="Report the SASS and PTX architectures a CUDA binary embeds.")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="a shared library, object or executable")
    parser.add_argument("--expect", action="append", default=[], metavar="ARCHS",
                        help="SASS every file must hold: sm_80,sm_86 (sm_90+ptx: PTX too; 8.0;9.0+PTX works)")
    parser.add_argument("--expect-ptx", action="append", default=[], metavar="ARCHS",
                        help="PTX every file must hold: sm_90 or compute_90 (both mean compute_90's PTX)")
    parser.add_argument("--cuobjdump", default=None, help="the cuobjdump to run (default: found, see --help)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    try:
        sass, ptx = parse_expected(args.expect)
        ptx |= parse_expected(args.expect_ptx, ptx_only=True)[1]
    except ValueError as exc:
        parser.error(str(exc))
    try:
        cuobjdump = find_cuobjdump(args.cuobjdump)
        found = {str(f): inspect(f, cuobjdump) for f in args.files}
    except ToolMissing as exc:
        print(f"cuda_archs: {exc}", file=sys.stderr)
        return EXIT_TOOL
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"cuda_archs: {exc}", file=sys.stderr)
        return EXIT_BUILD
    missing = {f: [f"SASS {a}" for a in sorted(sass - set(r["sass"]), key=_arch_key)]
               + [f"PTX {a}" for a in sorted(ptx - set(r["ptx"]), key=_arch_key)] for f, r in found.items()}
    if args.json:
        print(json.dumps({"cuobjdump": cuobjdump, "expected": {"sass": sorted(sass, key=_arch_key),
                                                               "ptx": sorted(ptx, key=_arch_key)},
                          "files": found, "missing": {f: m for f, m in missing.items() if m},
                          "ok": not any(missing.values())}, indent=2))
    else:
        for f, r in found.items():
            print(_describe(Path(f), r))
    for f, m in missing.items():
        if m:
            print(f"cuda_archs: {f}: missing {', '.join(m)}", file=sys.stderr)
    if any(missing.values()):
        return EXIT_BUILD
    if sass or ptx:
        expected = sorted(sass, key=_arch_key) + sorted(ptx, key=_arch_key)
        print(f"cuda_archs: every expected architecture is present ({', '.join(expected)})",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
