"""Compile probes: each file a recipe's patchsets touch is compiled with the real compiler in the patched tree and
in a pristine checkout of the baseline, and the two outcomes are checked against what the recipe declares.

A probe proves a patch only when both halves hold: the patched file compiles (for every requested GPU
architecture), and the pristine one fails the way the field report says it fails (`expect_error`), or passes
where the probe says so. Probes that cannot compile on their own (CMake scripts, files needing a submodule) are
listed with their reason instead of being silently left out. One tree's side (toolchain, generated headers, one
compile) is probe_tree.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from legacy_gpu_patch.build.probe_tree import (
    CUDA_INCLUDE_ENV,
    Compiled,
    ProbeTree,
    Toolchain,
    configure_file,
    find_toolchain,
    wheel_include_dirs,
)
from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.verify_schema import Probe
from legacy_gpu_patch.errors import ConfigError, StateError
from legacy_gpu_patch.gitutil import die_with_parent

# Re-exported: `lgpatch verify` and the tests reach the tree side through this module.
__all__ = ["CUDA_INCLUDE_ENV", "Compiled", "ProbeResult", "Toolchain", "VerifyReport", "configure_file",
           "find_toolchain", "run_probes", "wheel_include_dirs"]

# ----------------------------------------------------------------------------------------- results


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
class VerifyReport:
    """What `lgpatch verify` found: one ProbeResult per probe and architecture (report.reports.Report is a build's)."""

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


# ----------------------------------------------------------------------------------------- pristine checkout


@contextmanager
def pristine_checkout(root: Path, commit: str, scratch: Path) -> Iterator[Path]:
    """A git worktree of `commit` (the baseline) beside the work tree's scratch data; removed afterwards."""
    target = scratch / "pristine"
    # Like every git child of lgpatch (gitutil.Git): killed with lgpatch, never left writing a half-made checkout.
    proc = subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", "--force", str(target), commit],
                          capture_output=True, text=True, preexec_fn=die_with_parent)
    if proc.returncode != 0:
        raise StateError(f"cannot check out the baseline {commit[:12]}: {proc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(target)],
                       capture_output=True, text=True, preexec_fn=die_with_parent)
        subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True, text=True,
                       preexec_fn=die_with_parent)


# ----------------------------------------------------------------------------------------- the run


def _applicable(probe: Probe, params: dict[str, Any], kinds: dict[str, str],
                arch: str | None) -> conditions.Verdict:
    values = dict(params)
    if arch is not None:
        values["arch"] = arch
    return conditions.evaluate(probe.when, values, kinds)


def _check_pristine(expected: str, pattern: str | None, res: Compiled) -> str | None:
    """Why the pristine outcome is not the declared one (`unpatched`, `expect_error`), or None."""
    if expected == "pass" and not res.ok:
        return f"pristine tree was expected to compile but fails: {res.first_error}"
    if expected == "fail":
        if res.ok:
            return "pristine tree was expected to fail but compiles: the probe does not show what the patch fixes"
        if pattern and not re.search(pattern, res.output):
            return f"pristine tree fails, but not with /{pattern}/: {res.first_error}"
    return None


Planned = list[tuple[Probe, Optional[str]]]  # (probe, arch or None for a host-only probe)


def _plan(selected: Sequence[Probe], params: dict[str, Any], kinds: dict[str, str], archs: Sequence[str],
          report: VerifyReport) -> Planned:
    """The (probe, arch) compiles that apply; the others are recorded in the report with their reason."""
    plan: Planned = []
    for probe in selected:
        if probe.skip:
            report.results.append(ProbeResult(probe.name, probe.file, None, "not-standalone", probe.skip))
            continue
        if probe.lang != "cuda":
            # A host-only probe runs once if it applies to any requested architecture.
            host_archs: list[str | None] = [*archs] or [None]
            verdicts = [_applicable(probe, params, kinds, a) for a in host_archs]
            if not any(v.selected for v in verdicts):
                report.results.append(ProbeResult(probe.name, probe.file, None, "not-applicable",
                                                  "; ".join(verdicts[0].reasons)))
                continue
            plan.append((probe, None))
            continue
        for arch in archs:
            verdict = _applicable(probe, params, kinds, arch)
            if not verdict.selected:
                report.results.append(ProbeResult(probe.name, probe.file, arch, "not-applicable",
                                                  "; ".join(verdict.reasons)))
            else:
                plan.append((probe, arch))
    return plan


