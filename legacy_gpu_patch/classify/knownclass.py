"""Head classes: a line of a new raw shape, alike a decided line but for its path, is learnt as a known line with a
few look-ups.

An error-dense log's new raw shapes are mostly new through their path or the lengths of their digit runs (the
bench's 50 MB log: 20,054 raw shapes, ~1,200 paths, 79 shapes of the text after the path), and each paid the
folded way (knownfold.py, ~20 us: its plain and raw tests, the decode, the fold token, the entry, the trial gate,
the learning, the finding). For a located line `L = PATH + TAIL + R` (pathfold.location_path, `cut = len(PATH)`),
its *head* `H = L[:cut + 1]` (PATH and the TAIL's `:`/`(`) and its *rest* `L[cut:]`, every step of
FoldedLines._folded_line that ends in `_learn_folded`'s entry after a gate that found nothing reads the line through
H alone or through the rest's shape (every ASCII digit 1-9 written 0: shapes.py) alone, or is worked out per line
below. So where a line of head H and rest shape S was so decided (`_keep_class`), a line of a head of H's *class*
(the same fold token and aware units, the first character one of `BLGCS` or not) and of rest shape S gets the same
entry, its spans shifted for its own cut (`_learn_by_class`), and is then taken as a known line (KnownLines,
BatchLines: its entry's digit strings tested on it, a line holding one goes the long way, as before). Why each
step reads as said:

- *plain_shape*: its tests are the first character (in H), the last (in the rest, not a digit), ASCII, and strings
  without a digit, `:` or `(` (so each lies in H or in the rest, and in the rest where in its shape). A head is of a
  class only where it is *clean*: none of those strings in it, its first character one no CI prefix starts with.
- *the location* is matched on every line (its cut is the line's own).
- *the raw fast path* (Matcher._raw_decided): its regex finds a match on a located line alike for every line of
  one PATH (pathstart.path_decides, proven once for the rule set: Prepared.raw_path_decides), and its other tests
  follow a match. A head is of a class only where the regex misses the line that first shows it (its first
  character being one no CI prefix starts with, nothing is stripped), so it misses every line of that head. The
  raw shape's decision is kept (`_raw_shapes`) as _raw_skipped keeps it.
- *the fold token and the aware units*: PathFold._head of the lowered head; *the folded entry*: the token and the
  rest's shape; *the entry's strings and spans* (`_derived`): the entry, and the cut.
- *the trial gate* (PathFold.trial_gate of the aware units and the decider): where it splits (gate_splits: no
  string covers the location's `:`/`(` and digit, none holds a digit) it finds nothing in a line exactly where it
  finds nothing in its head, asked once per head and gate, and nothing in its rest's shape (true of the line kept).
- *the learning* (`_learn_folded`): the path's test (`alike`) is kept per head (a head whose test fails is of no
  class), the units' and strings' test reads the aware units, the decider, the entry's strings and the token with
  the TAIL's first character (in the rest's shape); the entry's `waits` reads the line's length, worked out per line.

tests/unit/classify/test_known_class.py compares findings, counts and contexts with the classes off (every new raw
shape the folded way) and with the long way, and the proof with the regex on lines of many paths.
"""

from __future__ import annotations

from typing import Any

from legacy_gpu_patch.classify.casefold import _shifted
from legacy_gpu_patch.classify.collect import WRAP_MIN
from legacy_gpu_patch.classify.fastpath import _MAY_BE_PREFIXED, MATCH_WINDOW
from legacy_gpu_patch.classify.known import _GLUED, _UNPREFIXED, NOTHING, _key_span, known_entry, rewritten
from legacy_gpu_patch.classify.knownfold import FoldedLines, _path_alike
from legacy_gpu_patch.classify.shapes import MAX_SHAPES

__all__ = ["ClassedLines"]

_UNSEEN: Any = object()  # a head not looked at yet
_Head = tuple[int, str, dict[Any, bool]]  # (its class, the head lowered, per gate: whether it finds nothing there)


def _clean(head: bytes) -> bool:
    """Whether plain_shape reads nothing of a line in its head but that it is there (module docstring)."""
    if head[:1] not in _UNPREFIXED or head[:1] in _MAY_BE_PREFIXED or b"`" in head or _GLUED.search(head):
        return False
    return not rewritten(head.decode("ascii"))


