"""What a build is asked for (BuildRequest, from the command line) and everything resolved from it before the first
command runs (BuildOptions): the toolkit, the architectures, MAX_JOBS, the launcher, the interpreter, the variables.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.build import venv
from legacy_gpu_patch.build.vars import (
    BuildVars,
    JobsChoice,
    default_jobs,
    explicit_jobs,
    make_build_vars,
    python_paths,
)
from legacy_gpu_patch.config.build_schema import BuildSection
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.cuda.knowledge import major_minor
from legacy_gpu_patch.errors import ConfigError, ToolError

if TYPE_CHECKING:
    from legacy_gpu_patch.cuda.archflags import ArchFlags

LAUNCHERS = ("ccache", "sccache")


@dataclass(frozen=True)
class InstalledToolkit:
    """A CUDA toolkit found on this machine (cuda.knowledge.Toolkit is what lgpatch knows about a release)."""

    home: Path
    version: str | None  # "13.0"


@dataclass(frozen=True)
class BuildRequest:
    """What the user asked for (`lgpatch build` options); None/empty: the recipe's parameters or the default."""

    archs: tuple[str, ...] = ()  # "sm_86,sm_90+ptx" items
    cuda: str | None = None
    jobs: int | None = None
    targets: tuple[str, ...] = ()
    launcher: str | None = None  # ccache | sccache
    python: str | None = None  # None: a build venv lgpatch makes (build/venv.py)
    cc: str | None = None
    cxx: str | None = None
    log: Path | None = None
    report_dir: Path | None = None
    env: Mapping[str, str] | None = None  # None: os.environ
    toolkit: InstalledToolkit | None = None  # None: found from cuda / $CUDA_HOME / every nvcc


