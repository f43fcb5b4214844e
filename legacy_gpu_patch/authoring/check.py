"""`lgpatch check RECIPE --ref OTHER_TAG`: does the recipe's series still apply to another upstream version?

The series is applied twice in scratch clones (shared objects, so cheap even for PyTorch): once at the recipe's pin
(the "then" column) and once at OTHER_TAG ("now"). Per step: exact / offset / fuzz / fails (file missing, hunk not
found, anchor or pattern gone) — and for regex steps the number of matches then and now, since a rename that now
hits 770 places instead of 774 applies "cleanly" and is still wrong. A step that fails is skipped and the rest go on,
so one report shows every step that needs work. The user's own trees are never touched.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config import globs
from legacy_gpu_patch.config.recipe import Recipe, Step
from legacy_gpu_patch.errors import ConfigError, LgpatchError, SourceError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.ledger import patchfile, steps
from legacy_gpu_patch.ledger.plan import make_plan
from legacy_gpu_patch.source import cache, mirrors


@dataclass
class StepCheck:
    step: str
    kind: str
    status: str  # exact | offset | fuzz | fails | skipped
    detail: str = ""
    hunks: list[dict[str, Any]] = field(default_factory=list)
    status_then: str | None = None
    matches_then: int | None = None
    matches_now: int | None = None


@dataclass
class CheckReport:
    recipe: str
    pinned: str  # ref @ commit of the recipe
    other: str  # OTHER_TAG
    other_commit: str
    steps: list[StepCheck]
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[StepCheck]:
        return [s for s in self.steps if s.status == "fails"]

    def to_dict(self) -> dict[str, Any]:
        counts = {k: sum(1 for s in self.steps if s.status == k) for k in ("exact", "offset", "fuzz", "fails",
                                                                             "skipped")}
        return {"recipe": self.recipe, "pinned": self.pinned, "ref": self.other, "commit": self.other_commit,
                "summary": counts, "steps": [asdict(s) for s in self.steps], "notes": self.notes}


def _field(body: Any, name: str, default: Any = None) -> Any:
    """A step body's field, whether the body is a mapping or a typed object."""
    if isinstance(body, dict):
        return body.get(name, default)
    return getattr(body, name, default)


def _store_for(recipe: Recipe, ref: str, source: Path | None, commit: str | None) -> tuple[Path, str, list[str]]:
    """A local object store with both the pinned commit and OTHER_TAG; the commit OTHER_TAG names."""
    src = recipe.source
    url, pinned = _field(src, "url"), _field(src, "commit")
    notes: list[str] = []
    if source is not None:
        store = source.resolve()
        if Git(store).rev(pinned) is None:
            raise SourceError(f"--source {source}: the recipe's pinned commit {pinned[:12]} is not in it")
    else:
        store = mirrors.mirror_holding(url, pinned, False, f"{url} {_field(src, 'ref')}")
        if commit is None or Git(store).rev(commit) is None:
            try:
                mirrors.fetch_into(store, url, [f"+refs/tags/{ref}:refs/tags/{ref}"])
            except SourceError:
                if commit is None:
                    raise
    git = Git(store)
    tagged = git.rev(f"refs/tags/{ref}") or git.rev(f"refs/heads/{ref}") or git.rev(f"refs/remotes/origin/{ref}")
    if commit is not None:
        if git.rev(commit) is None:
            raise SourceError(f"commit {commit} is not in {store}")
        full = git.rev(commit) or commit
        if tagged is not None and tagged != full:
            raise SourceError(f"{ref} resolves to {tagged}, not to the given --commit {full}",
                              hint="a moved tag is an attack or a mistake; check upstream")
        if tagged is None:
            notes.append(f"{ref} is not a ref of {store}; checked commit {full[:12]} directly")
        return store, full, notes
    if tagged is None:
        raise SourceError(f"{url if source is None else store} has no tag or branch {ref!r}")
    return store, tagged, notes


def _scratch(store: Path, commit: str, dest: Path) -> Git:
    Git(dest.parent).run("clone", "--quiet", "--shared", "--no-checkout", str(store), str(dest))
    tree = Git(dest)
    tree.run("checkout", "--quiet", "--detach", commit)
    return tree


def count_matches(root: Path, git: Git, body: Any) -> int:
    """How many places a regex step's pattern matches in the tree (the same files and regex as the step uses)."""
    pattern = _field(body, "pattern")
    source = rf"\b(?:{pattern})\b" if _field(body, "word", True) else pattern
    regex = re.compile(source.encode(), re.MULTILINE)
    files = globs.select(git.ls_files(), _field(body, "files"), _field(body, "exclude", []) or [])
    if re.escape(pattern) == pattern:  # a literal: git grep finds the few files holding it (as the regex step does)
        holding = set(git.files_containing(pattern.encode()))
        files = [rel for rel in files if rel in holding]
    total = 0
    for rel in files:
        full = root / rel
        if full.is_symlink() or not full.is_file():
            continue
        total += len(regex.findall(full.read_bytes()))
    return total


