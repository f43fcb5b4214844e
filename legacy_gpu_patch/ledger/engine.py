"""apply / revert / export: the operations that change a work tree, built on the ledger (worktree.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch import console
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.config.source_schema import GitSource
from legacy_gpu_patch.errors import DirtyTreeError, LgpatchError, StateError
from legacy_gpu_patch.ledger import steps
from legacy_gpu_patch.ledger.create import create_tree, creating, is_empty_dir
from legacy_gpu_patch.ledger.plan import PlannedStep, make_plan
from legacy_gpu_patch.ledger.worktree import WorkTree, format_params


@dataclass(frozen=True)
class ApplyOptions:
    workdir: Path
    params: dict[str, Any]
    strict: bool
    stash: bool = False
    source: Path | None = None
    offline: bool = False
    submodules: bool | None = None


@dataclass
class ApplyReport:
    workdir: Path
    created: bool = False
    rewound_to: str | None = None
    applied: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stashed: bool = False
    kept_branch: str | None = None


def _check_clean(wt: WorkTree, stash: bool, report: ApplyReport, action: str) -> None:
    dirty = wt.dirty_paths()
    if not dirty:
        return
    if stash:
        with wt.journal("stash"):  # git stash takes index.lock and resets the tree: a kill here must be repairable
            wt.git.run("stash", "push", "--include-untracked", "--quiet", "-m", f"lgpatch: your edits before {action}")
        report.stashed = True
        report.notes.append(
            f"your uncommitted edits ({len(dirty)} path(s)) are kept in the newest git stash entry "
            "(`git stash list`; bring them back with `git stash pop`)"
        )
        return
    shown = "\n".join(f"    {p}" for p in dirty[:10])
    if len(dirty) > 10:
        shown += f"\n    … and {len(dirty) - 10} more"
    raise DirtyTreeError(
        f"{action} could overwrite these edits in {wt.root}:\n{shown}",
        hint="commit them, or re-run with --stash to keep them in a git stash",
    )


def _commit_message(recipe: Recipe, planned: PlannedStep, params: dict[str, Any], messages: list[str]) -> str:
    step = planned.step
    subject = f"lgpatch: {step.key}"
    lines = [subject, ""]
    if step.description:
        lines += [step.description.strip(), ""]
    lines += [f"  {m}" for m in messages] + ([""] if messages else [])
    lines += [
        f"Lgpatch-Recipe: {recipe.name}",
        f"Lgpatch-Patchset: {step.patchset}",
        f"Lgpatch-Step: {step.key}",
        f"Lgpatch-Digest: {planned.digest}",
        f"Lgpatch-Params: {format_params(params)}",
    ]
    return "\n".join(lines) + "\n"


def apply_step(wt: WorkTree, recipe: Recipe, planned: PlannedStep, ctx: steps.StepContext) -> steps.StepOutcome:
    """One step, atomically: either a new commit holds all of it, or the tree is as before."""
    with wt.journal("step", step=planned.step.key, digest=planned.digest):
        try:
            outcome = steps.run(ctx, planned.step)
        except BaseException:
            # Roll back whatever this step wrote; the tree was clean when it started.
            wt.git.run("reset", "--quiet", "--hard", "HEAD")
            wt.git.run("clean", "--quiet", "-fd")
            # Rolled back: the tree is at a step boundary again, so no repair is owed. A journal left here would make
            # the next command take the user's own fix (typically made right after this failure) for the leftovers
            # of a killed step and set it aside.
            wt.journal_path.unlink(missing_ok=True)
            raise
        wt.git.commit_paths(outcome.touched, _commit_message(recipe, planned, ctx.params, outcome.messages))
    return outcome


def apply(recipe: Recipe, opts: ApplyOptions) -> ApplyReport:
    report = ApplyReport(opts.workdir)
    wt: WorkTree | None = None
    if not opts.workdir.exists() or is_empty_dir(opts.workdir):
        with creating(opts.workdir) as ours:
            if ours:
                wt, prepared = create_tree(recipe, opts)
                report.created = True
                report.notes += list(prepared.notes)
    if wt is None:
        wt = _open_existing(recipe, opts)
    try:
        return _apply_in(wt, recipe, opts, report)
    finally:
        wt.release_lock()


def _open_existing(recipe: Recipe, opts: ApplyOptions) -> WorkTree:
    if not (opts.workdir / ".git" / "lgpatch" / "state.json").is_file():
        raise StateError(
            f"{opts.workdir} exists and is not an lgpatch work tree",
            hint="choose a new or empty folder with --workdir",
        )
    wt = WorkTree.open(opts.workdir)
    try:
        if wt.state.recipe != recipe.name:
            raise StateError(
                f"{wt.root} was made for recipe {wt.state.recipe}, not {recipe.name}",
                hint="use another --workdir for a different recipe",
            )
        expected = _source_description(recipe)
        if wt.state.source != expected:
            raise StateError(
                f"{wt.root} was made from {wt.state.source}; the recipe now pins {expected}",
                hint="the pristine baseline cannot change in place: use a new --workdir",
            )
    except BaseException:
        wt.release_lock()
        raise
    return wt


def apply_open(wt: WorkTree, recipe: Recipe, opts: ApplyOptions) -> ApplyReport:
    """apply() on a tree the caller already holds open and locked (refresh re-applies the steps after an edit)."""
    return _apply_in(wt, recipe, opts, ApplyReport(wt.root))


def _source_description(recipe: Recipe) -> str:
    """Must match what sources.prepare_* record, so a changed pin is noticed on an existing tree."""
    src = recipe.source
    if isinstance(src, GitSource):
        return f"git {src.url} {src.ref} @ {src.commit}"
    return f"sdist {src.label} sha256:{src.sha256}"


def _apply_in(wt: WorkTree, recipe: Recipe, opts: ApplyOptions, report: ApplyReport) -> ApplyReport:
    plan = make_plan(recipe, opts.params)
    selected = [p for p in plan if p.selected]
    report.skipped = [{"step": p.step.key, "reasons": list(p.reasons)} for p in plan if not p.selected]
    ledger = wt.ledger()
    if ledger.foreign:
        raise StateError(
            f"{wt.root} has {len(ledger.foreign)} commit(s) after the lgpatch steps that lgpatch did not make "
            f"(first: {ledger.foreign[0][:12]}); refusing to move the branch under them",
            hint="move your commits to another branch (git branch mywork; git reset --hard <last lgpatch commit>)",
        )
    # How many applied steps still match the plan, in order?
    keep = 0
    for applied, planned in zip(ledger.applied, selected):
        if applied.key != planned.step.key or applied.digest != planned.digest:
            break
        keep += 1
    wt.state.params = opts.params
    wt.state.recipe_file = str(recipe.path.resolve())
    wt.save_state()
    if keep == len(ledger.applied) == len(selected):
        report.unchanged = keep
        return report
    if not report.created:  # a tree made a moment ago is pristine: skip the full-tree `git status` walk
        _check_clean(wt, opts.stash, report, "apply")
    if keep < len(ledger.applied):
        target = ledger.applied[keep - 1].commit if keep else wt.baseline
        with wt.journal("rewind", target=target):
            wt.git.run("reset", "--quiet", "--hard", target)
        report.rewound_to = ledger.applied[keep - 1].key if keep else "baseline"
    report.unchanged = keep
    ctx = steps.StepContext(
        root=wt.root,
        git=wt.git,
        recipe=recipe,
        params=opts.params,
        strict=opts.strict,
        source_dir=Path(wt.state.source_dir) if wt.state.source_dir else opts.source,
        offline=opts.offline,
    )
    for planned in selected[keep:]:
        try:
            outcome = apply_step(wt, recipe, planned, ctx)
        except LgpatchError:
            console.info(f"[red]✗[/red] {planned.step.key}")
            raise
        for w in outcome.warnings:
            console.warn(w)
        report.warnings += outcome.warnings
        report.applied.append({"step": planned.step.key, "messages": outcome.messages})
        console.info(f"[green]✓[/green] {planned.step.key}: {'; '.join(outcome.messages)}")
    return report


def _user_commits(wt: WorkTree) -> list[str]:
    """Commits on top of the applied steps that lgpatch did not make, as `abc123def456 subject` lines."""
    foreign = wt.ledger().foreign
    return [wt.git.out("log", "-1", "--format=%h %s", "--abbrev=12", sha) for sha in foreign]


def revert(wt: WorkTree, stash: bool, keep_branch: str | None = None) -> ApplyReport:
    """Back to the pristine baseline. Commits of the user's on top are never dropped: refused (exit 7) unless
    `keep_branch` names a new branch to keep them on."""
    report = ApplyReport(wt.root)
    mine = _user_commits(wt)
    if mine and not keep_branch:
        shown = "\n".join(f"    {c}" for c in mine[:10])
        if len(mine) > 10:
            shown += f"\n    … and {len(mine) - 10} more"
        raise StateError(
            f"{wt.root} has {len(mine)} commit(s) of yours on top of the lgpatch steps; revert would drop them:\n"
            f"{shown}",
            hint="re-run with --keep-commits BRANCH to keep them on a new branch BRANCH, "
            "or move them yourself (git branch mywork)",
        )
    if mine and keep_branch:
        _check_new_branch(wt, keep_branch)
    _check_clean(wt, stash, report, "revert")
    keep = keep_branch if mine else None
    with wt.journal("reset", target=wt.baseline, **({"keep_branch": keep} if keep else {})):
        if keep:
            wt.git.run("branch", keep, "HEAD")
        wt.git.run("reset", "--quiet", "--hard", wt.baseline)
    if keep:
        report.notes.append(f"your {len(mine)} commit(s) on top of the steps are kept on branch {keep} "
                            f"(`git log {keep}`)")
        report.kept_branch = keep
    return report


def _check_new_branch(wt: WorkTree, name: str) -> None:
    if wt.git.run("check-ref-format", "--branch", name, check=False).returncode != 0:
        raise StateError(f"--keep-commits {name!r}: not a valid branch name")
    if wt.git.rev(f"refs/heads/{name}") is not None:
        raise StateError(f"--keep-commits {name}: the branch already exists; nothing was changed",
                         hint="choose a new branch name")


def export(wt: WorkTree, dest: Path) -> list[str]:
    """The applied steps as a `git format-patch` series plus a quilt `series` file, in order."""
    dest.mkdir(parents=True, exist_ok=True)
    out = wt.git.out(
        "format-patch", "--binary", "--no-signature", "--full-index", "-o", str(dest.resolve()),
        f"{wt.baseline}..HEAD",
    )
    names = [Path(line).name for line in out.splitlines() if line.strip()]
    (dest / "series").write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
    return names
