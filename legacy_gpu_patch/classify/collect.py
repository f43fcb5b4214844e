"""From matched lines to findings: blocks of wrapped lines, messages a CI wrapped, grouping and counting.

Lines wrapped by CMake (`CMake Error at ...:` + indented text) are joined into one message ("block" rules); a
generic finding also tries the next line joined to it, for messages a CI wrapped. Findings are grouped by rule and
key (see findings.py); at most `max_findings` distinct findings and `max_occurrences` locations each are kept, and
every count stays exact (`errors`, `warnings`, `dropped`, `Finding.count`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW
from legacy_gpu_patch.classify.findings import Finding, Occurrence, rank_key
from legacy_gpu_patch.classify.match import Matcher
from legacy_gpu_patch.classify.normalize import _PY_EXC_RE, LOCAL_MARK, context_text, location, strip_prefixes
from legacy_gpu_patch.classify.rules import Rule, RuleSet
from legacy_gpu_patch.classify.shapes import RuleMatch
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["Collector"]

Before = Callable[[], list[bytes]]  # the raw lines before a message, read when a kept occurrence needs them
MESSAGE_CHARS = 500
WRAP_MIN = 72  # a line this long may continue on the next one (consoles and CI viewers wrap at 80-200 columns)


@dataclass
class _Block:
    rule: Rule
    lineno: int
    header: str
    before: Before
    lines: list[str] = field(default_factory=list)


@dataclass
class _Pending:
    """A generic finding waiting one line: a CI may have wrapped its message."""

    rule: Rule
    lineno: int
    text: str
    before: Before
    match: RuleMatch


_NEW_MESSAGE_RE = compile_re(
    r"^(?:\S+:\d+(?::\d+)?:|\S+\(\d+(?:,\d+)?\)\s*:|(?:fatal )?error\b|warning\b|note\b|In file included|"
    r"\[[ \t]*\d+%\]|\[\d+/\d+\]|(?:g?make|ninja)(?:\[\d+\])?:|FAILED:|--|\*\*|Traceback|CMake|#)",
    re.IGNORECASE,
)

# nvcc continues a message on indented lines of its own: "argument types are: (double *, double)"
_NVCC_CONTINUED = compile_re(r"(?:argument types are|object type is):")

# a line with its own severity marker starts a message of its own (it does not continue a wrapped one)
_MARKER_RE = compile_re(r"\b(?:error|warning|fatal|note)\b[ \t]*:|[a-z](?:Error|Exception|Warning):")


def _starts_before(m: RuleMatch, seam: int) -> bool:
    """Whether a reading of a joined line begins before `seam`: the match itself (one that does not merely start
    with a look-ahead at column 0), or its key (the name it is about)."""
    if 0 < m.start() < seam:
        return True
    return any(m.start(g) < seam for g, v in m.groupdict().items() if v is not None and g.startswith("key"))


class Collector(Matcher):
    """Classified lines in, findings out. The feeding side (Classifier) calls _classify per candidate line and
    _continue_block/_finish_pending for the lines after one."""

    def __init__(
        self,
        rules: RuleSet | None = None,
        *,
        context_before: int = 3,
        context_after: int = 3,
        max_findings: int = 500,
        max_occurrences: int = 50,
        use_shapes: bool = True,
    ) -> None:
        super().__init__(rules, use_shapes=use_shapes)
        self.context_before = context_before
        self.context_after = context_after
        self.max_findings = max_findings
        self.max_occurrences = max_occurrences
        self.phase: str | None = None
        self.errors = 0  # error occurrences (not distinct findings)
        self.warnings = 0
        self.dropped = 0  # occurrences of findings beyond max_findings
        self._findings: dict[tuple[str, str], Finding] = {}
        self._want = 0  # lines after the current one that must be looked at (context, blocks, joins)
        self._after_open: list[Finding] = []
        self._block: _Block | None = None
        self._pending: _Pending | None = None
        self.on_finding: Any = None  # callback(finding, new: bool) for live displays

    def _before(self, block: bytes, s: int, n: int) -> Before:
        """The n lines before block[s:], raw, when called (the feeding side knows them; read and decoded only for
        an occurrence kept: most of a failing build's error lines are beyond the caps)."""
        return _NO_LINES

    def _classify(self, lineno: int, text: str, block: bytes | None, s: int) -> None:
        shapes = self._shapes  # Matcher.match(), one call less a line once the shape cache decides
        hit = self.match(text) if shapes is None else shapes.match(self, text)
        if hit is None:
            return
        rule, m = hit
        if rule.exception:
            return
        before = self._before(block, s, self.context_before) if block is not None else _NO_LINES
        if rule.block is not None:
            self._finish_block()
            self._block = _Block(rule, lineno, text, before)
            self._want = max(self._want, rule.block.max_lines)
            return
        if rule.generic or len(text) >= WRAP_MIN:
            # a generic reading, or a line long enough to have been wrapped by a CI: the next line decides
            if self._pending is not None:
                self._finish_pending(None)
            self._pending = _Pending(rule, lineno, text, before, m)
            self._want = max(self._want, 1)
            return
        self._record(rule, m, lineno, text, before)

    def _continue_block(self, raw: bytes, text: str) -> bool:
        blk = self._block
        assert blk is not None
        spec = blk.rule.block
        assert spec is not None
        line = strip_prefixes(raw[: MATCH_WINDOW * 2].decode("utf-8", "replace"))
        if spec.stop is not None and spec.stop.search(text):
            self._finish_block()
            return True  # e.g. CMake's "Call Stack" header: consumed, not a finding of its own
        if not spec.cont.search(line) and not (spec.end is not None and spec.end.search(text)):
            self._finish_block()
            return False
        blk.lines.append(text)
        if (spec.end is not None and spec.end.search(text)) or len(blk.lines) >= spec.max_lines:
            self._finish_block()
        return True

    def _finish_block(self) -> None:
        blk = self._block
        if blk is None:
            return
        self._block = None
        body = " ".join(t.strip() for t in blk.lines if t.strip())
        joined = f"{blk.header} {body}".strip()
        context_after = blk.lines[: max(self.context_after, 12)]
        hit = self._match_excluding(joined, blk.rule)
        if hit is not None:
            rule, m = hit
            if rule.exception:
                return
            if not rule.generic:
                self._record(rule, m, blk.lineno, joined, blk.before, after=context_after)
                return
        header = blk.rule.regex.search(blk.header)
        if header:
            self._record(blk.rule, header, blk.lineno, joined, blk.before, after=context_after)

    def _finish_pending(self, next_text: str | None, next_raw: bytes = b"") -> bool:
        """Resolve a waiting finding; True if `next_text` was consumed as its wrapped continuation.

        Only a line that stops mid-word can continue on the next; the joined text wins only if a rule of higher
        priority reads it (a wrapped identifier completed, a generic error that turns out to be a known one). An
        indented next line is source code, not a continuation, except nvcc's "argument types are:".
        """
        p = self._pending
        if p is None:
            return False
        self._pending = None
        if (
            next_text
            and (p.text[-1:].isalnum() or p.text[-1:] in "_-/.")
            and (next_raw[:1] not in (b" ", b"\t") or _NVCC_CONTINUED.match(next_text))
            and not _NEW_MESSAGE_RE.match(next_text)
            and not _PY_EXC_RE.match(next_text)
            and not _MARKER_RE.search(next_text)
        ):
            # a next line that reads as a message of its own continues this one only where the joined reading
            # starts in this line (an identifier cut in two), not where it is all the next line's
            own = self._own_message(next_text)
            for joined in (p.text + next_text, f"{p.text} {next_text}"):
                hit = self.match(joined)
                if (
                    hit is not None
                    and not hit[0].generic
                    and not hit[0].exception
                    and (p.rule.generic or hit[0].priority < p.rule.priority)
                    and not (own and not _starts_before(hit[1], len(p.text)))
                ):
                    self._record(hit[0], hit[1], p.lineno, joined, p.before)
                    return True
        self._record(p.rule, p.match, p.lineno, p.text, p.before)
        return False

    def _record(
        self,
        rule: Rule,
        m: RuleMatch,
        lineno: int,
        text: str,
        before: Before,
        after: list[str] | None = None,
    ) -> None:
        """Count one occurrence: of a finding already known (same rule and key), or of a new one.

        What only a kept occurrence needs (its location, the decoded context) is worked out only for one: a failing
        build's error beyond the caps costs its key and its count.
        """
        where: tuple[str | None, int | None, int] | None = None
        key = None
        for g in rule.key_groups:  # a loop, not next(genexpr): every error line of a failing build passes here
            key = m.group(g)
            if key:
                break
        if not key:
            where = _located(text, before)
            key = text[where[2] :].strip().lower()[:200]
        if rule.severity == "error":
            self.errors += 1
        else:
            self.warnings += 1
        found = self._findings.get((rule.id, key))
        if found is not None:
            found.count += 1
            if len(found.occurrences) < self.max_occurrences:
                file, line, _ = where or _located(text, before)
                found.occurrences.append(Occurrence(lineno, file, line, self.phase))
            if self.on_finding:
                self.on_finding(found, False)
            return
        if len(self._findings) >= self.max_findings:
            self.dropped += 1
            return
        context = _decoded(before())
        file, line, _ = where or location(text, lambda: context)
        finding = _new_finding(rule, text, key, Occurrence(lineno, file, line, self.phase), context)
        if after is not None:
            finding.context_after = after[: self.context_after]
        elif self.context_after:
            finding._after_wanted = self.context_after
            self._after_open.append(finding)
            self._want = max(self._want, self.context_after)
        self._findings[(rule.id, key)] = finding
        if self.on_finding:
            self.on_finding(finding, True)

    def findings(self) -> list[Finding]:
        """Distinct findings, the first root cause first (see module docstring)."""
        return sorted(self._findings.values(), key=rank_key)

    def has_errors(self) -> bool:
        return any(f.is_error for f in self._findings.values())


def _no_lines() -> list[bytes]:
    return []


_NO_LINES: Before = _no_lines


def _decoded(before: list[bytes]) -> list[str]:
    return [context_text(b) for b in before]


def _located(text: str, before: Before) -> tuple[str | None, int | None, int]:
    """normalize.location of a message, the lines before it decoded only where location reads them."""
    return location(text, lambda: _decoded(before()))


def _new_finding(rule: Rule, text: str, key: str, occ: Occurrence, before: list[str]) -> Finding:
    return Finding(
        rule=rule.id,
        category=rule.category,
        severity=rule.severity,
        message=text.replace(LOCAL_MARK, "")[:MESSAGE_CHARS],
        file=occ.file,
        line=occ.line,
        log_line=occ.log_line,
        phase=occ.phase,
        explanation=rule.explanation,
        fix=rule.fix,
        patchsets=rule.patchsets,
        secondary=rule.secondary,
        generic=rule.generic,
        key=key,
        context_before=before,
        occurrences=[occ],
    )
