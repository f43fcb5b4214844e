"""`lgpatch build`: run a recipe's build commands in a patched work tree, streamed through the classifier.

Everything a build needs is resolved once into a frozen BuildOptions (toolkit, arch flags, MAX_JOBS, launcher,
interpreter, variables); the commands are then planned (`when:` evaluated, `${...}` rendered) and run in order by
the Runner. The report (JSON, JUnit, Markdown) is written whatever happens: success, a failed command, Ctrl-C.

Environment given to every command, on top of the user's (the recipe's build env and a command's env override):
    MAX_JOBS, CMAKE_BUILD_PARALLEL_LEVEL   the chosen parallelism
    CUDA_HOME, CUDA_PATH, CUDACXX, PATH    the toolkit (CUDACXX is how CMake finds nvcc)
    TORCH_CUDA_ARCH_LIST, CUDAARCHS        the architectures (CUDAARCHS seeds CMAKE_CUDA_ARCHITECTURES, CMake >= 3.20)
    CC, CXX, CUDAHOSTCXX, NVCC_CCBIN       the host compiler, only when --cc/--cxx are given
    CMAKE_{C,CXX,CUDA}_COMPILER_LAUNCHER   ccache or sccache, only with --launcher (sccache-dist is sccache whose
                                           config names a scheduler: nothing else to pass)
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.build.runner import GRACE_S, Display, Runner
from legacy_gpu_patch.build.vars import (
    BuildVars,
    JobsChoice,
    default_jobs,
    explicit_jobs,
    make_build_vars,
    python_paths,
)
from legacy_gpu_patch.classify.classifier import Classifier
from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.errors import ConfigError, ExitCode, ToolError
from legacy_gpu_patch.report.reports import Artifact, LogReport, PhaseResult

LAUNCHERS = ("ccache", "sccache")


@dataclass(frozen=True)
class Toolkit:
    home: Path
    version: str | None  # "13.0"


@dataclass(frozen=True)
class BuildOptions:
    """Everything decided before the first command runs."""

    root: Path
    recipe: Recipe
    params: Mapping[str, Any]  # what `when:` and ${param} see
    archs: tuple[str, ...]
    arch_flags: Any | None  # legacy_gpu_patch.cuda.archflags.ArchFlags
    toolkit: Toolkit | None
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


@dataclass(frozen=True)
class PlannedCommand:
    name: str
    phase: str
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the full environment
    cwd: Path
    optional: bool
    selected: bool
    reason: str  # the `when:` verdict


# --------------------------------------------------------------------------------------------- resolving


def find_toolkit(version: str | None, env: Mapping[str, str]) -> Toolkit | None:
    """The CUDA toolkit for `version` ("13.0"; any when None): $CUDA_HOME first, then every nvcc found."""
    from legacy_gpu_patch.cuda import nvcc_probe

    def fits(v: str | None) -> bool:
        return version is None or (v is not None and _major_minor(v) == _major_minor(version))

    infos = [i for i in nvcc_probe.find_all(env) if not i.error]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = env.get(var)
        if home:
            for info in infos:
                if os.path.realpath(info.cuda_home) == os.path.realpath(home) and fits(info.version):
                    return Toolkit(Path(home), info.version)
    real = [i for i in infos if i.include_dirs] or infos
    for info in real:
        if fits(info.version):
            return Toolkit(info.cuda_home, info.version)
    if version is None:
        return None
    found = ", ".join(f"{i.version} at {i.cuda_home}" for i in infos) or "none"
    raise ToolError(
        f"no CUDA {version} toolkit found (found: {found})",
        hint="install it, set CUDA_HOME to it, or re-apply the recipe for a CUDA you have (--cuda X)",
    )


def _major_minor(version: str) -> str:
    parts = str(version).split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else f"{parts[0]}.0"


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


def resolve_options(
    root: Path,
    recipe: Recipe,
    params: Mapping[str, Any],
    *,
    archs: Sequence[str] | None = None,
    cuda: str | None = None,
    jobs: int | None = None,
    targets: Sequence[str] = (),
    launcher: str | None = None,
    python: str | None = None,
    cc: str | None = None,
    cxx: str | None = None,
    log: Path | None = None,
    report_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    toolkit: Toolkit | None = None,
) -> BuildOptions:
    from legacy_gpu_patch.cuda.archflags import flags_for, split_arch_list

    env = dict(os.environ if env is None else env)
    root = root.resolve()
    if recipe.build is None:
        raise ConfigError(f"recipe {recipe.name} has no build: section", hint="add build.commands to the recipe")
    applied = dict(params)
    eff = dict(params)
    notes: list[str] = []

    # CUDA: the toolkit for --cuda or the recipe's cuda parameter
    if cuda is not None:
        _check_same_steps(recipe, applied, "cuda", cuda)
        if "cuda" in recipe.params:
            eff["cuda"] = cuda
    wanted = cuda if cuda is not None else (str(eff["cuda"]) if "cuda" in eff and eff["cuda"] != "auto" else None)
    if toolkit is None:
        toolkit = find_toolkit(wanted, env)
    if toolkit is not None:
        notes.append(f"CUDA {toolkit.version or '?'} at {toolkit.home}")

    # architectures: --arch, else the recipe's arch parameter
    names: list[str] = []
    for item in archs or ():
        names += split_arch_list(item)
    if names and "arch" in recipe.params:
        for name in names:
            _check_same_steps(recipe, applied, "arch", name)
    if not names and eff.get("arch") not in (None, "", "auto"):
        names = split_arch_list(str(eff["arch"]))
    arch_flags = flags_for(names) if names else None
    if arch_flags is not None:
        notes.append(f"architectures {', '.join(arch_flags.names)}: "
                     f"TORCH_CUDA_ARCH_LIST={arch_flags.torch_cuda_arch_list}, "
                     f"CMAKE_CUDA_ARCHITECTURES={arch_flags.cmake_cuda_architectures}")

    choice = explicit_jobs(jobs) if jobs is not None else default_jobs()
    notes.append(str(choice))

    launcher_path = None
    if launcher:
        if launcher not in LAUNCHERS:
            raise ConfigError(f"--launcher {launcher}: expected one of {', '.join(LAUNCHERS)}")
        launcher_path = shutil.which(launcher, path=env.get("PATH"))
        if launcher_path is None:
            raise ToolError(f"--launcher {launcher}: {launcher} is not on PATH",
                            hint=f"install {launcher}, or build without --launcher")
        notes.append(f"compiler launcher {launcher_path}")
    for flag, compiler in (("--cc", cc), ("--cxx", cxx)):
        if compiler and shutil.which(compiler, path=env.get("PATH")) is None:
            raise ToolError(f"{flag} {compiler}: not found")

    python = python or sys.executable
    py = python_paths(python)
    report_dir = (report_dir or default_report_dir(root)).resolve()
    log_path = (log or report_dir / "build.log").resolve()
    variables = make_build_vars(
        eff,
        python=python,
        site_packages=py["purelib"],
        jobs=choice.jobs,
        workdir=root,
        cuda_home=toolkit.home if toolkit else None,
        arch_flags=arch_flags,
        targets=tuple(targets),
        launcher=launcher_path,
    )
    return BuildOptions(
        root=root,
        recipe=recipe,
        params=eff,
        archs=tuple(arch_flags.names) if arch_flags else (),
        arch_flags=arch_flags,
        toolkit=toolkit,
        jobs=choice,
        targets=tuple(targets),
        launcher=launcher_path,
        cc=cc,
        cxx=cxx,
        python=python,
        site_packages=py["purelib"],
        log_path=log_path,
        report_dir=report_dir,
        variables=variables,
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------------------------- planning


def base_env(options: BuildOptions, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment, lgpatch's variables, then the recipe's build env (rendered)."""
    out = dict(os.environ if env is None else env)
    out.update(options.lgpatch_env())
    if options.toolkit is not None:
        bindir = str(options.toolkit.home / "bin")
        path = out.get("PATH", "")
        if bindir not in path.split(os.pathsep):
            out["PATH"] = bindir + (os.pathsep + path if path else "")
    tools = tools_pythonpath(options)
    if tools is not None:
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tools), out.get("PYTHONPATH")]))
    recipe_env = (options.recipe.build or {}).get("env", {})
    out.update(options.variables.render_env(recipe_env, out, "build.env"))
    return out