def _runnable(plan: Planned, toolchain: Toolchain, report: VerifyReport) -> Planned:
    """Those whose required headers are found; the others are skipped with the reason."""
    runnable: Planned = []
    for probe, arch in plan:
        missing = [h for h in probe.requires if toolchain.find_header(h) is None]
        if missing:
            report.results.append(ProbeResult(
                probe.name, probe.file, arch, "skipped",
                f"header(s) {', '.join(missing)} not found in the toolkit or extra include folders "
                f"(install the nvidia-* wheels, or pass --cuda-include DIR / {CUDA_INCLUDE_ENV})"))
        else:
            runnable.append((probe, arch))
    return runnable


def run_probes(
    root: Path,
    baseline: str,
    recipe_name: str,
    probes: Sequence[Probe],
    params: dict[str, Any],
    kinds: dict[str, str],
    archs: Sequence[str],
    toolchain: Toolchain,
    only: Sequence[str] = (),
    keep: Path | None = None,
) -> VerifyReport:
    report = VerifyReport(str(root), baseline, recipe_name, dict(params), list(archs),
                    {"nvcc": toolchain.nvcc, "cxx": toolchain.cxx,
                     "cuda_home": str(toolchain.cuda_home) if toolchain.cuda_home else None,
                     "extra_includes": [str(p) for p in toolchain.extra_includes]})
    selected = [p for p in probes if not only or p.name in only]
    unknown = sorted(set(only) - {p.name for p in probes})
    if unknown:
        raise ConfigError(f"no probe named {', '.join(unknown)} in recipe {recipe_name}; it has: "
                          + ", ".join(p.name for p in probes))
    scratch = Path(tempfile.mkdtemp(prefix="lgpatch-verify-", dir=keep))
    try:
        runnable = _runnable(_plan(selected, params, kinds, archs, report), toolchain, report)
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


def _run_one(probe: Probe, arch: str | None, patched: ProbeTree, pristine: ProbeTree) -> ProbeResult:
    name, rel = probe.name, probe.file
    if not (patched.root / rel).is_file():
        return ProbeResult(name, rel, arch, "wrong", f"{rel} does not exist in the patched tree")
    failure = patched.setup(probe.setup)
    if failure:
        if failure.tool_missing:
            return ProbeResult(name, rel, arch, "skipped", failure.text)
        return ProbeResult(name, rel, arch, "wrong", f"patched tree: {failure.text}")
    res_patched = patched.compile(probe, arch)
    if not res_patched.ok:
        return ProbeResult(name, rel, arch, "wrong", f"patched tree fails: {res_patched.first_error}", res_patched)
    if not (pristine.root / rel).is_file():
        # The patch created the file: the pristine tree cannot compile what it does not have.
        ok = probe.unpatched in ("fail", "any")
        return ProbeResult(name, rel, arch, "ok" if ok else "wrong",
                           f"{rel} does not exist in the pristine tree", res_patched)
    failure = pristine.setup(probe.setup)
    if failure:
        ok = probe.unpatched in ("fail", "any") and not probe.expect_error
        return ProbeResult(name, rel, arch, "ok" if ok else "wrong", f"pristine tree: {failure.text}", res_patched)
    res_pristine = pristine.compile(probe, arch)
    problem = _check_pristine(probe.unpatched, probe.expect_error, res_pristine)
    if problem:
        return ProbeResult(name, rel, arch, "wrong", problem, res_patched, res_pristine)
    how = "fails as declared" if not res_pristine.ok else "compiles"
    return ProbeResult(name, rel, arch, "ok", f"patched compiles; pristine {how}", res_patched, res_pristine)
