"""The classifier's regular expressions, compiled once per interpreter and kept in lgpatch's cache between runs.

CPython compiles a pattern in two halves: a parser and code generator written in Python (re._parser, re._compiler)
and the matcher's constructor in C (_sre.compile), which takes the generated code as a list of ints. For the ~120
patterns a classifier run compiles (its rules, the merged lead patterns, the normalisation and shape patterns), the
Python half is ~15 ms of CPU at every start, a twentieth of what `lgpatch classify` costs on a quiet 50 MB log
(bench/classify_bench.py). What that half yields for a pattern — its flags, code, group count and group names —
depends on nothing but the pattern, its flags and the interpreter's sre, so it is kept per (pattern, flags) in one
file of the cache folder named after the interpreter (its implementation, version and sre MAGIC number) and handed to
_sre.compile at the next start.

Kept honest by construction: an entry is keyed by the pattern text itself (never stale); _sre.compile checks the code
it is given; anything missing or failing (another interpreter whose re lacks these internals, a damaged file, a
read-only cache) means re.compile, the same Pattern (tests/unit/classify/test_srecache.py compares every cached
pattern with re.compile's). LGPATCH_SRE_CACHE=0 turns it off (the benches' A/B, a suspected cache).
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import re
import sys
import zlib
from array import array
from pathlib import Path
from typing import Any, AnyStr, Optional

from legacy_gpu_patch.classify.rulecache import cache_folder, store

__all__ = ["MAX_ENTRIES", "cache_file", "compile_re", "entry_of"]


def _internals() -> tuple[Any, Any, Any] | None:
    """(_sre, the parser, the code generator) of CPython's re; None where this interpreter has no such internals."""
    if sys.implementation.name != "cpython":
        return None
    # private modules: typed as Any here, used only as re._compiler.compile uses them
    names = ("_sre", "re._parser", "re._compiler") if sys.version_info >= (3, 11) else \
        ("_sre", "sre_parse", "sre_compile")
    try:
        found = tuple(importlib.import_module(name) for name in names)
    except ImportError:  # pragma: no cover - a CPython without them
        return None
    sre, parser, compiler = found
    if not (callable(getattr(sre, "compile", None)) and callable(getattr(parser, "parse", None))
            and callable(getattr(compiler, "_code", None)) and getattr(sre, "CODESIZE", 0) == array("I").itemsize):
        return None  # pragma: no cover - internals unlike these
    return sre, parser, compiler


_INTERNALS = _internals()

# entries kept per interpreter: past this many, the file is written with those this run used alone (the shipped rules
# and a log's paths through them need ~250; other rule files and versions of lgpatch add theirs)
MAX_ENTRIES = 1024

# (flags with the pattern's inline ones, code, groups - 1, group name -> index, index -> group name); the code as the
# bytes of an array of sre's 32-bit code units: a file of many long patterns loads at memcpy speed, and only the
# patterns a run compiles are turned into the list _sre.compile takes
Entry = tuple[int, bytes, int, dict[str, int], tuple[Optional[str], ...]]

_entries: dict[tuple[Any, int], Entry] | None = None  # read at the first compile_re of a process
_path: Path | None = None  # the file they were read from, and are written back to (not where $LGPATCH_CACHE points
# at exit: a test's temporary cache is gone by then)
_added = False  # an entry was made in this process: the file is written at exit
_used: set[tuple[Any, int]] = set()  # the keys this process compiled


def cache_file() -> Path:
    """The cache of this interpreter's entries, in the classifier's cache folder (rulecache.cache_folder)."""
    magic = getattr(_INTERNALS[0], "MAGIC", 0) if _INTERNALS else 0  # bumped whenever sre's code changes
    tag = f"{sys.implementation.cache_tag}-{magic}-{zlib.crc32(sys.version.encode()):08x}"
    return cache_folder() / f"sre-{tag}.pickle"


def _enabled() -> bool:
    return _INTERNALS is not None and os.environ.get("LGPATCH_SRE_CACHE", "1") != "0"


def _load() -> dict[tuple[Any, int], Entry]:
    global _entries, _path
    if _entries is None:
        _entries, _path = {}, cache_file()
        try:
            with open(_path, "rb") as fh:
                loaded = pickle.load(fh)
            if isinstance(loaded, dict):
                _entries = loaded
        except Exception:  # none yet, unreadable or damaged: every pattern compiled as re.compile would
            pass
    return _entries


def entry_of(pattern: str | bytes, flags: int) -> Entry:
    """What re.compile's Python half makes of `pattern`: what _sre.compile is given (as re._compiler.compile does)."""
    assert _INTERNALS is not None
    _, parser, compiler = _INTERNALS
    parsed = parser.parse(pattern, flags)
    code = compiler._code(parsed, flags)
    names = parsed.state.groupdict
    index: list[str | None] = [None] * parsed.state.groups
    for name, i in names.items():
        index[i] = name
    return int(flags | parsed.state.flags), array("I", code).tobytes(), parsed.state.groups - 1, dict(names), \
        tuple(index)


def compile_re(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """re.compile(pattern, flags), its Python half read from the cache where an earlier run made it."""
    flags = int(flags)
    if not _enabled() or not isinstance(pattern, (str, bytes)) or flags & re.DEBUG:
        return re.compile(pattern, flags)
    entries = _load()
    key = (pattern, flags)
    entry = entries.get(key)
    try:
        if entry is None:
            entry = entry_of(pattern, flags)
            _remember(entries, key, entry)
        _used.add(key)
        assert _INTERNALS is not None
        final_flags, code, groups, names, index = entry
        compiled: re.Pattern[AnyStr] = _INTERNALS[0].compile(pattern, final_flags, array("I", code).tolist(), groups,
                                                             names, index)
        return compiled
    except Exception:  # an entry of other internals, or internals unlike these: re.compile says what is wrong
        entries.pop(key, None)
        _used.discard(key)
        return re.compile(pattern, flags)


def _remember(entries: dict[tuple[Any, int], Entry], key: tuple[Any, int], entry: Entry) -> None:
    global _added
    entries[key] = entry
    if not _added:
        _added = True
        atexit.register(_save)


def _save() -> None:
    """Write the entries back (rulecache.store: atomic, the last writer wins, the newest KEEP interpreters' files
    kept), when this process added any."""
    global _added
    if _entries is None or _path is None or not _added:
        return
    _added = False
    kept = _entries if len(_entries) <= MAX_ENTRIES else {key: _entries[key] for key in _used if key in _entries}
    store(_path, "sre", kept)