def tools_pythonpath(options: BuildOptions) -> Path | None:
    """A folder that makes `${python} -m legacy_gpu_patch.tools.X` work in another interpreter (--python).

    Recipes run lgpatch's build helpers with the build's own Python. When that is not the interpreter running
    lgpatch, only the package itself is linked in (never lgpatch's site-packages: its click or setuptools must not
    leak into the build). The tools use the standard library alone.
    """
    if os.path.abspath(options.python) == os.path.abspath(sys.executable):
        return None
    return options.report_dir / "pythonpath"


def _link_tools(options: BuildOptions) -> None:
    folder = tools_pythonpath(options)
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "legacy_gpu_patch"
    package = Path(__file__).resolve().parent.parent  # the package root (this module is in build/)
    if link.is_symlink() and Path(os.readlink(link)) == package:
        return
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(package, target_is_directory=True)


def plan_commands(options: BuildOptions, env: Mapping[str, str] | None = None) -> list[PlannedCommand]:
    build = options.recipe.build or {}
    kinds = options.recipe.param_kinds()
    common = base_env(options, env)
    planned: list[PlannedCommand] = []
    for i, cmd in enumerate(build.get("commands", [])):
        verdict = conditions.evaluate(cmd.get("when"), dict(options.params), kinds)
        where = f"build.commands[{i}] ({cmd['name']})"
        if not verdict.selected:
            planned.append(PlannedCommand(cmd["name"], cmd["phase"], tuple(cmd["argv"]), {}, options.root,
                                          cmd["optional"], False, "; ".join(verdict.reasons)))
            continue
        cmd_env = dict(common)
        cmd_env.update(options.variables.render_env(cmd.get("env", {}), cmd_env, f"{where}.env"))
        argv = options.variables.render_argv(cmd["argv"], cmd_env, f"{where}.argv")
        if not argv:
            raise ConfigError(f"{where}: argv is empty after substitution")
        cwd = (options.root / options.variables.render(cmd["cwd"], cmd_env, f"{where}.cwd")).resolve()
        planned.append(PlannedCommand(cmd["name"], cmd["phase"], tuple(argv), cmd_env, cwd, cmd["optional"], True,
                                      "; ".join(verdict.reasons) or "always"))
    return planned


