"""Compile probes: each file a recipe's patchsets touch is compiled with the real compiler in the patched tree and
in a pristine checkout of the baseline, and the two outcomes are checked against what the recipe declares.

A probe proves a patch only when both halves hold: the patched file compiles (for every requested GPU
architecture), and the pristine one fails the way the field report says it fails (`expect_error`), or passes
where the probe says so. Probes that cannot compile on their own (CMake scripts, files needing a submodule) are
listed with their reason instead of being silently left out.

Generated headers come from `setup` steps run in a scratch folder per tree (`${gen}`): CMake's configure_file is
emulated (`configure:`), generator scripts are run (`run:`), because configuring a whole legacy tree needs its
submodules and minutes, and the probe needs only a few headers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.verify_schema import probe_setup_key
from legacy_gpu_patch.errors import ConfigError, StateError, ToolError

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


@dataclass(frozen=True)
class ProbeResult:
    probe: str
    file: str
    arch: str | None
    verdict: str  # ok | wrong | skipped | not-standalone | not-applicable
    reason: str = ""
    patched: Compiled | None = None
    pristine: Compiled | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "file": self.file, "arch": self.arch, "verdict": self.verdict,
                "reason": self.reason,
                "patched": self.patched.as_dict() if self.patched else None,
                "pristine": self.pristine.as_dict() if self.pristine else None}


@dataclass
class Report:
    tree: str
    baseline: str
    recipe: str
    params: dict[str, Any]
    archs: list[str]
    toolchain: dict[str, Any]
    results: list[ProbeResult] = field(default_factory=list)

    @property
    def wrong(self) -> list[ProbeResult]:
        return [r for r in self.results if r.verdict == "wrong"]

    def as_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        return {"tree": self.tree, "baseline": self.baseline, "recipe": self.recipe, "params": self.params,
                "archs": self.archs, "toolchain": self.toolchain, "counts": counts,
                "results": [r.as_dict() for r in self.results]}


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

    def setup(self, steps: Sequence[dict[str, Any]]) -> SetupFailure | None:
        """Run the setup steps not yet run in this tree; the first failure's text, or None."""
        for step in steps:
            key = probe_setup_key(step)
            if key not in self._done:
                self._done[key] = self._run_setup(step)
            if self._done[key]:
                return self._done[key]
        return None

    def _run_setup(self, step: dict[str, Any]) -> SetupFailure | None:
        if "configure" in step:
            spec = step["configure"]
            src = self.root / spec["in"]
            if not src.is_file():
                return SetupFailure(f"configure: template {spec['in']} does not exist")
            out = self.gen / spec["out"]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(configure_file(src.read_text(encoding="utf-8", errors="surrogateescape"),
                                          dict(spec.get("define") or {})),
                           encoding="utf-8", errors="surrogateescape")
            return None
        argv = [self.render(a) for a in step["run"]]
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

    def include_args(self, probe: dict[str, Any]) -> list[str]:
        args = []
        for inc in probe.get("include") or []:
            path = self.render(inc)
            args.append(f"-I{path if os.path.isabs(path) else self.root / path}")
        return args

    def compile(self, probe: dict[str, Any], arch: str | None) -> Compiled:
        tc = self.toolchain
        rel = probe["file"]
        snippet = probe.get("snippet")
        lang = probe.get("lang", "cuda")
        self.gen.mkdir(parents=True, exist_ok=True)
        tag = f"{probe['name']}-{arch or 'host'}"
        if snippet or rel.endswith(HEADER_SUFFIXES):
            # A header is compiled through a translation unit that includes it (and then uses it).
            source = self.gen / f"probe-{tag}{'.cu' if lang == 'cuda' else '.cpp'}"
            source.write_text(f'#include "{self.root / rel}"\n{snippet or ""}\n', encoding="utf-8")
            src_arg = str(source)
        else:
            src_arg = rel
        flags = [self.render(f) for f in probe.get("flags") or []]
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


# ----------------------------------------------------------------------------------------- pristine checkout


@contextmanager
def pristine_checkout(root: Path, commit: str, scratch: Path) -> Iterator[Path]:
    """A git worktree of `commit` (the baseline) beside the work tree's scratch data; removed afterwards."""
    target = scratch / "pristine"
    proc = subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", "--force", str(target), commit],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise StateError(f"cannot check out the baseline {commit[:12]}: {proc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(target)],
                       capture_output=True, text=True)
        subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True, text=True)


# ----------------------------------------------------------------------------------------- the run


def _applicable(probe: dict[str, Any], params: dict[str, Any], kinds: dict[str, str],
                arch: str | None) -> conditions.Verdict:
    values = dict(params)
    if arch is not None:
        values["arch"] = arch
    return conditions.evaluate(probe.get("when"), values, kinds)


def _check_pristine(probe: dict[str, Any], res: Compiled) -> str | None:
    """Why the pristine outcome is not the declared one, or None."""
    expected = probe.get("unpatched", "any")
    if expected == "pass" and not res.ok:
        return f"pristine tree was expected to compile but fails: {res.first_error}"
    if expected == "fail":
        if res.ok:
            return "pristine tree was expected to fail but compiles: the probe does not show what the patch fixes"
        pattern = probe.get("expect_error")
        if pattern and not re.search(pattern, res.output):
            return f"pristine tree fails, but not with /{pattern}/: {res.first_error}"
    return None


