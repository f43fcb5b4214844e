"""Adaptive learning: the classifier's caches rest while nearly every candidate line is a new shape.

The per-shape caches (known.py's raw shapes, knownclass.py's head classes, knownfold.py's folded shapes, shapes.py's
shape cache, Matcher._raw_shapes) pay on a line they have not seen: the look-ups that miss, the folded decision and
the learning of two or three entries (~20 us a line), and each entry's memory. On a failing build whose errors name
distinct identifiers and paths (bench/classify_logs.generate_dense_words) nearly every error line is such a line:
the caches cost ~40 % more time than the plain path and save nothing, and their tables grow to their bounds.

So the scan tells `Learning` of every candidate line that none of the caches knew (`miss`), with the number of
candidate lines seen so far. Over a window of WINDOW candidate lines, where more than MISS_MAX of them were misses,
learning *rests* for the next `rest` candidate lines (REST_MIN, doubled each time a probe finds the rate still high,
up to REST_MAX; back to REST_MIN after a window below it): a miss then takes the plain path (Matcher.plain_match,
the raw fast path's own test), and nothing is stored. What is known stays known: a line of a raw or message shape
learnt before is still taken by its entry. After the rest, learning resumes for a window (a probe).

Exact whatever the state: a cache's entry decides a line as the plain path does (each cache's module says why), and
a line no entry decides is decided by the plain path, with or without learning it. Only what is stored, and so the
time and memory, depends on the state. tests/unit/classify/test_adaptive.py compares findings, counts, contexts and
line numbers with learning always on and always resting, and checks that a distinct-line log makes it rest.
"""

from __future__ import annotations

__all__ = ["MISS_MAX", "REST_MAX", "REST_MIN", "WINDOW", "Learning"]

WINDOW = 1024  # candidate lines a miss rate is measured over: ~0.2 s of an error-dense log's lines at most
MISS_MAX = 0.8  # misses per candidate line above which the caches rest (the words log: ~1; the dense log: ~0)
REST_MIN = 8192  # candidate lines a first rest lasts
REST_MAX = 1 << 17  # and the longest: a log that turns repetitive is learnt again within this many lines


class Learning:
    """Whether the caches learn now (`on`), from the misses of the candidate lines (module docstring)."""

    __slots__ = ("base", "enabled", "last", "misses", "on", "rest", "rests", "start", "until")

    def __init__(self, enabled: bool = True) -> None:
        """`enabled`: False, never rest (learning always on: the caches as they were; the tests' other way)."""
        self.enabled = enabled
        self.on = True
        self.base = 0  # candidate lines of the chunks before the one being scanned
        self.last = 0  # candidate lines of the chunk being scanned
        self.start = 0  # where the current window started (a candidate line's number)
        self.misses = 0  # in the current window
        self.rest = REST_MIN
        self.until = 0  # while resting: the candidate line at which learning resumes
        self.rests = 0  # how many times learning rested (tests, bench)

    def chunk(self, candidates: int) -> None:
        """A new chunk's scan starts, with `candidates` candidate lines: the numbering goes on past the last's."""
        self.base += self.last
        self.last = candidates

    def miss(self, i: int) -> bool:
        """The chunk's candidate line `i` was known to no cache: whether to learn it."""
        seen = self.base + i
        if not self.on:
            if seen < self.until:
                return False
            self.on, self.start, self.misses = True, seen, 0  # a probe: learning again for a window
        self.misses += 1
        span = seen - self.start
        if span >= WINDOW:
            if self.enabled and self.misses > MISS_MAX * span:
                self.on, self.until = False, seen + self.rest
                self.rest = min(self.rest * 2, REST_MAX)
                self.rests += 1
            else:
                self.rest = REST_MIN
            self.start, self.misses = seen, 0
        return self.on
