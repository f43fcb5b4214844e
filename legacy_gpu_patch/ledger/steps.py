"""The step kinds. Each computes its whole effect first and writes only when it can complete.

A step returns the tree-relative paths it wrote or deleted; the ledger (worktree.py) stages exactly those paths and
commits them as one commit. If the process dies while a step writes, the journal lets the next command repair the
tree back to the last complete step.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config import conditions, globs
from legacy_gpu_patch.config.patchset import BackportBody, InsertBody, PatchBody, RegexBody, Step, UrlPatchBody
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.config.source_schema import GitSource
from legacy_gpu_patch.errors import ConfigError, PatchError, SourceError, UnsafePathError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.ledger import patchfile, treewrite
from legacy_gpu_patch.safepath import resolve_inside
from legacy_gpu_patch.source import cache


@dataclass(frozen=True)
class StepContext:
    root: Path
    git: Git
    recipe: Recipe
    params: dict[str, Any]
    strict: bool
    source_dir: Path | None  # the local clone or mirror the tree came from (backports look there first)
    offline: bool = False


@dataclass
class StepOutcome:
    touched: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _render(text: str, ctx: StepContext, step: Step) -> str:
    try:
        return conditions.render(text, ctx.params)
    except KeyError as exc:
        raise ConfigError(
            f"{step.source_file}:{step.line}: step {step.id}: ${{{exc.args[0]}}} is not a parameter of "
            f"recipe {ctx.recipe.name}"
        ) from None


# ------------------------------------------------------------------------------------------------ patch


def _apply_diff(ctx: StepContext, step: Step, text: str, patch_name: str, strip: int = 1) -> StepOutcome:
    origin = patchfile.Origin(step.patchset, step.id, patch_name)
    result = patchfile.compute(ctx.root, text, origin, strip=strip)
    outcome = StepOutcome()
    for h in result.inexact:
        detail = f"{h.file}: {h.header}: offset {h.offset:+d} line(s), fuzz {h.fuzz}"
        if ctx.strict:
            raise PatchError(
                f"{step.key}: {patch_name} applies only inexactly (strict mode): {detail}",
                hint="refresh the patch against this tree, or run without --strict to accept offset/fuzz",
            )
        outcome.warnings.append(f"{step.key}: {detail}")
    outcome.touched = treewrite.write_changes(ctx.root, result.changes)
    outcome.messages.append(
        f"{len(result.changes)} file(s), {len(result.hunks)} hunk(s)"
        + (f", {len(result.inexact)} inexact" if result.inexact else ", all exact")
    )
    return outcome


def _read_patch(path: Path, step: Step) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError as exc:
        raise ConfigError(f"{step.source_file}:{step.line}: cannot read patch {path}: {exc.strerror}") from None


def run_patch(ctx: StepContext, step: Step) -> StepOutcome:
    body = step.body
    assert isinstance(body, PatchBody)
    return _apply_diff(ctx, step, _read_patch(step.base_dir / body.path, step), body.path)


def run_url_patch(ctx: StepContext, step: Step) -> StepOutcome:
    body = step.body
    assert isinstance(body, UrlPatchBody)
    path = cache.fetch_url(body.url, body.sha256, f"patch for step {step.key}")
    return _apply_diff(ctx, step, _read_patch(path, step), body.url.rsplit("/", 1)[-1], body.strip)


# ------------------------------------------------------------------------------------------------ regex


def _literal_of(pattern: str) -> bytes | None:
    """The pattern itself when it has no regex syntax: then `in` on bytes is a cheap exact prefilter."""
    return pattern.encode() if re.escape(pattern) == pattern else None


def run_regex(ctx: StepContext, step: Step) -> StepOutcome:
    body = step.body
    assert isinstance(body, RegexBody)
    pattern = body.pattern
    source = rf"\b(?:{pattern})\b" if body.word else pattern
    try:
        regex = re.compile(source.encode(), re.MULTILINE)
    except re.error as exc:
        raise ConfigError(f"{step.source_file}:{step.line}: step {step.id}: bad pattern: {exc}") from None
    replacement = _render(body.replace, ctx, step).encode()
    literal = _literal_of(pattern)
    files = globs.select(ctx.git.ls_files(), body.files, body.exclude)
    scan = files
    if literal is not None:
        # A literal pattern: let git grep (multi-threaded, C) find the few files that contain it, instead of
        # opening every file of a 10k-file tree in Python. The regex below still decides what is replaced.
        holding = set(ctx.git.files_containing(literal))
        # git grep reads a symlink's own text, not its target: links are always looked at (see below).
        scan = [rel for rel in files if rel in holding or os.path.islink(ctx.root / rel)]
    changed: dict[str, bytes] = {}
    total = 0
    for rel in scan:
        full = ctx.root / rel
        if full.is_symlink():
            # A link is not text to rewrite: one into the tree is matched through its target anyway; one out of
            # the tree would make the step write outside it, which is refused when the pattern would apply there.
            target = full.resolve()
            if ctx.root.resolve() not in target.parents and target.is_file() and regex.search(target.read_bytes()):
                raise UnsafePathError(f"{step.key}: {rel} links to {target}, outside the work tree; not rewritten")
            continue
        try:
            data = full.read_bytes()
        except (IsADirectoryError, FileNotFoundError):
            continue  # a submodule entry or a file the index lists but the tree lacks
        if literal is not None and literal not in data:
            continue
        try:
            new, n = regex.subn(replacement, data)
        except (re.error, IndexError) as exc:
            raise ConfigError(f"{step.source_file}:{step.line}: step {step.id}: bad replacement: {exc}") from None
        if n:
            changed[rel] = new
            total += n
    outcome = StepOutcome()
    summary = f"{total} replacement(s) in {len(changed)} file(s) of {len(files)} matched by {', '.join(body.files)}"
    if body.count is not None and body.count != total:
        raise PatchError(
            f"{step.key}: expected {body.count} replacement(s) of {pattern!r}, found {total} "
            f"in {len(changed)} file(s); the tree was left as it was",
            hint="the source differs from the one this step was written for",
        )
    if total == 0:
        if body.on_missing == "error":
            raise PatchError(
                f"{step.key}: pattern {pattern!r} matched nothing in {len(files)} file(s) "
                f"({', '.join(body.files)}); the tree was left as it was",
                hint="set on_missing: warn or ignore if this is expected for some sources",
            )
        if body.on_missing == "warn":
            outcome.warnings.append(f"{step.key}: pattern {pattern!r} matched nothing")
    for rel in changed:
        resolve_inside(ctx.root, rel, step.key)
    outcome.touched = [treewrite.write_file(ctx.root, rel, data, what=step.key) for rel, data in changed.items()]
    outcome.messages.append(summary)
    return outcome


# ------------------------------------------------------------------------------------------------ insert


def run_insert(ctx: StepContext, step: Step) -> StepOutcome:
    body = step.body
    assert isinstance(body, InsertBody)
    rel = body.file
    target = resolve_inside(ctx.root, rel, step.key)
    outcome = StepOutcome()
    if not target.is_file():
        if body.on_missing == "error":
            raise PatchError(f"{step.key}: {rel} does not exist; the tree was left as it was")
        if body.on_missing == "warn":
            outcome.warnings.append(f"{step.key}: {rel} does not exist, nothing inserted")
        return outcome
    text = _render(body.text, ctx, step)
    if not text.endswith("\n"):
        text += "\n"
    content = target.read_bytes().decode("utf-8", errors="surrogateescape")
    if text.strip() and text.strip() in content:
        outcome.messages.append(f"{rel}: already present, nothing to do")
        return outcome
    anchors = [(k, a) for k, a in (("after", body.after), ("before", body.before)) if a]
    where = body.at or ("end" if not anchors else None)
    if len(anchors) + (1 if body.at else 0) > 1:
        raise ConfigError(f"{step.source_file}:{step.line}: step {step.id}: give one of after, before or at")
    if where == "end":
        new = content + ("" if not content or content.endswith("\n") else "\n") + text
        placed = "at end of file"
    elif where == "start":
        new = text + content
        placed = "at start of file"
    else:
        kind, anchor = anchors[0]
        regex = re.compile(anchor, re.MULTILINE)
        lines = content.splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r\n"))]
        if not hits:
            if body.on_missing == "error":
                raise PatchError(
                    f"{step.key}: anchor {anchor!r} not found in {rel}; the tree was left as it was",
                    hint="the file differs from the one this step was written for",
                )
            if body.on_missing == "warn":
                outcome.warnings.append(f"{step.key}: anchor {anchor!r} not found in {rel}")
            return outcome
        at = hits[0] + (1 if kind == "after" else 0)
        if kind == "after" and at > 0 and not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines[at:at] = [text]
        new = "".join(lines)
        placed = f"{kind} line {hits[0] + 1}" + (f" (first of {len(hits)} matches)" if len(hits) > 1 else "")
    outcome.touched = [treewrite.write_file(ctx.root, rel, new.encode("utf-8", errors="surrogateescape"),
                                            what=step.key)]
    outcome.messages.append(f"{rel}: inserted {len(text.splitlines())} line(s) {placed}")
    return outcome


# ------------------------------------------------------------------------------------------------ backport


def run_backport(ctx: StepContext, step: Step) -> StepOutcome:
    from legacy_gpu_patch.source import sources

    body = step.body
    assert isinstance(body, BackportBody)
    git_source = ctx.recipe.source if isinstance(ctx.recipe.source, GitSource) else None
    repo_url = body.repo or (git_source.url if git_source is not None else None)
    if not repo_url:
        raise ConfigError(f"{step.source_file}:{step.line}: step {step.id}: backport needs 'repo' (no git source)")
    store = sources.object_store_with(repo_url, body.ref, body.commit, ctx.source_dir, ctx.offline)
    store_git = Git(store)
    outcome = StepOutcome()
    for rel in body.files:
        resolve_inside(ctx.root, rel, step.key)
    blobs = {}
    for rel in body.files:
        proc = store_git.run("cat-file", "blob", f"{body.commit}:{rel}", check=False)
        if proc.returncode != 0:
            raise SourceError(f"{step.key}: {rel} does not exist at {body.ref} ({body.commit[:12]})")
        blobs[rel] = proc.stdout
    outcome.touched = [treewrite.write_file(ctx.root, rel, data, what=step.key) for rel, data in blobs.items()]
    outcome.messages.append(f"{len(blobs)} file(s) from {body.ref} ({body.commit[:12]})")
    return outcome


RUNNERS: dict[str, Callable[[StepContext, Step], StepOutcome]] = {
    "patch": run_patch,
    "url-patch": run_url_patch,
    "regex": run_regex,
    "insert": run_insert,
    "backport": run_backport,
}


def run(ctx: StepContext, step: Step) -> StepOutcome:
    return RUNNERS[step.kind](ctx, step)
