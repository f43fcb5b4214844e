"""Find every nvcc on this machine and ask each what it is and which GPU targets it accepts.

Where nvcc hides: PATH; $CUDA_HOME / $CUDA_PATH / $CUDA_ROOT; /usr/local/cuda and /usr/local/cuda-X.Y; /opt/cuda;
and pip wheels (`nvidia-cuda-nvcc-cu12` installs site-packages/nvidia/cuda_nvcc/bin/nvcc, the CUDA 13 wheels
site-packages/nvidia/cu13/bin/nvcc). The same toolkit is often reachable several ways (/usr/local/cuda is a
symlink, /usr/local/bin/nvcc a wrapper script): entries are merged by resolved path, and by identical
`--version` output, keeping every way it was found in `aliases`.

Every subprocess has a timeout; a broken nvcc is reported (NvccInfo.error), never raised. Stdlib only, so that the
GPU proof script and `python -m legacy_gpu_patch.cuda.doctor` run where lgpatch's dependencies are not installed.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

PROBE_TIMEOUT_S = 10.0
_RELEASE_RE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)")
_TARGET_RE = re.compile(r"\b((?:sm|compute|lto)_\d+[a-z]?)\b")


@dataclass(frozen=True)
class NvccInfo:
    path: str  # as found (first way)
    resolved: str  # realpath
    found_via: tuple[str, ...]  # "PATH", "CUDA_HOME", "/usr/local/cuda*", "pip:nvidia-cuda-nvcc", ...
    aliases: tuple[str, ...] = ()  # other paths that lead to the same toolkit
    version: str | None = None  # "13.0"
    full_version: str | None = None  # "13.0.88"
    version_text: str = ""
    gpu_archs: tuple[str, ...] = ()  # `--list-gpu-arch`: compute_XX (empty when the option is unknown)
    gpu_codes: tuple[str, ...] = ()  # `--list-gpu-code`: sm_XX
    lists_supported: bool = False
    error: str | None = None

    @property
    def cuda_home(self) -> Path:
        """The toolkit root (bin/.. of the resolved nvcc)."""
        return Path(self.resolved).parent.parent

    @property
    def include_dirs(self) -> list[Path]:
        home = self.cuda_home
        dirs = [home / "include"]
        dirs += [Path(p) for p in sorted(glob.glob(str(home / "targets" / "*" / "include")))]
        return [d for d in dirs if (d / "cuda_runtime.h").is_file()]

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "resolved": self.resolved,
            "found_via": list(self.found_via),
            "aliases": list(self.aliases),
            "version": self.version,
            "full_version": self.full_version,
            "cuda_home": str(self.cuda_home),
            "gpu_archs": list(self.gpu_archs),
            "gpu_codes": list(self.gpu_codes),
            "lists_supported": self.lists_supported,
            "error": self.error,
        }


def parse_version_output(text: str) -> tuple[str | None, str | None]:
    """`nvcc --version` → ("13.0", "13.0.88")."""
    m = _RELEASE_RE.search(text)
    if not m:
        return None, None
    return m.group(1), m.group(2)


def parse_target_list(text: str, prefix: str) -> tuple[str, ...]:
    """`nvcc --list-gpu-arch` (compute_XX lines) / `--list-gpu-code` (sm_XX lines) → the items, in order."""
    return tuple(t for t in _TARGET_RE.findall(text) if t.startswith(prefix + "_"))


def _run(argv: list[str], timeout: float) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    except OSError as exc:
        return -1, f"cannot run: {exc.strerror or exc}"
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def site_package_dirs() -> list[Path]:
    dirs: list[str] = []
    for key in ("purelib", "platlib"):
        try:
            dirs.append(sysconfig.get_paths()[key])
        except KeyError:
            pass
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # virtualenv's old site.py
        pass
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        dirs.append(user)
    seen: list[Path] = []
    for d in dirs:
        p = Path(d)
        if p.is_dir() and p not in seen:
            seen.append(p)
    return seen


def candidate_paths(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(path, how it was found) for every nvcc candidate, in the order a user would expect (PATH first)."""
    env = os.environ if env is None else env
    found: list[tuple[str, str]] = []

    def add(path: str | Path, how: str) -> None:
        p = str(path)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            found.append((p, how))

    for d in env.get("PATH", "").split(os.pathsep):
        if d:
            add(Path(d) / "nvcc", "PATH")
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR"):
        if env.get(var):
            add(Path(env[var]) / "bin" / "nvcc", var)
    for root in ["/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*")), "/opt/cuda",
                 *sorted(glob.glob("/opt/nvidia/hpc_sdk/Linux_*/*/cuda/*"))]:
        add(Path(root) / "bin" / "nvcc", "/usr/local/cuda*" if root.startswith("/usr/local") else root)
    for sp in site_package_dirs():
        for p in sorted(glob.glob(str(sp / "nvidia" / "*" / "bin" / "nvcc"))):
            add(p, "pip:nvidia-cuda-nvcc")
    for p in extra:
        add(p, "given")
    return found


