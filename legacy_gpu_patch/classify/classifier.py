"""Streaming build-log classifier: which error is this, what causes it, which patchset fixes it.

Rules are data (rules/*.yaml, loaded by rules.py). The log is read once, in chunks:

1. **Candidate lines** (scan.py): every trigger (`rror`, `ERROR`, `fatal`, `ndefined`, ...) is searched in every
   line of every chunk, by one GNU grep process per big chunk where it is installed (grepscan.py), else with
   `bytes.find` at C speed; per-line Python work is paid only for the lines that hold one
   (and for the few lines after a finding, for context). The commonest of those (compiler command echoes with
   -Werror, include chains and progress lines naming ErrorHandling.cpp) are decided on their raw bytes, undecoded
   (fastpath.py).
2. **Normalisation** of a candidate (normalize.py): colours, CI prefixes, quotes, localized severity words.
3. **Rules in order** (match.py), each gated by its own cheap lowercase literals (`prefilter`); the first rule whose
   regex matches decides (per message shape, once many lines were decided: shapes.py). Exceptions: "no finding".
4. **Grouping** (collect.py, findings.py): findings keyed by rule and a capture, counted exactly; `findings()` ranks
   the first root cause first.

Invalid UTF-8 is decoded with replacement characters; memory is bounded: a line is matched on its first `max_line`
bytes, a long one on a window of MATCH_WINDOW bytes around its first trigger."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from legacy_gpu_patch.classify.collect import Collector
from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW
from legacy_gpu_patch.classify.findings import Finding, Occurrence
from legacy_gpu_patch.classify.normalize import context_text, normalize, strip_prefixes
from legacy_gpu_patch.classify.rules import CATEGORIES, Rule, RuleSet, load_rules, rule_files
from legacy_gpu_patch.classify.scan import TriggerSearch

__all__ = [  # the classifier's public names (build, commands, report and tests import them from here)
    "CATEGORIES", "Classifier", "Finding", "Occurrence", "Rule", "RuleSet", "classify_bytes", "classify_file",
    "classify_lines", "classify_stream", "load_rules", "normalize", "rule_files", "strip_prefixes",
]

# a progress marker of make/CMake or ninja at the start of a line (after a CI timestamp, if any)
_PROGRESS_START = re.compile(r"^(?:\S+Z[ \t]|\#\d+[ \t]\d+\.\d+[ \t])?[ \t]*\[(?:[ \t]*\d{1,3}%|\d+/\d+)\][ \t]")

SMALL_CHUNK = 256 << 10  # below this a chunk is joined to the open line of the last one (one scan, not two)
CHUNK = 4 << 20  # a file is read in chunks this big: with GNU grep searching them, one process per 4 MiB (grepscan)


class Classifier(Collector):
    """Feed bytes (any chunking); read `findings()`. Line numbers are 1-based lines of everything fed."""

    def __init__(
        self,
        rules: RuleSet | None = None,
        *,
        context_before: int = 3,
        context_after: int = 3,
        max_line: int = 1 << 20,
        max_findings: int = 500,
        max_occurrences: int = 50,
        accelerate: bool = True,
        use_shapes: bool = True,
    ) -> None:
        """`accelerate`: GNU grep searches big chunks for triggers; `use_shapes`: see shapes.py (same findings)."""
        super().__init__(
            rules,
            context_before=context_before,
            context_after=context_after,
            max_findings=max_findings,
            max_occurrences=max_occurrences,
            use_shapes=use_shapes,
        )
        self.max_line = max_line
        self.lines = 0  # complete lines seen
        self.bytes = 0
        self._partial = b""
        self._skip_long = False
        self._carry: deque[bytes] = deque(maxlen=max(context_before, 1))
        self._block_start = 0  # where the chunk being scanned starts in its block
        self._triggers = TriggerSearch(self.rules.triggers, accelerate=accelerate)

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.bytes += len(data)
        start = 0  # the data is scanned in place, from `start`: no copy of the chunk
        if self._skip_long:
            nl = data.find(b"\n")
            if nl < 0:
                return
            start = nl + 1
            self._skip_long = False
        elif self._partial:
            nl = data.find(b"\n")
            if nl < 0:
                self._partial += data
                if len(self._partial) > self.max_line:
                    # an over-long line: classify its head now, drop the rest of it (bounded memory)
                    self._scan(self._partial[: self.max_line] + b"\n")
                    self._partial = b""
                    self._skip_long = True
                return
            if len(data) <= SMALL_CHUNK:
                data = self._partial + data  # a pipe's small chunk: one scan, the copy is cheap
            else:
                self._scan(self._partial + data[: nl + 1])  # the line the last chunk left open
                start = nl + 1
            self._partial = b""
        cut = data.rfind(b"\n", start) + 1
        if cut > start:
            self._scan(data, start, cut)
        else:
            cut = start
        rest = len(data) - cut
        if rest > self.max_line:
            self._scan(data[cut : cut + self.max_line] + b"\n")
            self._skip_long = True
        elif rest:
            self._partial = data[cut:]

    def feed_line(self, line: bytes | str) -> None:
        if isinstance(line, str):
            line = line.encode("utf-8", "surrogateescape")
        self.feed(line.rstrip(b"\n") + b"\n")

    def skip(self, data: bytes) -> None:
        """Count lines that are not build output (lgpatch's own headers in the log): no matching, no context."""
        self.flush()
        n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        self.lines += n
        self._carry.clear()

    def flush(self) -> None:
        """End of one command's output: finish the partial last line and any open block or join."""
        if self._partial:
            tail, self._partial = self._partial, b""
            self._scan(tail + b"\n")
        self._skip_long = False
        self._finish_block()
        self._finish_pending(None)
        self._after_open.clear()
        self._want = 0

    def close(self) -> list[Finding]:
        self.flush()
        return self.findings()

    def _scan(self, block: bytes, start: int = 0, end: int = -1) -> None:
        """Classify a run of complete lines (block[start:end], ending with b"\\n"), scanned in place.

        The candidate lines come from the trigger search (scan.py), in order; a line the raw fast path decides
        costs a few C calls. Lines after a finding (context, blocks, joins) are looked at whether they hold a
        trigger or not. Line numbers are counted once, forward, only up to the lines that need one.
        """
        if end < 0:
            end = len(block)
        self._block_start = start
        plain = block.isascii()  # then so is every line: _raw_skipped need not ask
        cands = self._triggers.lines(block, start, end, plain)
        find = block.find
        raw_skipped = self._raw_skipped
        base = self.lines
        counted_pos = start
        counted = 0
        i, n = 0, len(cands)
        pos = start  # first byte not yet looked at (a line start)
        while pos < end:
            if self._want > 0:
                s = pos  # context, block or join: the next line, trigger or not
                hit = -1
                if i < n and cands[i][0] == s:
                    hit = cands[i][1]
                    i += 1
                checked = False
            elif i < n:
                s, hit = cands[i]
                i += 1
                checked = True
                if raw_skipped(block[s : find(b"\n", hit)], plain):
                    pos = find(b"\n", hit) + 1
                    continue
            else:
                break
            e = find(b"\n", s if hit < 0 else hit)
            counted += block.count(b"\n", counted_pos, s)
            counted_pos = s
            self._line(base + counted + 1, block, s, e, hit, checked)
            pos = e + 1
        self.lines = base + counted + block.count(b"\n", counted_pos, end)
        self._keep_tail(block, start, end)

    def _keep_tail(self, block: bytes, start: int, end: int) -> None:
        """Keep the last lines for the before-context of the next chunk's first lines."""
        k = self._carry.maxlen or 1
        tail: list[bytes] = []
        stop = end - 1
        while len(tail) < k and stop > start:
            first = block.rfind(b"\n", start, stop) + 1 or start
            tail.append(block[first:stop])
            stop = first - 1
        for line in reversed(tail):
            self._carry.append(line)

    def _join_pending(self, raw: bytes, text: str | None) -> bool:
        """Resolve the waiting finding with this line; True if the line was its wrapped continuation.

        A line that starts with a build tool's progress marker ("[12/345] Building ...") is output of its own, never
        the rest of a wrapped line: the joined readings are not tried (they cost three rule searches a line in a
        failing build, where every long error line waits for the next one).
        """
        head = raw[:256].decode("utf-8", "replace")
        if _PROGRESS_START.match(head):
            self._finish_pending(None)
            return False
        if text is None:
            text = normalize(raw[: MATCH_WINDOW * 2].decode("utf-8", "replace"))
        return self._finish_pending(text, strip_prefixes(head)[:1].encode())

    def _before(self, block: bytes, s: int, n: int) -> list[bytes]:
        out: list[bytes] = []
        lo = self._block_start
        end = s - 1
        while len(out) < n and end >= lo:
            start = block.rfind(b"\n", lo, end) + 1 or lo
            out.append(block[start:end])
            end = start - 1
        if len(out) < n:
            need = n - len(out)
            carry = list(self._carry)
            out.extend(reversed(carry[-need:]))
        out.reverse()
        return out

    def _line(self, lineno: int, block: bytes, s: int, e: int, hit: int, checked: bool = False) -> bool:
        """Look at one line; True when it was classified or taken into a block or join (done with it).

        `checked`: the caller already knows the raw fast path does not decide the line.
        """
        raw = block[s:e]
        if self._want > 0:
            self._want -= 1
            text = None
            if self._after_open:
                ctx = context_text(raw)
                still = []
                for f in self._after_open:
                    f.context_after.append(ctx)
                    if len(f.context_after) < f._after_wanted:
                        still.append(f)
                self._after_open = still
            if self._block is not None:
                text = normalize(raw[: MATCH_WINDOW * 2].decode("utf-8", "replace"))
                if self._continue_block(raw, text):
                    return True
            if self._pending is not None and self._join_pending(raw, text):
                return True
        if hit < 0:
            return False
        if not checked and self._raw_skipped(raw):
            return True  # a command echo, include chain or progress line
        if len(raw) > MATCH_WINDOW:
            # A long line: the anchored lead rules (command echoes) read its head, the others a window around
            # its first trigger; memory and time per line stay bounded whatever the line's length.
            head = normalize(raw[:MATCH_WINDOW].decode("utf-8", "replace"))
            if self._lead_match(head) is not None:
                return True
            rel = hit - s
            lo = max(0, rel - MATCH_WINDOW // 4)
            raw = raw[lo : lo + MATCH_WINDOW]
        text = normalize(raw.decode("utf-8", "replace"))
        if text:
            self._classify(lineno, text, block, s)
        return True


# --------------------------------------------------------------------------------------------- conveniences
def classify_stream(stream: BinaryIO, classifier: Classifier | None = None, chunk: int = CHUNK) -> Classifier:
    """Classify a whole stream; the classifier is closed."""
    c = classifier or Classifier()
    read = stream.read
    while True:
        data = read(chunk)
        if not data:
            break
        c.feed(data)
    c.close()
    return c


def classify_file(path: str | Path, **kwargs: Any) -> Classifier:
    with open(path, "rb") as fh:
        return classify_stream(fh, Classifier(**kwargs))


def classify_bytes(data: bytes, **kwargs: Any) -> list[Finding]:
    c = Classifier(**kwargs)
    c.feed(data)
    return c.close()


def classify_lines(lines: Iterable[str], **kwargs: Any) -> list[Finding]:
    return classify_bytes("".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8"), **kwargs)
