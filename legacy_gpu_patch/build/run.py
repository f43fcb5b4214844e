"""`lgpatch build`: run a recipe's build commands in a patched work tree, streamed through the classifier.

Everything a build needs is resolved once (options.py) into a frozen BuildOptions (toolkit, arch flags, MAX_JOBS,
launcher, interpreter or build venv, variables); the commands are then planned (`when:` evaluated, `${...}` rendered)
and run in order by the Runner. The report (JSON, JUnit, Markdown) is written whatever happens: success, a failed
command, Ctrl-C.

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
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from legacy_gpu_patch.build import venv
from legacy_gpu_patch.build.options import BuildOptions
from legacy_gpu_patch.build.runner import GRACE_S, Display, Runner
from legacy_gpu_patch.classify.classifier import Classifier
from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.errors import ConfigError, ExitCode
from legacy_gpu_patch.report.reports import Artifact, PhaseResult, Report


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
    out.update(options.variables.render_env(options.build.env, out, "build.env"))
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
    kinds = options.recipe.param_kinds()
    common = base_env(options, env)
    planned: list[PlannedCommand] = []
    for i, cmd in enumerate(options.build.commands):
        verdict = conditions.evaluate(cmd.when, dict(options.params), kinds)
        where = f"build.commands[{i}] ({cmd.name})"
        if not verdict.selected:
            planned.append(PlannedCommand(cmd.name, cmd.phase, cmd.argv, {}, options.root, cmd.optional, False,
                                          "; ".join(verdict.reasons)))
            continue
        cmd_env = dict(common)
        cmd_env.update(options.variables.render_env(cmd.env, cmd_env, f"{where}.env"))
        argv = options.variables.render_argv(cmd.argv, cmd_env, f"{where}.argv")
        if not argv:
            raise ConfigError(f"{where}: argv is empty after substitution")
        cwd = (options.root / options.variables.render(cmd.cwd, cmd_env, f"{where}.cwd")).resolve()
        planned.append(PlannedCommand(cmd.name, cmd.phase, tuple(argv), cmd_env, cwd, cmd.optional, True,
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
    report: Report
    exit_code: ExitCode
    failed: PhaseResult | None = None
    interrupted: bool = False
    report_paths: dict[str, Path] = field(default_factory=dict)


def _run_commands(plan: Sequence[PlannedCommand], runner: Runner) -> tuple[list[PhaseResult], PhaseResult | None, bool]:
    """Each selected command in order until one fails (unless optional) or the run is interrupted."""
    phases: list[PhaseResult] = []
    failed: PhaseResult | None = None
    interrupted = False
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
    return phases, failed, interrupted


def prepare(options: BuildOptions) -> None:
    """What must exist before the first command: the build venv (no --python) and the tools' import path."""
    if options.venv is not None:
        venv.ensure_venv(options.venv)
    _link_tools(options)


def run_build(options: BuildOptions, display: Display | None = None, classifier: Classifier | None = None,
              env: Mapping[str, str] | None = None, grace: float = GRACE_S) -> BuildOutcome:
    """Run the planned commands in order; stop at the first failure (unless optional). Always returns a report."""
    from legacy_gpu_patch.report.reports import write_reports

    prepare(options)
    plan = plan_commands(options, env)
    classifier = classifier or Classifier()
    options.log_path.parent.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0, wall0 = time.monotonic(), time.time()
    with open(options.log_path, "wb") as log:
        header = "".join(f"# lgpatch build: {n}\n" for n in options.notes).encode()
        log.write(header)
        classifier.skip(header)
        phases, failed, interrupted = _run_commands(plan, Runner(classifier, log, display, grace=grace))
        if display is not None:
            display.close()
    findings = classifier.close()
    wheels = find_wheels(options.root, options.build.wheel_dir, since=wall0 - 1)
    if interrupted:
        status, code = "interrupted", ExitCode.INTERRUPTED
    elif failed is not None:
        status, code = "failed", ExitCode.BUILD
    else:
        status, code = "ok", ExitCode.OK
    report = Report(
        kind="build", source=str(options.log_path), findings=findings, status=status, exit_code=int(code),
        **Report.counts(classifier), phases=phases, wheels=wheels, started=started,
        duration=time.monotonic() - t0, recipe=options.recipe.name, recipe_patchsets=recipe_patchsets(options.recipe),
        params=dict(options.params), variables=options.variables.describe(), workdir=str(options.root),
    )
    paths = write_reports(report, options.report_dir)
    return BuildOutcome(report, code, failed, interrupted, paths)


def recipe_patchsets(recipe: Recipe) -> tuple[str, ...]:
    return tuple(e.patchset.name for e in recipe.entries if e.patchset is not None)