def probe(path: str, timeout: float = PROBE_TIMEOUT_S) -> NvccInfo:
    """Ask one nvcc for its version and target lists (three short subprocesses)."""
    resolved = os.path.realpath(path)
    rc, out = _run([path, "--version"], timeout)
    version, full = parse_version_output(out)
    if version is None:
        msg = out.strip().splitlines()[-1] if out.strip() else f"exit status {rc}"
        return NvccInfo(path, resolved, (), version_text=out, error=f"`nvcc --version` failed: {msg}")
    rc_a, archs_out = _run([path, "--list-gpu-arch"], timeout)
    rc_c, codes_out = _run([path, "--list-gpu-code"], timeout)
    # nvcc before these options says "Unknown option '--list-gpu-arch'" and exits 1: fall back to the tables.
    archs = parse_target_list(archs_out, "compute") if rc_a == 0 else ()
    codes = parse_target_list(codes_out, "sm") if rc_c == 0 else ()
    return NvccInfo(path, resolved, (), version=version, full_version=full, version_text=out.strip(),
                    gpu_archs=archs, gpu_codes=codes, lists_supported=bool(archs or codes))


def find_all(env: Mapping[str, str] | None = None, extra: Iterable[str] = (),
             timeout: float = PROBE_TIMEOUT_S) -> list[NvccInfo]:
    """Every distinct nvcc (merged by realpath, then by identical version text), probed in parallel."""
    by_real: dict[str, tuple[str, list[str], list[str]]] = {}  # realpath → (first path, ways, other paths)
    for path, how in candidate_paths(env, extra):
        real = os.path.realpath(path)
        if real not in by_real:
            by_real[real] = (path, [how], [])
        else:
            first, ways, others = by_real[real]
            if how not in ways:
                ways.append(how)
            if path != first and path not in others:
                others.append(path)
    if not by_real:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(by_real))) as pool:
        infos = list(pool.map(lambda item: probe(item[1][0], timeout), by_real.items()))
    merged: list[NvccInfo] = []
    for info, (_real, (_first, ways, others)) in zip(infos, by_real.items()):
        info = replace(info, found_via=tuple(ways), aliases=tuple(others))
        twin = next((m for m in merged if info.version and m.version_text == info.version_text), None)
        if twin is None:
            merged.append(info)
            continue
        # Same toolkit through a wrapper script (e.g. /usr/local/bin/nvcc: exec /usr/local/cuda-13.0/bin/nvcc):
        # keep the real toolkit directory as the main entry, the wrapper as an alias.
        keep, drop = (info, twin) if _looks_like_toolkit(info) and not _looks_like_toolkit(twin) else (twin, info)
        merged[merged.index(twin)] = replace(
            keep,
            found_via=tuple(dict.fromkeys(keep.found_via + drop.found_via)),
            aliases=tuple(dict.fromkeys((*keep.aliases, drop.path, *drop.aliases))),
        )
    return merged


def _looks_like_toolkit(info: NvccInfo) -> bool:
    """A real toolkit's nvcc (an ELF binary next to include/cuda_runtime.h), not a wrapper script."""
    try:
        with open(info.resolved, "rb") as fh:
            if fh.read(2) == b"#!":
                return False
    except OSError:
        return False
    return bool(info.include_dirs)


def which_nvcc(env: Mapping[str, str] | None = None) -> str | None:
    """The nvcc a build would use: PATH first, then $CUDA_HOME, then /usr/local/cuda."""
    env = os.environ if env is None else env
    hit = shutil.which("nvcc", path=env.get("PATH"))
    if hit:
        return hit
    cands = candidate_paths(env)
    return cands[0][0] if cands else None


def host_config_limits(include_dirs: Iterable[Path]) -> dict[str, str]:
    """The host compiler limits a toolkit really enforces, read from its crt/host_config.h.

    Returns {"gcc_max": "15", "clang_max": "20"} (either may be missing). This beats any table: it is what nvcc
    will check when it compiles.
    """
    for inc in include_dirs:
        for rel in ("crt/host_config.h", "host_config.h"):
            p = Path(inc) / rel
            if p.is_file():
                try:
                    text = p.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                return parse_host_config(text)
    return {}


def parse_host_config(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    m = re.search(r"gcc versions later than (\d+(?:\.\d+)?) are not supported", text)
    if m:
        out["gcc_max"] = m.group(1)
    # the generic clang check ("clang version must be less than 21"), not the Grace/HOS/Apple variants
    for m in re.finditer(r"#error -- unsupported clang version! clang version must be less than (\d+)", text):
        out["clang_max"] = str(int(m.group(1)) - 1)
        break
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m legacy_gpu_patch.cuda.nvcc_probe`: list every nvcc as JSON (a debugging aid)."""
    import json

    infos = find_all(extra=argv if argv is not None else sys.argv[1:])
    print(json.dumps([i.to_json() for i in infos], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
