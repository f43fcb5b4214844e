"""The shipped rule set (and the localized words), kept ready in lgpatch's cache folder between runs.

Every `lgpatch classify` starts by reading ~13 YAML rule files: importing PyYAML and the schema validators, parsing
and validating them costs ~0.03 s of CPU, a fifth of the start-up a user pays on every log however small. What that
yields (the RuleSet: patterns, prefilters, triggers; no compiled regex) is pickled once into `classify/` of the
lgpatch cache ($LGPATCH_CACHE, else the user cache folder: ~/.cache/lgpatch) and read back at the next start. The
file's name holds a digest of everything it was made from: the files' bytes and those of the code that reads them,
the Python and lgpatch versions; any edit makes a new name, so a stale copy is never read (the newest KEEP are
kept). Any problem reading or
writing it means "build it from the files", the same result (tests/unit/classify/test_rulecache.py).
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Sequence
from importlib.util import source_hash
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from legacy_gpu_patch import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only (rules.py imports this module)
    from legacy_gpu_patch.classify.rules import RuleSet

__all__ = ["cache_folder", "cached", "cached_for", "code_files", "store"]

T = TypeVar("T")
KEEP = 8  # cache files kept per name (other checkouts, other versions)
_PKG = Path(__file__).resolve().parent.parent


def code_files() -> list[Path]:
    """The modules that turn rule files into a RuleSet: an edit of one of them makes a new cache name."""
    here = Path(__file__).resolve().parent
    return [here / "rules.py", here / "rules_schema.py", here / "rulesyaml.py", here / "rulecache.py",
            _PKG / "config" / "schema.py", _PKG / "config" / "yamlio.py"]


def _digest(name: str, sources: Sequence[Path]) -> str:
    # the keyed 64-bit hash CPython itself trusts to tell a changed source from its hash-based .pyc: no hashlib,
    # whose OpenSSL start is ~2 ms of every run
    parts = [f"{name}\0{__version__}\0{sys.version}\0{pickle.HIGHEST_PROTOCOL}".encode()]
    for path in sources:
        data = path.read_bytes()
        parts += [f"\0{path.name}\0{len(data)}\0".encode(), data]
    return source_hash(b"".join(parts)).hex()


def cache_folder() -> Path:
    """classify/ in the lgpatch cache: $LGPATCH_CACHE (as source/cache.py reads it), else the user cache folder."""
    env = os.environ.get("LGPATCH_CACHE")
    if env:
        return Path(env).expanduser() / "classify"
    if sys.platform.startswith("linux"):  # platformdirs' answer there, without importing it at every start
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "lgpatch" / "classify"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("lgpatch", appauthor=False)) / "classify"


def cached(name: str, sources: Sequence[Path], build: Callable[[], T]) -> T:
    """build(), or what an earlier build() of the same `sources` left in cache_folder()/NAME-DIGEST.pickle."""
    try:
        digest = _digest(name, sources)
    except OSError:  # a source cannot be read: the build says what is wrong with it
        return build()
    cache = cache_folder() / f"{name}-{digest}.pickle"
    try:
        with open(cache, "rb") as fh:
            return pickle.load(fh)  # type: ignore[no-any-return,unused-ignore]  # store wrote a T
    except Exception:  # none yet, unreadable, or from another build of the classes: built, written anew
        pass
    value = build()
    store(cache, name, value)
    return value


def cached_for(rules: RuleSet, name: str, code: Sequence[Path], build: Callable[[], T]) -> T:
    """build() of something read from `rules`; for the shipped rule set, cached() under `name`, keyed on its rule
    files, the code that reads them (code_files) and `code` (the modules the build runs)."""
    if not rules.shipped:
        return build()
    return cached(name, [Path(f) for f in rules.files] + code_files() + list(code), build)


def store(cache: Path, name: str, value: object) -> None:
    """Write the cache atomically (a concurrent reader sees all of it or nothing); drop the oldest of `name`.
    Also srecache's writer: one way to write a cache file, and both kinds bounded to KEEP files."""
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
        # the newest few are kept: checkouts of other versions sharing the cache do not push each other out
        others = [p for p in cache.parent.glob(f"{name}-*.pickle") if p != cache]
        for old in sorted(others, key=lambda p: p.stat().st_mtime, reverse=True)[KEEP - 1 :]:
            old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError):  # a read-only home: built again next time
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