class ClassedLines(FoldedLines):
    """The head classes of a Classifier's new raw shapes (module docstring)."""

    classes = True  # False: every new raw shape the folded way (the tests' other way)
    _heads: dict[bytes, _Head | None] | None = None  # head -> its class, or None: of none
    _class_ids: dict[tuple[str, frozenset[int], bool], int] | None = None
    _path_decides: bool | None = None  # Prepared.raw_path_decides (pathstart.path_decides of the raw fast path's)
    # (class, rest shape) -> (gate, the known entry where it reads no cut, else None, the folded entry, the token's
    # length, {cut: the known entries of a line of that cut, shorter than WRAP_MIN and not})
    _by_class: dict[tuple[int, bytes], tuple[Any, Any, Any, int, dict[int, Any]]] | None = None

    def _learn_by_class(self, raw: bytes, key: bytes) -> Any:
        """The known entry of `raw`'s new raw shape `key`, learnt from its head's class and its rest's shape, or None
        where none is kept (module docstring)."""
        heads, by_class = self._heads, self._by_class
        if heads is None or by_class is None or len(raw) > MATCH_WINDOW:
            return None
        found = self._location(raw)  # set before the first head was kept
        if found is None:
            return None
        cut = found.end()
        head = heads.get(raw[: cut + 1], _UNSEEN)
        if head is _UNSEEN:
            head = self._class_of(raw, cut)
        if head is None:
            return None
        kept = by_class.get((head[0], key[cut:]))
        if kept is None:
            return None
        gate, known_entry, entry, token, cuts = kept
        clear = head[2].get(gate)
        if clear is None:
            clear = head[2][gate] = gate(head[1]) is None
        if not clear:
            return None
        if known_entry is None:  # a finding: its spans are the line's own, its waiting the line's length's
            pair = cuts.get(cut)
            if pair is None:
                pair = cuts[cut] = self._entries_at(entry, token, cut, b"`" in raw)
            known_entry = pair[len(raw) >= WRAP_MIN]
            if known_entry is None:
                return None  # a span inside the token: the folded way sends it the long way
        raw_shapes, known = self._raw_shapes, self._known
        if raw_shapes is None or known is None:
            return None
        if len(raw_shapes) >= MAX_SHAPES:  # the raw shape's decisions kept as _raw_skipped and _learn_folded keep them
            raw_shapes.clear()
        raw_shapes[key] = False
        if len(known) >= MAX_SHAPES:
            known.clear()
        known[key] = known_entry
        return known_entry

    def _entries_at(self, entry: Any, token: int, cut: int, quoted: bool) -> tuple[Any, Any]:
        """The known entries (_learn_folded's) of a folded `entry`'s finding on a line of this cut, shorter than
        WRAP_MIN and not (None for both where a span lies inside the token)."""
        rule, regex = entry[2], entry[3]
        moved = _shifted(entry[4], cut - token, token)
        if moved is None:
            return None, None
        kept, key_span = self._derived(entry)[1], _key_span(rule, regex, moved)
        return (known_entry(rule, regex, moved, rule.generic, kept, key_span, quoted),
                known_entry(rule, regex, moved, True, kept, key_span, quoted))

    def _class_of(self, raw: bytes, cut: int) -> _Head | None:
        """The class of the head `raw[:cut + 1]` (kept), or None where it is of none (module docstring): clean, the
        raw fast path's regex proven to read the path alone and missing this line (so every line of the head), the
        units' contexts in every path of its shape alike (knownfold._path_alike)."""
        heads, ids, shapes = self._heads, self._class_ids, self._shapes
        if heads is None or ids is None or shapes is None or shapes.fold is None:
            return None
        fold, head = shapes.fold, raw[: cut + 1]
        path = head.decode("ascii").lower()  # PATH's characters and the `:`/`(`: ASCII
        skip, decides = self._raw_skip, self._path_decides
        if decides is None:  # read with the rule set's other proofs (kept in the rule cache for the shipped rules)
            from legacy_gpu_patch.classify.prepare import prepared

            decides = self._path_decides = prepared(self.rules).raw_path_decides
        found: _Head | None = None
        if _clean(head) and decides and (skip is None or skip.match(raw) is None) and _path_alike(fold, path):
            token, aware = fold._head(path)
            found = (ids.setdefault((token, aware, raw[0] in b"BLGCS"), len(ids)), path, {})
        if len(heads) >= MAX_SHAPES:
            heads.clear()
        heads[head] = found
        return found

    def _keep_class(self, fold: Any, raw: bytes, key: bytes, cut: int, token: str, aware: frozenset[int], entry: Any,
                    gate: Any) -> None:
        """A line decided the folded way, its gate finding nothing, its raw shape learnt (`_learn_folded`): its
        decision kept for its head's class and its rest's shape, where both qualify (module docstring)."""
        if not self.classes or not fold.gate_splits(aware, entry[0]):
            return
        known = self._known
        learnt = known.get(key) if known is not None else None
        if learnt is None:
            return
        if self._heads is None or self._by_class is None or self._class_ids is None:
            self._heads, self._by_class, self._class_ids = {}, {}, {}
        head = self._heads.get(raw[: cut + 1], _UNSEEN)
        if head is _UNSEEN:
            head = self._class_of(raw, cut)
        if head is None:
            return
        head[2].setdefault(gate, True)  # the gate found nothing in this line, so nothing in its head
        by_class = self._by_class
        if len(by_class) >= MAX_SHAPES:
            by_class.clear()
        reads_cut = learnt is not NOTHING and learnt[0] is not None
        by_class[head[0], key[cut:]] = (gate, None if reads_cut else learnt, entry, len(token), {})