# --------------------------------------------------------------------------------------------- running


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_wheels(root: Path, wheel_dir: str, since: float | None = None) -> list[Artifact]:
    folder = root / wheel_dir
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.whl")):
        st = path.stat()
        out.append(Artifact(str(path), st.st_size, sha256_file(path), new=since is None or st.st_mtime >= since))
    return out


@dataclass
class BuildOutcome:
    report: LogReport
    exit_code: ExitCode
    failed: PhaseResult | None = None
    interrupted: bool = False
    report_paths: dict[str, Path] = field(default_factory=dict)


def run_build(options: BuildOptions, display: Display | None = None, classifier: Classifier | None = None,
              env: Mapping[str, str] | None = None, grace: float = GRACE_S) -> BuildOutcome:
    """Run the planned commands in order; stop at the first failure (unless optional). Always returns a report."""
    from legacy_gpu_patch.report.reports import write_reports

    _link_tools(options)
    plan = plan_commands(options, env)
    classifier = classifier or Classifier()
    options.log_path.parent.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    wall0 = time.time()
    phases: list[PhaseResult] = []
    failed: PhaseResult | None = None
    interrupted = False
    with open(options.log_path, "wb") as log:
        header = "".join(f"# lgpatch build: {n}\n" for n in options.notes).encode()
        log.write(header)
        classifier.skip(header)
        runner = Runner(classifier, log, display, grace=grace)
        for cmd in plan:
            result = PhaseResult(cmd.name, cmd.phase, list(cmd.argv), str(cmd.cwd), optional=cmd.optional)
            phases.append(result)
            if not cmd.selected:
                result.status, result.reason = "skipped", cmd.reason
                continue
            if failed is not None or interrupted:
                result.status, result.reason = "not-run", "an earlier command failed" if failed else "interrupted"
                continue
            cmd.cwd.mkdir(parents=True, exist_ok=True)
            run = runner.run(cmd.argv, env=cmd.env, cwd=cmd.cwd, name=cmd.name, phase=cmd.phase)
            result.returncode, result.duration = run.returncode, run.duration
            result.log_lines = (run.first_line, run.last_line)
            if run.interrupted:
                result.status, result.reason = "interrupted", run.reason
                interrupted = True
            elif run.ok:
                result.status = "passed"
            else:
                result.status, result.reason = "failed", run.reason
                if not cmd.optional:
                    failed = result
        if display is not None:
            display.close()
    findings = classifier.close()
    wheel_dir = (options.recipe.build or {}).get("wheel_dir", "dist")
    wheels = find_wheels(options.root, wheel_dir, since=wall0 - 1)
    if interrupted:
        status, code = "interrupted", ExitCode.INTERRUPTED
    elif failed is not None:
        status, code = "failed", ExitCode.BUILD
    else:
        status, code = "ok", ExitCode.OK
    report = LogReport(
        kind="build",
        source=str(options.log_path),
        findings=findings,
        status=status,
        exit_code=int(code),
        **LogReport.counts(classifier),
        phases=phases,
        wheels=wheels,
        started=started,
        duration=time.monotonic() - t0,
        recipe=options.recipe.name,
        recipe_patchsets=recipe_patchsets(options.recipe),
        params={k: v for k, v in options.params.items()},
        variables=options.variables.describe(),
        workdir=str(options.root),
    )
    paths = write_reports(report, options.report_dir)
    return BuildOutcome(report, code, failed, interrupted, paths)


def recipe_patchsets(recipe: Recipe) -> tuple[str, ...]:
    return tuple(e.patchset.name for e in recipe.entries if e.patchset is not None)
