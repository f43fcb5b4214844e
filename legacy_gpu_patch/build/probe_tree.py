"""One tree of a compile probe (patched or pristine): its toolchain, its generated headers and one compile.

Generated headers come from `setup` steps run in a scratch folder per tree (`${gen}`): CMake's configure_file is
emulated (`configure:`), generator scripts are run (`run:`), because configuring a whole legacy tree needs its
submodules and minutes, and the probe needs only a few headers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.verify_schema import ConfigureSetup, Probe, SetupStep, probe_setup_key
from legacy_gpu_patch.errors import ConfigError, ToolError

CUDA_INCLUDE_ENV = "LGPATCH_CUDA_INCLUDE"  # extra include folders (os.pathsep-separated) for toolkit libraries
COMPILE_TIMEOUT_S = 900
MAX_OUTPUT_CHARS = 1 << 20  # compiler output kept per compile (errors of 40 TUs fit easily)
SETUP_TIMEOUT_S = 600
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".hh", ".inl")
_ERROR_RE = re.compile(r"(\berror\b|\bfatal\b)", re.IGNORECASE)

# ----------------------------------------------------------------------------------------- configure_file


_FALSE_WORDS = {"", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"}


def _cmake_true(value: Any) -> bool:
    """CMake's truth for #cmakedefine: unset, empty, 0, OFF, NO, FALSE, N, IGNORE, NOTFOUND, *-NOTFOUND are false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().upper()
    return text not in _FALSE_WORDS and not text.endswith("-NOTFOUND")


def _cmake_text(value: Any) -> str:
    # YAML booleans become 1/0: in a C header, `@X@` is nearly always used as a number.
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


_CMAKEDEFINE_RE = re.compile(r"^(\s*)#(\s*)cmakedefine(01)?[ \t]+([A-Za-z_][A-Za-z0-9_]*)(.*)$")
_AT_VAR_RE = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)@")
_BRACE_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def configure_file(text: str, defines: dict[str, Any]) -> str:
    """CMake's configure_file() on a template's text (the subset headers use): #cmakedefine, #cmakedefine01,
    @VAR@ and ${VAR}. Names that `defines` lacks are undefined, as in CMake: empty text, #undef, 0."""

    def subst(s: str) -> str:
        s = _AT_VAR_RE.sub(lambda m: _cmake_text(defines.get(m.group(1))), s)
        return _BRACE_VAR_RE.sub(lambda m: _cmake_text(defines.get(m.group(1))), s)

    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body):]
        m = _CMAKEDEFINE_RE.match(body)
        if m:
            indent, gap, is01, name, rest = m.groups()
            value = defines.get(name)
            if is01:
                body = f"{indent}#{gap}define {name} {1 if _cmake_true(value) else 0}"
            elif _cmake_true(value):
                body = f"{indent}#{gap}define {name}{subst(rest)}"
            else:
                body = f"{indent}/* #undef {name} */"
        else:
            body = subst(body)
        out.append(body + end)
    return "".join(out)


# ----------------------------------------------------------------------------------------- toolchain


@dataclass(frozen=True)
class Toolchain:
    nvcc: str | None
    cxx: str | None
    cuda_home: Path | None
    extra_includes: tuple[Path, ...]  # cuSPARSE/cuBLAS/... headers outside the toolkit (pip wheels, --cuda-include)
    python: str

    def include_dirs(self) -> list[Path]:
        dirs = []
        if self.cuda_home:
            dirs += [self.cuda_home / "include"]
            dirs += sorted((self.cuda_home / "targets").glob("*/include"))
        return [d for d in dirs + list(self.extra_includes) if d.is_dir()]

    def find_header(self, name: str) -> Path | None:
        for d in self.include_dirs():
            if (d / name).is_file():
                return d / name
        return None


def _cuda_home_of(nvcc: str | None) -> Path | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and (Path(os.environ[var]) / "include" / "cuda_runtime.h").is_file():
            return Path(os.environ[var])
    if nvcc:
        # /usr/local/bin/nvcc may be a wrapper script: resolve links, then fall back to /usr/local/cuda.
        home = Path(os.path.realpath(nvcc)).parent.parent
        if (home / "include" / "cuda_runtime.h").is_file():
            return home
    default = Path("/usr/local/cuda")
    return default if (default / "include" / "cuda_runtime.h").is_file() else None


def wheel_include_dirs(site_dirs: Iterable[Path]) -> list[Path]:
    """include/ folders of the nvidia-* wheels (cusparse, cublas, curand, cudnn; CUDA 13 wheels use nvidia/cu13)."""
    found: list[Path] = []
    for sp in site_dirs:
        for d in sorted(Path(sp).glob("nvidia/*/include")):
            if d.is_dir() and d not in found:
                found.append(d)
    return found


def find_toolchain(extra_includes: Sequence[str | Path] = (), python: str | None = None) -> Toolchain:
    import sys

    from legacy_gpu_patch.cuda import nvcc_probe

    nvcc = os.environ.get("LGPATCH_NVCC") or nvcc_probe.which_nvcc()
    cuda_home = _cuda_home_of(nvcc)
    if nvcc is None and cuda_home and (cuda_home / "bin" / "nvcc").is_file():
        nvcc = str(cuda_home / "bin" / "nvcc")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    extra = [Path(p) for p in extra_includes]
    extra += [Path(p) for p in os.environ.get(CUDA_INCLUDE_ENV, "").split(os.pathsep) if p]
    extra += wheel_include_dirs(nvcc_probe.site_package_dirs())
    return Toolchain(nvcc, cxx, cuda_home, tuple(dict.fromkeys(extra)), python or sys.executable)


