"""Apply a unified diff in memory, hunk by hunk, reporting offset and fuzz; write nothing unless all hunks apply.

`git apply` is atomic but cannot tell the user *how* a hunk matched (offset, fuzz) or what the file holds instead;
GNU patch reports offset/fuzz but leaves `.rej` files and half-patched trees. This module does both jobs: parse with
unidiff, locate each hunk (exact, then shifted, then with up to `max_fuzz` context lines ignored at either end, as
GNU patch does), and on failure name the patch file, target file, hunk header and the closest lines found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import unidiff

from legacy_gpu_patch.errors import PatchError, UnsafePathError
from legacy_gpu_patch.ledger.hunkerror import Origin, closest_lines, header, hunk_failure
from legacy_gpu_patch.ledger.treewrite import SYMLINK_MODE, FileChange, write_changes
from legacy_gpu_patch.safepath import check_diff_name, check_link_target, check_relpath, resolve_inside

__all__ = ["FileChange", "HunkReport", "Origin", "PatchResult", "closest_lines", "compute", "parse", "write_changes"]

DEV_NULL = "/dev/null"


@dataclass(frozen=True)
class HunkReport:
    file: str
    header: str
    offset: int
    fuzz: int


@dataclass
class PatchResult:
    changes: list[FileChange] = field(default_factory=list)
    hunks: list[HunkReport] = field(default_factory=list)

    @property
    def inexact(self) -> list[HunkReport]:
        return [h for h in self.hunks if h.offset or h.fuzz]


def _strip(path: str, strip: int) -> str:
    parts = path.split("/")
    return "/".join(parts[strip:]) if len(parts) > strip else parts[-1]


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote_c(body: str) -> str:
    """Undo git's C-style quoting: escapes and octal bytes become bytes; other characters stay as they are
    (with core.quotepath=false git leaves UTF-8 unquoted inside the quotes)."""
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            octal = body[i + 1 : i + 4]
            if len(octal) == 3 and all(ch in "01234567" for ch in octal) and int(octal, 8) < 256:
                out.append(int(octal, 8))
                i += 4
                continue
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
        out += c.encode("utf-8", errors="surrogateescape")
        i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _clean_name(name: str) -> str:
    if len(name) >= 2 and name[0] == '"' and name.rfind('"') > 0:
        return _unquote_c(name[1 : name.rfind('"')])
    return name.split("\t")[0]  # GNU diff appends a tab and a timestamp


def _hunk_lines(hunk: unidiff.Hunk) -> tuple[list[str], list[str], int, int]:
    """(old lines, new lines, leading context count, trailing context count), honouring '\\ No newline'."""
    old: list[str] = []
    new: list[str] = []
    last_kind = ""
    for line in hunk:
        kind = line.line_type
        if kind == "\\":
            # The previous line had no newline in the old, new or both versions.
            if last_kind in (" ", "-") and old:
                old[-1] = old[-1].rstrip("\n").rstrip("\r") if old[-1].endswith("\n") else old[-1]
            if last_kind in (" ", "+") and new:
                new[-1] = new[-1].rstrip("\n").rstrip("\r") if new[-1].endswith("\n") else new[-1]
            continue
        if kind in (" ", "-"):
            old.append(line.value)
        if kind in (" ", "+"):
            new.append(line.value)
        last_kind = kind
    kinds = [ln.line_type for ln in hunk if ln.line_type != "\\"]
    lead = next((i for i, k in enumerate(kinds) if k != " "), len(kinds))
    trail = next((i for i, k in enumerate(reversed(kinds)) if k != " "), len(kinds))
    return old, new, lead, trail


def _find(lines: list[str], needle: list[str], start: int, lowest: int) -> int | None:
    """Nearest index ≥ lowest where `needle` matches, searching outward from `start`."""
    n, m = len(lines), len(needle)
    if m == 0:
        return max(lowest, min(start, n))
    first = needle[0]
    candidates = [i for i in range(lowest, n - m + 1) if lines[i] == first and lines[i : i + m] == needle]
    if not candidates:
        return None
    return min(candidates, key=lambda i: (abs(i - start), i))


def parse(text: str, origin: Origin) -> unidiff.PatchSet:
    try:
        patch = unidiff.PatchSet(text)
    except (unidiff.UnidiffParseError, ValueError, IndexError, KeyError, AttributeError, TypeError) as exc:
        # unidiff raises whatever its parser trips over on garbage; to the user it is one thing: not a diff.
        raise PatchError(
            f"{origin.patchset}/{origin.step}: {origin.patch_file} is not a valid unified diff: {exc}"
        ) from None
    if not len(patch):
        raise PatchError(f"{origin.patchset}/{origin.step}: {origin.patch_file} contains no file changes")
    return patch


def _apply_hunks(
    content: str, pf: unidiff.PatchedFile, path: str, origin: Origin, max_fuzz: int
) -> tuple[str, list[HunkReport]]:
    lines = content.splitlines(keepends=True)
    reports: list[HunkReport] = []
    size_delta = 0
    last_offset = 0
    lowest = 0
    for number, hunk in enumerate(pf, 1):
        old, new, lead, trail = _hunk_lines(hunk)
        # source_start is 1-based; a hunk with no old lines inserts *after* line source_start.
        base = (hunk.source_start - 1 if hunk.source_length else hunk.source_start) + size_delta
        pos, fuzz = _find(lines, old, base + last_offset, lowest), 0
        while pos is None and fuzz < max_fuzz:
            fuzz += 1
            cut_lead, cut_trail = min(fuzz, lead), min(fuzz, trail)
            if cut_lead + cut_trail == 0 or cut_lead + cut_trail >= len(old):
                continue
            core = old[cut_lead : len(old) - cut_trail]
            found = _find(lines, core, base + last_offset + cut_lead, lowest)
            if found is not None:
                pos = found - cut_lead
                if pos < lowest:
                    pos = None
                    continue
                old_window = lines[pos : pos + len(old)]
                # Keep the file's own text for the ignored context lines, as GNU patch does.
                new = old_window[:cut_lead] + new[cut_lead : len(new) - cut_trail] + old_window[len(old) - cut_trail:]
                old = old_window
        if pos is None:
            raise hunk_failure(lines, old, base + last_offset, hunk, number, path, origin)
        offset = pos - base
        reports.append(HunkReport(path, header(hunk), offset, fuzz))
        lines[pos : pos + len(old)] = new
        size_delta += len(new) - len(old)
        last_offset = offset
        lowest = pos + len(new)
    return "".join(lines), reports


def _mode_from(info: list[str]) -> int | None:
    for line in info:
        for prefix in ("new file mode ", "new mode "):
            if line.startswith(prefix):
                value = line.strip()[len(prefix):]
                if value == "120000":
                    return SYMLINK_MODE
                return 0o755 if value.endswith("755") else 0o644
    return None


def _refuse_through(links: set[str], rel: str, what: str) -> None:
    """A path below a link that this same diff creates: the checks before writing cannot see where it lands."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            raise UnsafePathError(f"{what}: {rel!r} goes through the symbolic link {'/'.join(parts[:i])!r} that "
                                  "this same patch creates; refusing to write through it")


