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

import gc
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from legacy_gpu_patch.classify.findings import Finding, Occurrence
from legacy_gpu_patch.classify.grepfile import FileSearch
from legacy_gpu_patch.classify.knownbatch import BatchLines
from legacy_gpu_patch.classify.normalize import normalize, strip_prefixes
from legacy_gpu_patch.classify.rules import CATEGORIES, Rule, RuleSet, load_rules, rule_files
from legacy_gpu_patch.classify.scan import TriggerSearch

__all__ = [  # the classifier's public names (build, commands, report and tests import them from here)
    "CATEGORIES", "Classifier", "Finding", "Occurrence", "Rule", "RuleSet", "classify_bytes", "classify_file",
    "classify_lines", "classify_stream", "load_rules", "normalize", "rule_files", "strip_prefixes",
]

SMALL_CHUNK = 256 << 10  # below this a chunk is joined to the open line of the last one (one scan, not two)
CHUNK = 4 << 20  # a file is read in chunks this big: with GNU grep searching them, one process per 4 MiB (grepscan)
# the cyclic collector's first threshold while a stream is classified (fewer_collections)
YOUNG = 20_000


class Classifier(BatchLines):
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
        known_lines: bool = True,
    ) -> None:
        """`accelerate`: GNU grep searches big chunks for triggers; `use_shapes`: see shapes.py; `known_lines`: a
        line of a raw shape decided before is taken as it was (known.py; both need use_shapes; same findings)."""
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
        self._carry_now: tuple[bytes, ...] = ()
        self._triggers = TriggerSearch(self.rules.triggers, accelerate=accelerate)
        self._file: FileSearch | None = None  # one grep over the whole file being fed, where search_file() made one
        self._known = {} if known_lines and self._raw_shapes is not None else None

    def feed(self, data: bytes) -> None:
        if not data:
            return
        base = self.bytes  # where data starts in everything fed (the file a FileSearch reads)
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
                base -= len(self._partial)
                data = self._partial + data  # a pipe's small chunk: one scan, the copy is cheap
            else:
                self._scan(self._partial + data[: nl + 1], base=base - len(self._partial))  # the line left open
                start = nl + 1
            self._partial = b""
        cut = data.rfind(b"\n", start) + 1
        if cut > start:
            self._scan(data, start, cut, base)
        else:
            cut = start
        rest = len(data) - cut
        if rest > self.max_line:
            self._scan(data[cut : cut + self.max_line] + b"\n")
            self._skip_long = True
        elif rest:
            self._partial = data[cut:]

    def search_file(self, file: BinaryIO) -> None:
        """The bytes to be fed are those of `file` from its start: let one GNU grep search all of it (grepfile.py)
        instead of one per chunk. Same findings; `close_search()` (or close()) ends it."""
        self.close_search()
        if self.bytes == 0:
            self._file = self._triggers.file_search(file)

    def close_search(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def feed_line(self, line: bytes | str) -> None:
        if isinstance(line, str):
            line = line.encode("utf-8", "surrogateescape")
        self.feed(line.rstrip(b"\n") + b"\n")

    def skip(self, data: bytes) -> None:
        """Count lines that are not build output (lgpatch's own headers in the log): no matching, no context."""
        self.flush()
        self.close_search()  # the bytes fed no longer follow the file's
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
        self.close_search()
        return self.findings()

    def _scan(self, block: bytes, start: int = 0, end: int = -1, base: int | None = None) -> None:
        """Classify a run of complete lines (block[start:end], ending with b"\\n"), scanned in place: the candidate
        lines of the trigger search (scan.py) in order, and every line after a finding that a context, block or join
        wants. Line numbers are counted once, forward, only up to the lines that need one. The loop holds the paths
        of the commonest lines (a known raw shape or folded shape, a progress line ending a pending finding)."""
        end = len(block) if end < 0 else end
        plain = block.isascii()  # then so is every line: _raw_skipped need not ask
        starts, hits = self._chunk_candidates(block, start, end, plain, base)
        find = block.find
        base = self.lines
        counted_pos, counted = start, 0
        i, n = 0, len(starts)
        pos = start  # first byte not yet looked at (a line start)
        while pos < end:
            if self._want > 0:
                s = pos  # context, block or join: the next line, trigger or not
                hit = -1
                if i < n and starts[i] == s:
                    hit = hits[i]
                    i += 1
                elif self._pending is not None and self._progress_ends_pending(block, s):
                    pos = find(b"\n", s) + 1  # a failing build's commonest line after an error: done with it
                    continue
                e = find(b"\n", s if hit < 0 else hit)
                counted, counted_pos = counted + block.count(b"\n", counted_pos, s), s
                self._line(base + counted + 1, block, s, e, hit, False)
                pos = e + 1
                continue
            if i >= n:
                break
            # the candidate lines ahead, while none is wanted for a context, block or join (knownbatch.py)
            i, pos, counted, counted_pos = self._run(block, starts, hits, i, end, plain, base, counted, counted_pos)
        self.lines = base + counted + block.count(b"\n", counted_pos, end)
        self._keep_tail(block, start, end)

    def _chunk_candidates(self, block: bytes, start: int, end: int, plain: bool, base: int | None
                          ) -> tuple[list[int], list[int]]:
        """The line starts and triggers of block[start:end]'s candidate lines (scan.py: TriggerSearch.spans), with
        the per-chunk state set."""
        self._block_start = start
        self._carry_now = tuple(self._carry)  # what _before() hands a line of this chunk: one copy, not one a line
        starts, hits = self._triggers.spans(block, start, end, plain, self._file, base)
        self.learning.chunk(len(starts))  # the candidate lines' numbers, for the miss rate (adaptive.py)
        return starts, hits


# --------------------------------------------------------------------------------------------- conveniences
@contextmanager
def fewer_collections(young: int = YOUNG) -> Iterator[None]:
    """The cyclic collector's first threshold raised to `young` (never lowered; left alone where collection is off)
    while the block runs, then set back. An error-dense log's scan keeps ~20,000 learnt entries and a few objects a
    line alive for a while: at the default threshold (700 allocations) that set off ~140 collections of the young and
    middle generations and a full one on the bench's dense log, ~0.02 s of a ~0.65 s scan (~0.005 s here); the quiet
    log's scan, ~10. Memory: only cyclic garbage waits longer, at most `young` container objects more."""
    before = gc.get_threshold()
    raise_it = gc.isenabled() and 0 < before[0] < young
    if raise_it:
        gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        if raise_it:
            gc.set_threshold(*before)


def classify_stream(stream: BinaryIO, classifier: Classifier | None = None, chunk: int = CHUNK,
                    file: BinaryIO | None = None) -> Classifier:
    """Classify a whole stream; the classifier is closed. `file`: the regular file the stream reads from its start
    (one GNU grep then searches it all: Classifier.search_file). The collector's thresholds are raised meanwhile
    (fewer_collections)."""
    c = classifier or Classifier()
    if file is not None:
        c.search_file(file)
    read = stream.read
    try:
        with fewer_collections():
            while True:
                data = read(chunk)
                if not data:
                    break
                c.feed(data)
            c.close()
    finally:
        c.close_search()
    return c


def classify_file(path: str | Path, **kwargs: Any) -> Classifier:
    with open(path, "rb") as fh:
        return classify_stream(fh, Classifier(**kwargs), file=fh)


def classify_bytes(data: bytes, **kwargs: Any) -> list[Finding]:
    c = Classifier(**kwargs)
    c.feed(data)
    return c.close()


def classify_lines(lines: Iterable[str], **kwargs: Any) -> list[Finding]:
    return classify_bytes("".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8"), **kwargs)