@dataclass(frozen=True)
class BuildOptions:
    """Everything decided before the first command runs."""

    root: Path
    recipe: Recipe
    build: BuildSection
    params: Mapping[str, Any]  # what `when:` and ${param} see
    archs: tuple[str, ...]
    arch_flags: ArchFlags | None
    toolkit: InstalledToolkit | None
    jobs: JobsChoice
    targets: tuple[str, ...]
    launcher: str | None  # full path
    cc: str | None
    cxx: str | None
    python: str
    site_packages: str
    log_path: Path
    report_dir: Path
    variables: BuildVars
    notes: tuple[str, ...] = ()
    venv: Path | None = None  # the build venv lgpatch makes before the first command (no --python)

    def lgpatch_env(self) -> dict[str, str]:
        """The variables lgpatch itself sets for every command (the recipe may override them)."""
        env = {"MAX_JOBS": str(self.jobs.jobs), "CMAKE_BUILD_PARALLEL_LEVEL": str(self.jobs.jobs)}
        if self.toolkit is not None:
            home = str(self.toolkit.home)
            env.update(CUDA_HOME=home, CUDA_PATH=home, CUDACXX=str(self.toolkit.home / "bin" / "nvcc"))
        if self.arch_flags is not None:
            env["TORCH_CUDA_ARCH_LIST"] = self.arch_flags.torch_cuda_arch_list
            env["CUDAARCHS"] = self.arch_flags.cmake_cuda_architectures
        if self.cc:
            env["CC"] = self.cc
        if self.cxx:
            env.update(CXX=self.cxx, CUDAHOSTCXX=self.cxx, NVCC_CCBIN=self.cxx)
        if self.launcher:
            for lang in ("C", "CXX", "CUDA"):
                env[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = self.launcher
        return env


# --------------------------------------------------------------------------------------------- resolving


def find_toolkit(version: str | None, env: Mapping[str, str]) -> InstalledToolkit | None:
    """The CUDA toolkit for `version` ("13.0"; any when None): $CUDA_HOME first, then every nvcc found."""
    from legacy_gpu_patch.cuda import nvcc_probe

    def fits(v: str | None) -> bool:
        return version is None or (v is not None and major_minor(v) == major_minor(version))

    infos = [i for i in nvcc_probe.find_all(env) if not i.error]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(var)
        if home:
            for info in infos:
                if os.path.realpath(info.cuda_home) == os.path.realpath(home) and fits(info.version):
                    return InstalledToolkit(Path(home), info.version)
    real = [i for i in infos if i.include_dirs] or infos
    for info in real:
        if fits(info.version):
            return InstalledToolkit(info.cuda_home, info.version)
    if version is None:
        return None
    found = ", ".join(f"{i.version} at {i.cuda_home}" for i in infos) or "none"
    raise ToolError(
        f"no CUDA {version} toolkit found (found: {found})",
        hint="install it, set CUDA_HOME to it, or re-apply the recipe for a CUDA you have (--cuda X)",
    )


def _selected_steps(recipe: Recipe, params: Mapping[str, Any]) -> dict[str, str]:
    from legacy_gpu_patch.ledger.plan import make_plan

    return {p.step.key: p.digest for p in make_plan(recipe, dict(params)) if p.selected}


def _check_same_steps(recipe: Recipe, applied: Mapping[str, Any], name: str, value: Any) -> None:
    """Building with another value of a parameter is fine only if the tree would be patched the same way."""
    if name not in recipe.params or str(applied.get(name)) == str(value):
        return
    other = dict(applied)
    other[name] = value
    before, after = _selected_steps(recipe, applied), _selected_steps(recipe, other)
    if before == after:
        return
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    detail = "; ".join(x for x in (
        f"needs {', '.join(added)}" if added else "",
        f"must not have {', '.join(removed)}" if removed else "",
        f"changes {', '.join(changed)}" if changed else "",
    ) if x)
    raise ConfigError(
        f"the work tree was patched for {name}={applied.get(name)}; {name}={value} patches it differently ({detail})",
        hint=f"lgpatch revert, then lgpatch apply {recipe.name} --{name} {value}",
    )


def default_report_dir(root: Path) -> Path:
    """Inside .git (never a user edit, never in `git status`), next to the ledger; a plain folder gets its own."""
    git = root / ".git"
    return git / "lgpatch" / "build" if git.is_dir() else root / ".lgpatch-build"


def _resolve_toolkit(recipe: Recipe, eff: dict[str, Any], req: BuildRequest, env: Mapping[str, str],
                     notes: list[str]) -> InstalledToolkit | None:
    """--cuda, else the recipe's cuda parameter (then `eff["cuda"]` is what `when:` sees)."""
    if req.cuda is not None:
        _check_same_steps(recipe, dict(eff), "cuda", req.cuda)
        if "cuda" in recipe.params:
            eff["cuda"] = req.cuda
    wanted = req.cuda if req.cuda is not None else (
        str(eff["cuda"]) if "cuda" in eff and eff["cuda"] != "auto" else None)
    toolkit = req.toolkit if req.toolkit is not None else find_toolkit(wanted, env)
    if toolkit is not None:
        notes.append(f"CUDA {toolkit.version or '?'} at {toolkit.home}")
    return toolkit


def _resolve_archs(recipe: Recipe, applied: Mapping[str, Any], req: BuildRequest,
                   notes: list[str]) -> ArchFlags | None:
    """--arch, else the recipe's arch parameter."""
    from legacy_gpu_patch.cuda.archflags import flags_for, split_arch_list

    names: list[str] = []
    for item in req.archs:
        names += split_arch_list(item)
    given = flags_for(names) if names else None
    if given is not None and "arch" in recipe.params:
        # the whole list, as the arch parameter would hold it: a list's conditions hold if any target's do
        _check_same_steps(recipe, applied, "arch", ",".join(given.names))
    if not names and applied.get("arch") not in (None, "", "auto"):
        names = split_arch_list(str(applied["arch"]))
    arch_flags = given or (flags_for(names) if names else None)
    if arch_flags is not None:
        notes.append(f"architectures {', '.join(arch_flags.names)}: "
                     f"TORCH_CUDA_ARCH_LIST={arch_flags.torch_cuda_arch_list}, "
                     f"CMAKE_CUDA_ARCHITECTURES={arch_flags.cmake_cuda_architectures}, "
                     f"wheel label {arch_flags.wheel_label}")
    return arch_flags


def _resolve_tools(req: BuildRequest, env: Mapping[str, str], notes: list[str]) -> str | None:
    """The launcher's full path (None without --launcher); --cc/--cxx must be on PATH."""
    launcher_path = None
    if req.launcher:
        if req.launcher not in LAUNCHERS:
            raise ConfigError(f"--launcher {req.launcher}: expected one of {', '.join(LAUNCHERS)}")
        launcher_path = shutil.which(req.launcher, path=env.get("PATH"))
        if launcher_path is None:
            raise ToolError(f"--launcher {req.launcher}: {req.launcher} is not on PATH",
                            hint=f"install {req.launcher}, or build without --launcher")
        notes.append(f"compiler launcher {launcher_path}")
    for flag, compiler in (("--cc", req.cc), ("--cxx", req.cxx)):
        if compiler and shutil.which(compiler, path=env.get("PATH")) is None:
            raise ToolError(f"{flag} {compiler}: not found")
    return launcher_path


def _resolve_python(req: BuildRequest, root: Path, notes: list[str]) -> tuple[str, str, Path | None]:
    """(interpreter, its purelib, the build venv to make or None): --python, else lgpatch's own build venv."""
    if req.python is not None:
        return req.python, python_paths(req.python)["purelib"], None
    folder = venv.venv_dir(root)
    notes.append(f"build venv {folder} (python {sys.version_info[0]}.{sys.version_info[1]}, layered on lgpatch's "
                 "environment; --python EXE builds in that interpreter's environment instead)")
    return str(venv.venv_python(folder)), venv.venv_purelib(folder), folder


def resolve_options(root: Path, recipe: Recipe, params: Mapping[str, Any],
                    request: BuildRequest | None = None) -> BuildOptions:
    req = request or BuildRequest()
    env = dict(os.environ if req.env is None else req.env)
    root = root.resolve()
    if recipe.build is None:
        raise ConfigError(f"recipe {recipe.name} has no build: section", hint="add build.commands to the recipe")
    notes: list[str] = []
    eff = dict(params)
    toolkit = _resolve_toolkit(recipe, eff, req, env, notes)
    arch_flags = _resolve_archs(recipe, params, req, notes)
    choice = explicit_jobs(req.jobs) if req.jobs is not None else default_jobs()
    notes.append(str(choice))
    launcher_path = _resolve_tools(req, env, notes)
    report_dir = (req.report_dir or default_report_dir(root)).resolve()
    python, site_packages, venv_dir = _resolve_python(req, root, notes)
    variables = make_build_vars(
        eff, python=python, site_packages=site_packages, jobs=choice.jobs, workdir=root,
        cuda_home=toolkit.home if toolkit else None, arch_flags=arch_flags, targets=req.targets,
        launcher=launcher_path,
    )
    return BuildOptions(
        root=root, recipe=recipe, build=recipe.build, params=eff,
        archs=tuple(arch_flags.names) if arch_flags else (), arch_flags=arch_flags, toolkit=toolkit, jobs=choice,
        targets=req.targets, launcher=launcher_path, cc=req.cc, cxx=req.cxx, python=python,
        site_packages=site_packages, log_path=(req.log or report_dir / "build.log").resolve(),
        report_dir=report_dir, variables=variables, notes=tuple(notes), venv=venv_dir,
    )