# ----------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Compiled:
    ok: bool
    returncode: int
    argv: tuple[str, ...]
    output: str  # the whole compiler output (bounded), searched for `expect_error`
    first_error: str | None

    def as_dict(self) -> dict[str, Any]:
        head = "\n".join(self.output.splitlines()[:40])
        return {"ok": self.ok, "returncode": self.returncode, "argv": list(self.argv),
                "first_error": self.first_error, "output_head": head}


# ----------------------------------------------------------------------------------------- one tree


@dataclass(frozen=True)
class SetupFailure:
    text: str
    tool_missing: bool = False  # the tool is absent (skip with the reason), not broken (a wrong outcome)


class ProbeTree:
    """A tree (patched or pristine) plus its scratch folder of generated headers; setup steps run once each."""

    def __init__(self, root: Path, gen: Path, toolchain: Toolchain, values: dict[str, Any]) -> None:
        self.root = root
        self.gen = gen
        self.toolchain = toolchain
        self.values = {**values, "gen": str(gen), "python": toolchain.python, "workdir": str(root),
                       "cuda_home": str(toolchain.cuda_home or "")}
        self._done: dict[str, SetupFailure | None] = {}  # setup key -> None (ok) or why it failed

    def render(self, text: str) -> str:
        try:
            return conditions.render(text, self.values)
        except KeyError as exc:
            raise ConfigError(f"verify: ${{{exc.args[0]}}} is not a parameter or probe variable "
                              f"(known: {', '.join(sorted(self.values))})") from None

    def setup(self, steps: Sequence[SetupStep]) -> SetupFailure | None:
        """Run the setup steps not yet run in this tree; the first failure's text, or None."""
        for step in steps:
            key = probe_setup_key(step)
            if key not in self._done:
                self._done[key] = self._run_setup(step)
            if self._done[key]:
                return self._done[key]
        return None

    def _run_setup(self, step: SetupStep) -> SetupFailure | None:
        if isinstance(step, ConfigureSetup):
            src = self.root / step.template
            if not src.is_file():
                return SetupFailure(f"configure: template {step.template} does not exist")
            out = self.gen / step.out
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(configure_file(src.read_text(encoding="utf-8", errors="surrogateescape"),
                                          dict(step.define)),
                           encoding="utf-8", errors="surrogateescape")
            return None
        argv = [self.render(a) for a in step.argv]
        self.gen.mkdir(parents=True, exist_ok=True)
        try:
            proc = subprocess.run(argv, cwd=self.root, capture_output=True, text=True, errors="replace",
                                  timeout=SETUP_TIMEOUT_S)
        except FileNotFoundError:
            return SetupFailure(f"setup: {argv[0]} not found", tool_missing=True)
        except subprocess.TimeoutExpired:
            return SetupFailure(f"setup: {' '.join(argv)} ran past {SETUP_TIMEOUT_S}s")
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            return SetupFailure(f"setup: {' '.join(argv[:3])} ... exited {proc.returncode}: " + " | ".join(tail))
        return None

    def include_args(self, probe: Probe) -> list[str]:
        args = []
        for inc in probe.include:
            path = self.render(inc)
            args.append(f"-I{path if os.path.isabs(path) else self.root / path}")
        return args

    def compile(self, probe: Probe, arch: str | None) -> Compiled:
        tc = self.toolchain
        rel = probe.file
        snippet = probe.snippet
        lang = probe.lang
        self.gen.mkdir(parents=True, exist_ok=True)
        tag = f"{probe.name}-{arch or 'host'}"
        if snippet or rel.endswith(HEADER_SUFFIXES):
            # A header is compiled through a translation unit that includes it (and then uses it).
            source = self.gen / f"probe-{tag}{'.cu' if lang == 'cuda' else '.cpp'}"
            source.write_text(f'#include "{self.root / rel}"\n{snippet or ""}\n', encoding="utf-8")
            src_arg = str(source)
        else:
            src_arg = rel
        flags = [self.render(f) for f in probe.flags]
        includes = self.include_args(probe) + [f"-I{d}" for d in tc.extra_includes if d.is_dir()]
        if lang == "cuda":
            if not tc.nvcc:
                raise ToolError("nvcc not found", hint="put the CUDA toolkit's bin/ on PATH or set CUDA_HOME")
            number = conditions.arch_number(arch or "sm_90")
            argv = [tc.nvcc, "-c", src_arg, "-o", str(self.gen / f"probe-{tag}.o"),
                    f"-gencode=arch=compute_{number},code=sm_{number}", *flags, *includes]
        else:
            if not tc.cxx:
                raise ToolError("no C++ compiler found", hint="install g++ or set CXX")
            cuda_inc = [f"-I{d}" for d in tc.include_dirs() if d not in tc.extra_includes]
            argv = [tc.cxx, "-fsyntax-only", "-x", "c++", src_arg, *flags, *includes, *cuda_inc]
        try:
            proc = subprocess.run(argv, cwd=self.root, capture_output=True, text=True, errors="replace",
                                  timeout=COMPILE_TIMEOUT_S)
            output, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired:
            output, rc = f"compiler ran past {COMPILE_TIMEOUT_S}s", 124
        first = next((ln.strip() for ln in output.splitlines() if _ERROR_RE.search(ln)), None)
        # Keep the whole output for matching: with a newer host compiler the expected error can come after
        # unrelated ones (GCC 13's missing <cstdint> errors come first in the pristine 1.5.0 tree).
        kept = output[:MAX_OUTPUT_CHARS] if rc else ""
        return Compiled(rc == 0, rc, tuple(argv), kept, None if rc == 0 else first)
