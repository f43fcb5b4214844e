"""Recipe fit for `lgpatch doctor`: which recipes this machine's toolkits and GPUs can build and run, and for one
recipe with its parameters, why not (the problems set ExitCode.DOCTOR)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda import targets
from legacy_gpu_patch.cuda.archflags import flags_for
from legacy_gpu_patch.cuda.coverage import coverage
from legacy_gpu_patch.cuda.findings import ERROR, DoctorReport, compiler_findings
from legacy_gpu_patch.cuda.machine import Gpu
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo
from legacy_gpu_patch.cuda.toolchain import default_host_compiler

if TYPE_CHECKING:  # the doctor engine stays stdlib-only at run time: recipes are imported when they are read
    from legacy_gpu_patch.config.recipe import Recipe
    from legacy_gpu_patch.config.search import SearchPath


def recipe_fit(recipe: Recipe, nvccs: Sequence[NvccInfo], gpus: Sequence[Gpu], driver: str | None = None,
               driver_cuda: str | None = None) -> dict[str, Any]:
    """Which of this machine's toolkits and GPUs a recipe's `cuda` / `arch` parameters accept (and the driver
    runs)."""
    from legacy_gpu_patch.config.recipe import param_problem

    reasons: list[str] = []
    cuda_p = recipe.params.get("cuda")
    arch_p = recipe.params.get("arch")
    versions = [n.version for n in nvccs if n.version]
    if cuda_p is None:
        usable = versions
    else:
        usable = [v for v in versions if param_problem(cuda_p, v) is None]
        want = cuda_p.allowed or (", ".join(map(str, cuda_p.choices)) if cuda_p.choices else cuda_p.default)
        if not usable:
            reasons.append(f"needs CUDA {want}; found {', '.join(versions) or 'no nvcc'}")
    runnable: list[str] = []
    for g in gpus:
        if not g.number:
            continue
        sm = f"sm_{g.number}"
        if arch_p is not None and param_problem(arch_p, sm) is not None:
            reasons.append(f"arch {sm} (GPU {g.index}) is not among its arch values "
                           f"({arch_p.allowed or ', '.join(map(str, arch_p.choices or [arch_p.default]))})")
            continue
        plans = {v: targets.plan(v, g.number, driver=driver, driver_cuda=driver_cuda,
                                 nvcc=next((n for n in nvccs if n.version == v), None)) for v in usable}
        ok = [v for v, p in plans.items() if p.runnable]
        if ok:
            runnable.append(f"GPU {g.index} {sm} with CUDA {', '.join(ok)}")
        for v, p in plans.items():
            if not p.buildable:
                reasons.append(f"CUDA {v} emits no code for {sm}")
            elif not p.runnable and p.driver is not None:
                reasons.append(f"CUDA {v} on GPU {g.index}: {p.driver.message.split('. ')[0]}")
    if gpus and not runnable and not reasons:
        reasons.append("no GPU it can run on")
    fits = bool(usable) and (not gpus or bool(runnable))
    return {"name": recipe.name, "fits": fits, "runs_on": runnable, "cuda_versions": usable, "reasons": reasons}


def check_recipe(recipe: Recipe, params: Mapping[str, Any], report: DoctorReport,
                 env: Mapping[str, str]) -> dict[str, Any]:
    """Can this machine build and run `recipe` with `params` (resolved values)? Errors → ExitCode.DOCTOR."""
    problems: list[str] = []
    warnings: list[str] = []
    cuda = params.get("cuda")
    arch = params.get("arch")
    nvcc = None
    if cuda is not None:
        mm = ck.major_minor(str(cuda))
        nvcc = next((n for n in report.nvccs if n.version and ck.major_minor(n.version) == mm), None)
        if nvcc is None:
            found = ", ".join(n.version or "?" for n in report.nvccs) or "none"
            problems.append(f"recipe {recipe.name} wants CUDA {mm}; no nvcc {mm} on this machine (found: {found})")
        else:
            host = default_host_compiler(report.compilers, env)
            for f in compiler_findings(nvcc, report.host_limits.get(nvcc.path, {}), host, report.compilers):
                if f.severity == ERROR:
                    problems.append(f"{f.message}; fix: {f.fix}")
    toolkit = ck.major_minor(str(cuda)) if cuda is not None else (report.nvccs[0].version if report.nvccs else None)
    arch_flags = None
    if arch is not None and toolkit is not None:
        sass_set, ptx_set, _src, _notes = targets.target_sets(toolkit, nvcc)
        try:
            arch_flags = flags_for(str(arch))  # one target or a list (sm_80,sm_86,sm_89,sm_90+ptx)
            unknown = [t for t in arch_flags.sass_archs if t not in sass_set] + [t for t in arch_flags.ptx_archs
                                                                                  if t not in ptx_set]
            if unknown:
                problems.append(f"CUDA {toolkit} does not know {', '.join(unknown)} (arch={arch})")
        except ValueError as exc:
            problems.append(str(exc))
    if not report.gpus.gpus:
        warnings.append("no GPU here: the build can be checked, running it cannot")
    for g in report.gpus.gpus:
        if not g.number or toolkit is None:
            continue
        p = targets.plan(toolkit, g.number, driver=report.gpus.driver, driver_cuda=report.gpus.driver_cuda,
                         nvcc=nvcc)
        if not p.buildable:
            problems.append(f"GPU {g.index} {g.name}: {p.reasons[0]}")
            continue
        if p.driver is not None and p.driver.status == targets.DRIVER_REFUSE:
            problems.append(f"GPU {g.index} {g.name}: {p.driver.message}")
        if arch_flags is not None:
            runs = coverage(arch_flags, g.number)  # any target of a list may be the one that runs
            if runs.status == targets.IMPOSSIBLE:
                problems.append(f"arch={arch} builds code that does not run on GPU {g.index} {g.name} "
                                f"(sm_{g.number}); with CUDA {toolkit} pass --param arch={p.targets[0]}")
            elif runs.needs_jit:
                warnings.append(f"arch={arch} runs on GPU {g.index} only through PTX JIT; set up the JIT cache "
                                "(lgpatch jit-cache env)")
    return {"recipe": recipe.name, "params": {k: str(v) for k, v in params.items()}, "ok": not problems,
            "problems": problems, "warnings": warnings}


def add_recipes(report: DoctorReport, search: SearchPath | None) -> None:
    try:
        from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
        from legacy_gpu_patch.errors import LgpatchError
    except ImportError as exc:  # PyYAML etc. absent (the stdlib-only entry point)
        report.recipes_note = f"recipes skipped: {exc}"
        return
    search = search or SearchPath.from_options()
    try:
        files = search.recipe_files()
    except OSError as exc:
        report.recipes_note = f"recipes skipped: {exc}"
        return
    for f in files:
        try:
            r = load_recipe(f, search)
        except LgpatchError as exc:
            report.recipes.append({"name": f.stem, "fits": False, "runs_on": [], "cuda_versions": [],
                                   "reasons": [f"invalid recipe: {exc.message}"]})
            continue
        report.recipes.append(recipe_fit(r, report.nvccs, report.gpus.gpus, report.gpus.driver,
                                         report.gpus.driver_cuda))