_MISSING = re.compile(r"changes (.+?), which does not exist in the tree")
_HUNK = re.compile(r"hunk #(\d+) of (\S+) does not apply to (.+)\n\s*hunk: (@@[^\n]*)")


def failure_detail(exc: LgpatchError) -> str:
    m = _MISSING.search(exc.message)
    if m:
        return f"file missing: {m.group(1)}"
    m = _HUNK.search(exc.message)
    if m:
        return f"hunk not found: hunk #{m.group(1)} in {m.group(3)} ({m.group(4)})"
    first = exc.message.split("\n", 1)[0]
    return first.split(": ", 1)[1] if ": " in first else first  # drop the leading "patchset/step: "


def _patch_text(step: Step) -> tuple[str, int, str]:
    if step.kind == "patch":
        rel = str(_field(step.body, "path", step.body))  # PatchBody.path (a plain name in older recipes' objects)
        return (step.base_dir / rel).read_bytes().decode("utf-8", "surrogateescape"), 1, rel
    url, sha = _field(step.body, "url"), _field(step.body, "sha256")
    path = cache.fetch_url(url, sha, f"patch for step {step.key}")
    return path.read_bytes().decode("utf-8", "surrogateescape"), int(_field(step.body, "strip", 1)), url


def try_step(ctx: steps.StepContext, step: Step) -> StepCheck:
    """Apply one step in a scratch tree and say how it went; a failure leaves the tree as it was."""
    result = StepCheck(step.key, step.kind, "exact")
    if step.kind == "regex":
        result.matches_now = count_matches(ctx.root, ctx.git, step.body)
    try:
        if step.kind in ("patch", "url-patch"):
            text, strip, name = _patch_text(step)
            computed = patchfile.compute(ctx.root, text, patchfile.Origin(step.patchset, step.id, name), strip)
            result.hunks = [asdict(h) for h in computed.hunks]
            touched = patchfile.write_changes(ctx.root, computed.changes)
            worst = max(((1 if h.fuzz else 0, abs(h.offset)) for h in computed.inexact), default=None)
            if worst:
                result.status = "fuzz" if worst[0] else "offset"
                result.detail = "; ".join(f"{h.file} {h.header}: " + (f"fuzz {h.fuzz}, " if h.fuzz else "")
                                          + f"offset {h.offset:+d}" for h in computed.inexact)
            else:
                result.detail = f"{len(computed.hunks)} hunk(s)"
        else:
            outcome = steps.run(ctx, step)
            touched = outcome.touched
            result.detail = "; ".join(outcome.messages)
    except LgpatchError as exc:
        ctx.git.run("reset", "--quiet", "--hard", "HEAD")
        ctx.git.run("clean", "--quiet", "-fd")
        result.status, result.detail = "fails", failure_detail(exc)
        return result
    ctx.git.commit_paths(touched, f"check: {step.key}\n")
    return result


def check(recipe: Recipe, params: dict[str, Any], ref: str, source: Path | None = None,
          commit: str | None = None) -> CheckReport:
    if recipe.source_kind != "git":
        raise ConfigError(f"recipe {recipe.name} has an sdist source; check compares git versions (--ref TAG)",
                          hint="write a git recipe for the project (lgpatch new-recipe --git URL --ref TAG)")
    store, other, notes = _store_for(recipe, ref, source, commit)
    plan = make_plan(recipe, params)
    src = recipe.source
    report = CheckReport(recipe.name, f"{_field(src, 'ref')} @ {_field(src, 'commit')}", ref, other, [], notes)
    scratch = Path(tempfile.mkdtemp(prefix="lgpatch-check-"))
    try:
        then_git = _scratch(store, _field(src, "commit"), scratch / "then")
        now_git = _scratch(store, other, scratch / "now")
        for planned in plan:
            if not planned.selected:
                report.steps.append(StepCheck(planned.step.key, planned.step.kind, "skipped",
                                              "; ".join(planned.reasons)))
                continue
            then = try_step(_ctx(then_git, recipe, params, store), planned.step)
            now = try_step(_ctx(now_git, recipe, params, store), planned.step)
            now.status_then, now.matches_then = then.status, then.matches_now
            report.steps.append(now)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report


def _ctx(git: Git, recipe: Recipe, params: dict[str, Any], store: Path) -> steps.StepContext:
    return steps.StepContext(root=git.root, git=git, recipe=recipe, params=params, strict=False, source_dir=store)
