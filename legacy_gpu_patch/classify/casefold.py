"""Case-insensitive rules searched as case-sensitive ones, on the lowercased line: the same spans, several times faster.

sre skips through a text at C speed only for a pattern that starts with a literal or a set it can test on one
character, and a case-insensitive letter is neither (`re._compiler._get_literal_prefix` gives up on the first
cased letter; a branch tests its alternatives' first letters cheaply only when they are case-sensitive). Most
rules are case-insensitive, so search() walks the whole alternation at every position of the line: 15-50 us a
rule on a failing build's error line.

For an ASCII text T, an IGNORECASE pattern P matches T exactly where the case-sensitive pattern `lowered(P)`
matches T.lower(), at the same spans: lower() maps each ASCII character to one of its own case, IGNORECASE compares
characters by case, and `lowered` writes each letter of P in lower case and each character set as the set of ASCII
characters it takes (so that a class such as `[A-Z]` or a negated one reads the lowercased text as P reads T). The
groups keep their numbers and names; the classifier reads a match's text off T (LowMatch). Back-references compare
lowered texts, as IGNORECASE compares the originals. A pattern with anything else (scoped flags, an op this module
does not write) is not lowered: `lowered` returns None and the rule keeps its own regex. `lowered` writes the
pattern back from re's parse tree and checks that what it wrote, lowering left out, parses to the same tree.

SpanMatch, a rule's match read off the spans cached for a message shape (shapes.py), sits beside LowMatch: both
stand for a rule's match on a line without that rule's own regex run on it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse

__all__ = ["LowMatch", "SpanMatch", "lowered"]

_C = _sre_constants
_AT = {
    _C.AT_BEGINNING: "^", _C.AT_BEGINNING_STRING: r"\A", _C.AT_END: "$", _C.AT_END_STRING: r"\Z",
    _C.AT_BOUNDARY: r"\b", _C.AT_NON_BOUNDARY: r"\B",
}
_KEPT_FLAGS = re.MULTILINE | re.DOTALL | re.UNICODE | re.ASCII  # what the written pattern is compiled with


class _Unsupported(Exception):
    pass


def _char_set(chars: list[int]) -> str:
    """A character set of exactly these ASCII characters (ranges where they run)."""
    if not chars:
        return "(?!)"  # takes no ASCII character: never matches an ASCII text
    out, i = [], 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and chars[j + 1] == chars[j] + 1:
            j += 1
        out.append(re.escape(chr(chars[i])) if i == j else f"{re.escape(chr(chars[i]))}-{re.escape(chr(chars[j]))}")
        i = j + 1
    return "[" + "".join(out) + "]"


@lru_cache(maxsize=1024)
def _lowered_char(src: str, flags: int) -> str:
    """The set of characters of a lowercased ASCII text (those equal to their lower()) that `src` takes."""
    one = re.compile(src, flags)
    return _char_set([u for u in range(128) if chr(u).lower() == chr(u) and one.fullmatch(chr(u))])


class _Writer:
    def __init__(self, names: dict[int, str], flags: int, lower: bool) -> None:
        self.names = names
        self.flags = flags
        self.lower = lower

    def seq(self, items: Any) -> str:
        return "".join(self.item(op, av) for op, av in items)

    def one_char(self, src: str) -> str:
        """A one-character item: as it is, or (lowering) the set of lowercased ASCII characters it takes."""
        return _lowered_char(src, self.flags) if self.lower else src

    def item(self, op: Any, av: Any) -> str:
        c = _C
        if op is c.LITERAL:
            ch = chr(av)
            if self.lower and ch.isascii() and ch.isalpha():
                return ch.lower()
            return self.one_char(re.escape(ch)) if self.lower and not ch.isascii() else re.escape(ch)
        if op is c.NOT_LITERAL:
            return self.one_char("[^" + re.escape(chr(av)) + "]")
        if op is c.ANY:
            return "."
        if op is c.IN:
            return self.one_char(self._set(av))
        if op is c.AT:
            if av not in _AT:
                raise _Unsupported(av)
            return _AT[av]
        if op is c.BRANCH:
            return "(?:" + "|".join(self.seq(b) for b in av[1]) + ")"
        if op is c.SUBPATTERN:
            group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise _Unsupported("scoped flags")
            if group is None:
                return "(?:" + self.seq(sub) + ")"
            name = self.names.get(group)
            return ("(?P<" + name + ">" if name else "(") + self.seq(sub) + ")"
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) or op is getattr(c, "POSSESSIVE_REPEAT", None):
            lo, hi, sub = av
            body = "(?:" + self.seq(sub) + ")"
            count = "{" + str(lo) + "," + ("" if hi is c.MAXREPEAT else str(hi)) + "}"
            return body + count + ("?" if op is c.MIN_REPEAT else "+" if op is not c.MAX_REPEAT else "")
        if op is c.ASSERT or op is c.ASSERT_NOT:
            direction, sub = av
            head = ("(?=" if op is c.ASSERT else "(?!") if direction == 1 else ("(?<=" if op is c.ASSERT else "(?<!")
            return head + self.seq(sub) + ")"
        if op is c.GROUPREF:
            name = self.names.get(av)
            return f"(?P={name})" if name else f"(?:\\{av})"
        if op is c.GROUPREF_EXISTS:
            group, yes, no = av
            return f"(?({self.names.get(group) or group}){self.seq(yes)}" + (f"|{self.seq(no)})" if no else ")")
        if op is getattr(c, "ATOMIC_GROUP", None):
            return "(?>" + self.seq(av) + ")"
        raise _Unsupported(op)

    def _set(self, items: Any) -> str:
        c = _C
        out = []
        for op, av in items:
            if op is c.NEGATE:
                out.append("^")
            elif op is c.LITERAL:
                out.append(re.escape(chr(av)))
            elif op is c.RANGE:
                out.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
            elif op is c.CATEGORY:
                out.append(_CATEGORY[av])
            else:
                raise _Unsupported(op)
        return "[" + "".join(out) + "]"


_CATEGORY = {
    _C.CATEGORY_DIGIT: r"\d", _C.CATEGORY_NOT_DIGIT: r"\D", _C.CATEGORY_SPACE: r"\s",
    _C.CATEGORY_NOT_SPACE: r"\S", _C.CATEGORY_WORD: r"\w", _C.CATEGORY_NOT_WORD: r"\W",
}


def _tree(items: Any) -> Any:
    """re's parse tree as plain nested tuples, non-capturing groups without flags spliced into their sequence (they
    stand for their contents: written back, a branch after a common prefix comes back inside one)."""
    out: list[Any] = []
    for op, av in items:
        if op is _C.SUBPATTERN and av[0] is None and not av[1] and not av[2]:
            out.extend(_tree(av[3]))
        else:
            out.append((op, _node(av)))
    return tuple(out)


def _node(av: Any) -> Any:
    if hasattr(av, "data"):  # a SubPattern: a sequence
        return _tree(av)
    if isinstance(av, list):  # a branch's alternatives, a set's items
        return tuple(_tree(x) if hasattr(x, "data") else _node(x) for x in av)
    if isinstance(av, tuple):
        return tuple(_node(x) for x in av)
    return av


def lowered(pattern: str, flags: int) -> str | None:
    """The case-sensitive source that matches a lowercased ASCII text where (pattern, flags) matches the text, or
    None (not case-insensitive, or not written back exactly: see the module docstring). Compile it with
    `flags & ~re.IGNORECASE`."""
    if not flags & re.IGNORECASE or flags & (re.VERBOSE | re.LOCALE):
        return None
    try:
        parsed = _sre_parse.parse(pattern, flags)
        names = {gid: name for name, gid in parsed.state.groupdict.items()}
        kept = flags & _KEPT_FLAGS
        plain = _Writer(names, flags, lower=False).seq(parsed)
        again = _sre_parse.parse(plain, flags)
        if _tree(again) != _tree(parsed) or again.state.groupdict != parsed.state.groupdict:
            return None
        low = _Writer(names, flags, lower=True).seq(parsed)
        if dict(re.compile(low, kept).groupindex) != parsed.state.groupdict:
            return None
        return low
    except (_Unsupported, re.error, KeyError, ValueError, TypeError, RecursionError):
        return None
    except Exception:  # an internal module: any surprise means "not lowered"
        return None


class LowMatch:
    """A match of a lowered pattern on text.lower(), read as the original pattern's match on `text` (same spans; the
    groups' text is the text's own)."""

    __slots__ = ("_m", "re", "string")

    def __init__(self, m: re.Match[str], regex: re.Pattern[str], string: str) -> None:
        self._m = m
        self.re = regex
        self.string = string

    @property
    def regs(self) -> tuple[tuple[int, int], ...]:
        """The span of every group, 0 first (re.Match.regs)."""
        return self._m.regs

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self._m.span(group)

    def start(self, group: int | str = 0) -> int:
        return self._m.start(group)

    def end(self, group: int | str = 0) -> int:
        return self._m.end(group)

    def group(self, group: int | str = 0) -> str | Any:
        start, end = self._m.span(group)
        return None if start < 0 else self.string[start:end]

    def groups(self) -> tuple[str | Any, ...]:
        return tuple(self.group(i) for i in range(1, self.re.groups + 1))

    def groupdict(self) -> dict[str, str | Any]:
        return {name: self.group(name) for name in self.re.groupindex}


def _shifted(spans: tuple[tuple[int, int], ...], by: int, token: int) -> tuple[tuple[int, int], ...] | None:
    """A folded line F's spans as its line T's (foldshape.py): a position past the folded token moves by `by`, 0 (a
    `^` branch's start) and -1 stay; None where one lies inside the token (then the spans are not T's: not known
    here)."""
    out = []
    for start, end in spans:
        if 0 < start < token or 0 < end < token:
            return None
        out.append((start + by if start >= token else start, end + by if end >= token else end))
    return tuple(out)


class SpanMatch:
    """A rule's match on a line, read off the spans of its match on another line of the same shape (for a blind rule
    they are the same spans); what the classifier asks of a match: group(), start(), span(), groups(), groupdict()."""

    __slots__ = ("_spans", "re", "string")

    def __init__(self, regex: re.Pattern[str], string: str, spans: tuple[tuple[int, int], ...]) -> None:
        self.re = regex
        self.string = string
        self._spans = spans

    @property
    def regs(self) -> tuple[tuple[int, int], ...]:
        return self._spans

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self._spans[group if isinstance(group, int) else self.re.groupindex[group]]

    def start(self, group: int | str = 0) -> int:
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self.span(group)[1]

    def group(self, group: int | str = 0) -> str | Any:
        start, end = self.span(group)
        return None if start < 0 else self.string[start:end]

    def groups(self) -> tuple[str | Any, ...]:
        return tuple(self.group(i) for i in range(1, len(self._spans)))

    def groupdict(self) -> dict[str, str | Any]:
        return {name: self.group(i) for name, i in self.re.groupindex.items()}