def run_probes(
    root: Path,
    baseline: str,
    recipe_name: str,
    probes: Sequence[dict[str, Any]],
    params: dict[str, Any],
    kinds: dict[str, str],
    archs: Sequence[str],
    toolchain: Toolchain,
    only: Sequence[str] = (),
    keep: Path | None = None,
) -> Report:
    report = Report(str(root), baseline, recipe_name, dict(params), list(archs),
                    {"nvcc": toolchain.nvcc, "cxx": toolchain.cxx,
                     "cuda_home": str(toolchain.cuda_home) if toolchain.cuda_home else None,
                     "extra_includes": [str(p) for p in toolchain.extra_includes]})
    selected = [p for p in probes if not only or p["name"] in only]
    unknown = sorted(set(only) - {p["name"] for p in probes})
    if unknown:
        raise ConfigError(f"no probe named {', '.join(unknown)} in recipe {recipe_name}; it has: "
                          + ", ".join(p["name"] for p in probes))
    scratch = Path(tempfile.mkdtemp(prefix="lgpatch-verify-", dir=keep))
    try:
        plan: list[tuple[dict[str, Any], str | None]] = []
        for probe in selected:
            probe_archs: list[str | None] = list(archs) if probe.get("lang", "cuda") == "cuda" else [None]
            if probe.get("skip"):
                report.results.append(ProbeResult(probe["name"], probe["file"], None, "not-standalone",
                                                  probe["skip"]))
                continue
            if probe_archs == [None]:
                # A host-only probe runs once if it applies to any requested architecture.
                verdicts = [_applicable(probe, params, kinds, a) for a in (archs or [None])]
                if not any(v.selected for v in verdicts):
                    report.results.append(ProbeResult(probe["name"], probe["file"], None, "not-applicable",
                                                      "; ".join(verdicts[0].reasons)))
                    continue
                plan.append((probe, None))
                continue
            for arch in probe_archs:
                verdict = _applicable(probe, params, kinds, arch)
                if not verdict.selected:
                    report.results.append(ProbeResult(probe["name"], probe["file"], arch, "not-applicable",
                                                      "; ".join(verdict.reasons)))
                else:
                    plan.append((probe, arch))
        runnable: list[tuple[dict[str, Any], str | None]] = []
        for probe, arch in plan:
            missing = [h for h in probe.get("requires") or [] if toolchain.find_header(h) is None]
            if missing:
                report.results.append(ProbeResult(
                    probe["name"], probe["file"], arch, "skipped",
                    f"header(s) {', '.join(missing)} not found in the toolkit or extra include folders "
                    f"(install the nvidia-* wheels, or pass --cuda-include DIR / {CUDA_INCLUDE_ENV})"))
            else:
                runnable.append((probe, arch))
        if not runnable:
            return report
        patched = ProbeTree(root, scratch / "gen-patched", toolchain, params)
        with pristine_checkout(root, baseline, scratch) as pristine_root:
            pristine = ProbeTree(pristine_root, scratch / "gen-pristine", toolchain, params)
            for probe, arch in runnable:
                report.results.append(_run_one(probe, arch, patched, pristine))
        return report
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def _run_one(probe: dict[str, Any], arch: str | None, patched: ProbeTree, pristine: ProbeTree) -> ProbeResult:
    name, rel = probe["name"], probe["file"]
    if not (patched.root / rel).is_file():
        return ProbeResult(name, rel, arch, "wrong", f"{rel} does not exist in the patched tree")
    failure = patched.setup(probe.get("setup") or [])
    if failure:
        if failure.tool_missing:
            return ProbeResult(name, rel, arch, "skipped", failure.text)
        return ProbeResult(name, rel, arch, "wrong", f"patched tree: {failure.text}")
    res_patched = patched.compile(probe, arch)
    if not res_patched.ok:
        return ProbeResult(name, rel, arch, "wrong", f"patched tree fails: {res_patched.first_error}", res_patched)
    if not (pristine.root / rel).is_file():
        # The patch created the file: the pristine tree cannot compile what it does not have.
        ok = probe.get("unpatched", "any") in ("fail", "any")
        return ProbeResult(name, rel, arch, "ok" if ok else "wrong",
                           f"{rel} does not exist in the pristine tree", res_patched)
    failure = pristine.setup(probe.get("setup") or [])
    if failure:
        ok = probe.get("unpatched", "any") in ("fail", "any") and not probe.get("expect_error")
        return ProbeResult(name, rel, arch, "ok" if ok else "wrong", f"pristine tree: {failure.text}", res_patched)
    res_pristine = pristine.compile(probe, arch)
    problem = _check_pristine(probe, res_pristine)
    if problem:
        return ProbeResult(name, rel, arch, "wrong", problem, res_patched, res_pristine)
    how = "fails as declared" if not res_pristine.ok else "compiles"
    return ProbeResult(name, rel, arch, "ok", f"patched compiles; pristine {how}", res_patched, res_pristine)
