"""`lgpatch ci RECIPE --out DIR`: one CI job, start to end.

    apply (strict) into DIR/work → build (DIR/reports/build: the build's log and reports) → the wheel repaired and
    labelled into DIR/wheels → smoke test in a fresh venv (DIR/smoke-venv) → DIR/reports/ci.json, junit.xml,
    summary.md (+ GitHub annotations and step summary on GitHub Actions)

A stage that fails stops the job with the exit code of its failure class (docs/exit-codes.md): CONFIG 3, SOURCE 4,
PATCH 5 (strict apply), BUILD 9 (a build command, no wheel, a wheel that cannot be repaired), INTERRUPTED 10,
VERIFY 13 (the smoke test of the installed wheel), TOOL 14. The reports are written whatever happens.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legacy_gpu_patch.ci import compcache, smoke
from legacy_gpu_patch.ci.report import CiReport
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.errors import BuildError, ExitCode, InterruptedBuild, LgpatchError, VerifyError


@dataclass(frozen=True)
class JobOptions:
    recipe: Recipe
    recipe_arg: str
    params: dict[str, Any]  # resolved
    out: Path
    python: str | None = None  # the build's interpreter (default: the tree's build venv, build/venv.py)
    jobs: int | None = None
    compiler_cache: str = "auto"
    auditwheel: str = "auto"
    smoke_code: str | None = None
    offline: bool = False
    job: str = ""
    smoke_only: Path | None = None  # a built wheel: smoke-test only it (the GPU runner's job)
    quiet: bool = False  # do not stream the build's output

    @property
    def work(self) -> Path:
        return self.out / "work"

    @property
    def reports(self) -> Path:
        return self.out / "reports"


@dataclass
class JobResult:
    report: CiReport
    error: LgpatchError | None
    build_annotations: list[str]


def _timed(report: CiReport, name: str, fn: Callable[[], str]) -> None:
    """Run one stage; its status and time go into the report whatever happens."""
    stage = report.stage(name)
    t0 = time.monotonic()
    try:
        stage.detail = fn()
        stage.status = "passed"
    except BaseException as exc:
        stage.status = "failed"
        stage.detail = exc.message if isinstance(exc, LgpatchError) else f"{type(exc).__name__}: {exc}"
        raise
    finally:
        stage.duration = time.monotonic() - t0


def run_job(opts: JobOptions) -> JobResult:
    report = CiReport(opts.job or opts.recipe.name, opts.recipe.name, dict(opts.params))
    state: dict[str, Any] = {"annotations": []}
    t0 = time.monotonic()
    error: LgpatchError | None = None
    try:
        if opts.smoke_only is not None:
            _smoke_only_setup(opts, report, state)
        else:
            _timed(report, "apply", lambda: _apply(opts, report))
            _timed(report, "build", lambda: _build(opts, report, state))
            _timed(report, "repair", lambda: _repair(opts, report, state))
        _timed(report, "smoke", lambda: _smoke(opts, report, state))
        report.status = "ok"
    except LgpatchError as exc:
        error = exc
    except KeyboardInterrupt:
        error = InterruptedBuild("lgpatch ci was interrupted")
    except Exception as exc:  # a bug: still write the reports, then exit INTERNAL (1)
        error = LgpatchError(f"internal error in lgpatch ci: {type(exc).__name__}: {exc}",
                             hint="this is a bug in lgpatch; the reports were written")
    finally:
        report.duration = time.monotonic() - t0
    if error is not None:
        failed = next((s for s in report.stages if s.status == "failed"), None)
        report.status, report.exit_code = "failed", int(error.exit_code)
        report.failure_class = ExitCode(error.exit_code).name
        report.failed_stage = failed.name if failed else ""
        report.message = error.message
        for s in report.stages:
            if s.status == "not-run":
                s.detail = f"not run: {report.failed_stage} failed"
    return JobResult(report, error, state["annotations"])


# --------------------------------------------------------------------------------------------- stages


def _apply(opts: JobOptions, report: CiReport) -> str:
    from legacy_gpu_patch.ledger.engine import ApplyOptions, apply

    result = apply(opts.recipe, ApplyOptions(workdir=opts.work.absolute(), params=dict(opts.params), strict=True,
                                             offline=opts.offline))
    report.apply = {"workdir": str(opts.work), "created": result.created,
                    "applied": [a["step"] for a in result.applied], "unchanged": result.unchanged,
                    "skipped": [s.get("step") for s in result.skipped], "warnings": list(result.warnings)}
    return f"{len(result.applied)} step(s) applied, {result.unchanged} unchanged (strict)"


def _first_finding(build_report: Any) -> dict[str, Any] | None:
    from legacy_gpu_patch.report.reports import patchset_hint

    errors = build_report.error_findings
    if not errors:
        return None
    f = errors[0]
    hint = patchset_hint(f, build_report.recipe_patchsets)
    return {"category": f.category, "message": f.message, "where": f.where(), "log_line": f.log_line,
            "fix": f.fix, "patchsets": [p.strip() for p in hint.split(",") if p.strip()]}


def _build(opts: JobOptions, report: CiReport, state: dict[str, Any]) -> str:
    from legacy_gpu_patch.build.options import BuildRequest, resolve_options
    from legacy_gpu_patch.build.run import run_build
    from legacy_gpu_patch.build.runner import make_display
    from legacy_gpu_patch.classify.classifier import Classifier
    from legacy_gpu_patch.console import console
    from legacy_gpu_patch.report.reports import github_annotations

    cache = compcache.choose(opts.compiler_cache, opts.out / "tools")
    request = BuildRequest(python=opts.python, jobs=opts.jobs, launcher=cache.launcher,
                           report_dir=(opts.reports / "build").absolute())
    options = resolve_options(opts.work.absolute(), opts.recipe, dict(opts.params), request)
    before = compcache.snapshot(cache)
    try:
        classifier = Classifier()
        display = make_display(console(), classifier, quiet=opts.quiet)  # the build's output in the job's log
        outcome = run_build(options, display=display, classifier=classifier, env=cache.env(dict(os.environ)))
    finally:
        report.compiler_cache = compcache.stats(cache, before)
    br = outcome.report
    state["annotations"] = github_annotations(br)
    report.build = {"status": br.status, "exit_code": br.exit_code, "log": str(options.log_path),
                    "report": str(outcome.report_paths.get("json", "")), "duration_s": round(br.duration, 3),
                    "error_findings": len(br.error_findings), "first_finding": _first_finding(br),
                    "phases": [{"name": p.name, "status": p.status} for p in br.phases]}
    if outcome.interrupted:
        raise InterruptedBuild("the build was interrupted; the report was written")
    if outcome.failed is not None:
        cause = report.build["first_finding"]
        hint = f"first root cause: {cause['category']}: {cause['message'][:200]}" if cause else None
        raise BuildError(f"build command {outcome.failed.name} failed: {outcome.failed.reason}", hint=hint)
    wheels = [w for w in br.wheels if w.new]
    if len(wheels) != 1:
        raise BuildError(f"expected the build to write one wheel, found {len(wheels)}: "
                         f"{', '.join(Path(w.path).name for w in wheels) or 'none'}",
                         hint="the recipe's build.wheel_dir names where the wheel goes")
    state["built"] = Path(wheels[0].path)
    return f"{Path(wheels[0].path).name} in {br.duration:.0f} s"


def _ledger(opts: JobOptions) -> dict[str, Any]:
    from legacy_gpu_patch.ledger.plan import make_plan

    return {"recipe": opts.recipe.name, "recipe_digest": opts.recipe.digest, "params": opts.params,
            "steps": [{"step": p.step.key, "digest": p.digest} for p in make_plan(opts.recipe, dict(opts.params))
                      if p.selected]}


def _repair(opts: JobOptions, report: CiReport, state: dict[str, Any]) -> str:
    from legacy_gpu_patch.build.run import sha256_file
    from legacy_gpu_patch.ci import wheel

    wheels_dir = opts.out / "wheels"
    for old in wheels_dir.glob("*.whl"):
        old.unlink()  # a rerun into the same --out leaves only this job's wheel
    label = wheel.local_label(opts.params)
    fixed = wheel.repair(state["built"], label=label, out_dir=wheels_dir, ledger=_ledger(opts),
                         auditwheel=opts.auditwheel)
    bad = {m: [e for e in p if not e.startswith("$ORIGIN")] for m, p in fixed.runpaths.items()}
    if any(bad.values()):
        raise BuildError(f"the repaired wheel still has absolute run paths: {bad}")
    report.wheel = {"name": fixed.wheel.name, "path": str(fixed.wheel), "size": fixed.wheel.stat().st_size,
                    "sha256": sha256_file(fixed.wheel), "version": fixed.version, "label": label,
                    "built_as": fixed.original_name, "runpaths": fixed.runpaths, "runpath_fixes": fixed.fixed,
                    "auditwheel": fixed.auditwheel}
    report.notes += fixed.notes
    state["wheel"] = fixed.wheel
    return f"{fixed.wheel.name} (auditwheel: {'used' if fixed.auditwheel.get('used') else fixed.auditwheel['reason']})"


def constraints(recipe: Recipe, params: dict[str, Any]) -> list[str]:
    """The name==version pins of the build commands these parameters select: the smoke venv gets the same versions
    (and pip's cache the same downloads)."""
    from legacy_gpu_patch.config import conditions

    pins: list[str] = []
    for cmd in recipe.build.commands if recipe.build is not None else ():
        if conditions.evaluate(cmd.when, dict(params), recipe.param_kinds()).selected:
            pins += [a for a in cmd.argv if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+", str(a))]
    return sorted(set(pins))


def _smoke_only_setup(opts: JobOptions, report: CiReport, state: dict[str, Any]) -> None:
    from legacy_gpu_patch.build.run import sha256_file

    wheel = Path(opts.smoke_only or "")
    if not wheel.is_file() or wheel.suffix != ".whl":
        raise VerifyError(f"--smoke-only {wheel}: no such wheel file")
    for name in ("apply", "build", "repair"):
        report.stage(name).status, report.stage(name).detail = "skipped", "--smoke-only"
    report.wheel = {"name": wheel.name, "path": str(wheel.absolute()), "size": wheel.stat().st_size,
                    "sha256": sha256_file(wheel)}
    state["wheel"] = wheel.absolute()


def _smoke(opts: JobOptions, report: CiReport, state: dict[str, Any]) -> str:
    spec = smoke.BUILTIN.get(opts.recipe.name, smoke.SmokeSpec(()))
    result = smoke.run_smoke(state["wheel"], (opts.out / "smoke-venv").absolute(), spec, work=opts.work.absolute(),
                             constraints=constraints(opts.recipe, opts.params), cpu_code=opts.smoke_code)
    report.smoke = result.to_dict()
    failed = result.failed
    if failed is not None:
        raise VerifyError(f"smoke test {failed.name} of {state['wheel'].name} failed: {failed.detail[-1500:]}",
                          hint=f"reproduce: {result.venv}/bin/python -c CODE, CODE from smoke.cases in reports/ci.json")
    return ", ".join(f"{c.name} {c.status}" for c in result.cases)


def python_mismatch(params: dict[str, Any], python: str | None) -> str | None:
    """A note when the recipe was patched for another Python than the build's interpreter."""
    import subprocess

    wanted = str(params.get("python") or "")
    if not re.match(r"^\d+\.\d+", wanted):
        return None
    exe = python or sys.executable
    proc = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                          text=True)
    actual = proc.stdout.strip()
    if proc.returncode == 0 and actual and actual != ".".join(wanted.split(".")[:2]):
        return f"the tree is patched for python={wanted} but the build's interpreter {exe} is Python {actual}"
    return None