def _new_link(root: Path, path: str, content: str, is_new: bool, what: str) -> FileChange:
    """A `new file mode 120000` section: the symlink itself, its target checked to stay a regular tree path."""
    if not is_new:
        raise PatchError(f"{what}: turns {path} into a symbolic link; only new links are supported "
                         "(delete the file in one patch, create the link in another)")
    if "\n" in content:
        raise PatchError(f"{what}: the symbolic link {path} has a target of several lines")
    check_link_target(root, path, content, what)
    return FileChange(path, content.encode("utf-8", errors="surrogateescape"), SYMLINK_MODE)


def compute(root: Path, text: str, origin: Origin, strip: int = 1, max_fuzz: int = 2) -> PatchResult:
    """Work out every file's new content; raise PatchError/UnsafePathError before anything is written."""
    result = PatchResult()
    pending: dict[str, str | None] = {}  # path → content as changed by earlier file sections of this diff
    links: set[str] = set()  # symlinks that earlier file sections of this diff create
    for pf in parse(text, origin):
        source = _clean_name(pf.source_file or DEV_NULL)
        target = _clean_name(pf.target_file or DEV_NULL)
        what = f"{origin.patchset}/{origin.step} ({origin.patch_file})"
        if pf.is_binary_file:
            raise PatchError(f"{what}: binary diff for {target!r} is not supported; use a backport step instead")
        for name in (source, target):
            if name != DEV_NULL:
                check_diff_name(name, what)
        src_rel = None if source == DEV_NULL else check_relpath(_strip(source, strip), what)
        dst_rel = None if target == DEV_NULL else check_relpath(_strip(target, strip), what)
        path = dst_rel or src_rel
        if path is None:
            raise PatchError(f"{what}: a file section names no file (both sides are /dev/null)")
        for rel in {r for r in (src_rel, dst_rel) if r}:
            _refuse_through(links, rel, what)
            resolve_inside(root, rel, what)
        is_new = pf.is_added_file or src_rel is None
        is_rename = bool(getattr(pf, "is_rename", False)) or (src_rel and dst_rel and src_rel != dst_rel)
        if (is_rename and dst_rel and src_rel != dst_rel and (root / dst_rel).exists()
                and pending.get(dst_rel, "") is not None):
            raise PatchError(f"{what}: renames {src_rel} onto {dst_rel}, which already exists in the tree")
        read_from = src_rel if (is_rename and src_rel) else path
        if is_new:
            if (root / path).exists() and path not in pending:
                raise PatchError(f"{what}: creates {path}, which already exists in the tree")
            original = ""
        elif read_from in pending:
            if pending[read_from] is None:
                raise PatchError(f"{what}: changes {read_from}, which an earlier part of this patch deletes")
            original = pending[read_from] or ""
        else:
            full = root / read_from
            if not full.is_file():
                raise PatchError(
                    f"{what}: changes {read_from}, which does not exist in the tree"
                    f"{' (hunk ' + header(pf[0]) + ')' if len(pf) else ''}"
                )
            original = full.read_bytes().decode("utf-8", errors="surrogateescape")
        if pf.is_removed_file or dst_rel is None:
            content, reports = _apply_hunks(original, pf, path, origin, max_fuzz)
            if content.strip():
                raise PatchError(f"{what}: deletes {path}, but the file holds more than the patch removes")
            result.hunks.extend(reports)
            pending[path] = None
            result.changes.append(FileChange(path, None))
            continue
        content, reports = _apply_hunks(original, pf, path, origin, max_fuzz) if len(pf) else (original, [])
        result.hunks.extend(reports)
        pending[path] = content
        mode = _mode_from(pf.patch_info or [])
        if mode == SYMLINK_MODE:
            result.changes.append(_new_link(root, path, content, bool(is_new and not is_rename), what))
            links.add(path)
            continue
        if is_rename and src_rel:
            pending[src_rel] = None
            result.changes.append(FileChange(src_rel, None))
        result.changes.append(
            FileChange(path, content.encode("utf-8", errors="surrogateescape"), mode,
                       src_rel if is_rename else None)
        )
    return result
