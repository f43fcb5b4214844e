"""Build variables: the `${name}` values a recipe's build argv and env may use, and the default MAX_JOBS.

    ${<param>}                every recipe parameter (resolved values from the work tree's ledger)
    ${python}                 the interpreter that runs the build (default: the one running lgpatch; --python)
    ${site_packages}          purelib of ${python}
    ${jobs}                   MAX_JOBS (--jobs, default min(cores, available RAM / 1.3 GiB): tools/jobs.py)
    ${workdir}                the work tree root
    ${cuda_home}              the CUDA toolkit used (from --cuda / the cuda parameter)
    ${torch_cuda_arch_list}   "8.6;9.0+PTX"            (legacy_gpu_patch.cuda.archflags derives all three)
    ${cmake_cuda_architectures} "86-real;90"
    ${nvcc_gencode}           a list: -gencode=arch=compute_86,code=sm_86 ...
    ${arch_label}             "sm90", "sm80.sm86.sm89.sm90ptx": the targets in a wheel's local version label
    ${targets}                a list: the --target values
    ${launcher}               ccache / sccache (full path) or empty
    ${env:NAME}               the environment variable NAME (empty when unset)
    $$                        a literal $

A list variable that is a whole argv item is spliced as several items (zero when empty; an option right before an
empty list, such as `--target ${targets}`, is dropped with it); inside a longer item or in an env value a list is
joined with spaces.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from legacy_gpu_patch.config.schema import did_you_mean
from legacy_gpu_patch.errors import ConfigError
from legacy_gpu_patch.tools.jobs import CUDA_JOB_BYTES, JobsChoice, cpu_count
from legacy_gpu_patch.tools.jobs import GIB as GIB  # re-exported ("X as X"): the build's names for them
from legacy_gpu_patch.tools.jobs import default_jobs as default_jobs
from legacy_gpu_patch.tools.jobs import mem_available as mem_available

if TYPE_CHECKING:
    from legacy_gpu_patch.cuda.archflags import ArchFlags

# The sizing of MAX_JOBS is tools/jobs.py (standard library only: shell scripts that run ninja themselves call it too).
JOB_MEMORY_BYTES = CUDA_JOB_BYTES

_VAR_RE = re.compile(r"\$\$|\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


# --------------------------------------------------------------------------------------------- MAX_JOBS


def explicit_jobs(n: int) -> JobsChoice:
    if n < 1:
        raise ConfigError(f"--jobs {n}: must be at least 1")
    return JobsChoice(n, cpu_count(), None, "--jobs")


# --------------------------------------------------------------------------------------------- python


def python_paths(python: str) -> dict[str, str]:
    """purelib and version of an interpreter (this one without a subprocess)."""
    # abspath, not realpath: a venv's bin/python is a symlink to the base interpreter, whose purelib differs.
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        import sysconfig

        return {"purelib": sysconfig.get_paths()["purelib"], "version": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    code = "import sys, sysconfig; print(sysconfig.get_paths()['purelib']); print('%d.%d' % sys.version_info[:2])"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"--python {python}: cannot run it: {exc}") from None
    purelib, version = out.strip().splitlines()[-2:]
    return {"purelib": purelib, "version": version}


# --------------------------------------------------------------------------------------------- variables

Value = Union[str, tuple[str, ...]]


@dataclass(frozen=True)
class BuildVars:
    """Resolved once per build; renders `${...}` in argv and env values."""

    values: Mapping[str, Value]
    missing_hints: Mapping[str, str] = field(default_factory=dict)  # variable → why it has no value here

    def _value(self, name: str, where: str) -> Value:
        if name in self.values:
            return self.values[name]
        if name in self.missing_hints:
            raise ConfigError(f"{where}: ${{{name}}} has no value: {self.missing_hints[name]}")
        raise ConfigError(
            f"{where}: unknown build variable ${{{name}}}{did_you_mean(name, self.values)}",
            hint="variables: " + ", ".join(sorted(self.values)) + ", and ${env:NAME}",
        )

    def render(self, text: str, env: Mapping[str, str], where: str = "build") -> str:
        """Replace ${name}, ${env:NAME} and $$ in one string; lists are joined with spaces."""

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name = m.group(2)
            if m.group(1):
                return env.get(name, "")
            value = self._value(name, where)
            return " ".join(value) if isinstance(value, tuple) else value

        return _VAR_RE.sub(sub, text)

    def render_argv(self, argv: Sequence[str], env: Mapping[str, str], where: str = "argv") -> list[str]:
        out: list[str] = []
        for i, item in enumerate(argv):
            m = _VAR_RE.fullmatch(item)
            if m and m.group(0) != "$$" and not m.group(1):
                value = self._value(m.group(2), f"{where}[{i}]")
                if isinstance(value, tuple):
                    if not value and out and out[-1].startswith("-") and "=" not in out[-1]:
                        out.pop()  # "--target ${targets}" with no targets: drop the option too
                    out.extend(value)
                    continue
                out.append(value)
                continue
            out.append(self.render(item, env, f"{where}[{i}]"))
        return out

    def render_env(self, mapping: Mapping[str, str], base: Mapping[str, str], where: str = "env") -> dict[str, str]:
        """Render env values in order; ${env:NAME} sees `base` plus the values rendered before it."""
        env = dict(base)
        out: dict[str, str] = {}
        for key, value in mapping.items():
            rendered = self.render(str(value), env, f"{where}.{key}")
            out[key] = rendered
            env[key] = rendered
        return out

    def describe(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(self.values.items())}


def make_build_vars(
    params: Mapping[str, Any],
    *,
    python: str,
    site_packages: str,
    jobs: int,
    workdir: Path,
    cuda_home: Path | None,
    arch_flags: ArchFlags | None,
    targets: Sequence[str] = (),
    launcher: str | None = None,
) -> BuildVars:
    values: dict[str, Value] = {}
    for name, value in params.items():
        values[name] = str(value).lower() if isinstance(value, bool) else str(value)
    values.update(
        python=python,
        site_packages=site_packages,
        jobs=str(jobs),
        workdir=str(workdir),
        targets=tuple(targets),
        launcher=launcher or "",
    )
    hints: dict[str, str] = {}
    if cuda_home is not None:
        values["cuda_home"] = str(cuda_home)
    else:
        hints["cuda_home"] = "no CUDA toolkit was found; pass --cuda X or set CUDA_HOME"
    if arch_flags is not None:
        values["torch_cuda_arch_list"] = arch_flags.torch_cuda_arch_list
        values["cmake_cuda_architectures"] = arch_flags.cmake_cuda_architectures
        values["nvcc_gencode"] = tuple(arch_flags.nvcc_gencode)
        values["arch_label"] = arch_flags.wheel_label
    else:
        for name in ("torch_cuda_arch_list", "cmake_cuda_architectures", "nvcc_gencode", "arch_label"):
            hints[name] = "no GPU architecture: pass --arch sm_XX (the recipe has no arch parameter)"
    return BuildVars(values, hints)
