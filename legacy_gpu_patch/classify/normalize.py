"""Normalisation of a log line (what the rules read) and the location (file:line) of a diagnostic in it.

ANSI colours, CI prefixes (ISO timestamps, Docker BuildKit `#16 72.51`, Spack `>> 853`, MSBuild `1>`, progress
`[ 45%]`/`[12/345]`), curly/guillemet quotes (gcc's ‘…’, »…«, « … »), localized severity words (Fehler, erreur,
エラー, 错误, ...: the table is data, localized.yaml) and interleaved progress fragments from parallel jobs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["CONTEXT_CHARS", "LOCAL_MARK", "context_text", "location", "normalize", "strip_prefixes"]

CONTEXT_CHARS = 300  # a context line is cut to this many characters in reports

_ANSI_RE = compile_re(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]")
# One CI/tool prefix at the start of a line; applied repeatedly ("2024-...Z #16 72.51 1>foo.cpp(3): error ...").
# Prefixes eat one separator, so the indentation after them survives (CMake continues its messages indented).
# (?=[^\s\x1c-\x1f]) is \S spelled so that the bytes twin below reads ASCII exactly as the str pattern does.
_PREFIXES = (
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]?",  # ISO 8601 (GitHub, GitLab)
    r"\[\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\][ \t]?",
    r"\[\d\d:\d\d:\d\d(?:[.,]\d+)?\][ \t]?",  # [12:00:00]
    r"\d\d:\d\d:\d\d(?:[.,]\d+)?[ \t]",  # 12:00:00
    r"\#\d+[ \t]\d+\.\d+[ \t]?",  # Docker BuildKit "#16 72.51 "
    r">>[ \t]*\d+[ \t]+",  # Spack ">> 853    "
    r"\d{1,7}[ \t]{4,}(?=[^\s\x1c-\x1f])",  # Spack context "  854    "
    r">[ \t]+",  # quoted in an issue or mail
    r"\d{1,4}>(?=[^\s\x1c-\x1f])",  # MSBuild "1>"
    r"\[[ \t]*\d{1,3}%\][ \t]+",  # CMake/make progress
    r"\[\d+/\d+\][ \t]+",  # ninja progress
    r"E[ \t]{2,}(?=[^\s\x1c-\x1f])",  # pytest failure lines
    r"\|[ \t]+",  # bitbake/yocto "| "
    r"\#\#\[(?:group|endgroup|section|command)\]",  # GitHub/Azure markers
)
_PREFIX_RE = compile_re("^(?:\ufeff|" + "|".join(_PREFIXES) + ")")
RAW_PREFIX_RE = compile_re(("(?:" + "|".join(_PREFIXES) + ")").encode())  # for ASCII lines (no BOM in them)
# A progress message of another parallel job glued in front of / behind a diagnostic.
_GLUED_HEAD_RE = compile_re(
    r"^(?:Building|Linking|Generating|Compiling|Scanning)\b.*?\.(?:o|obj|so|a)(?=/|[A-Za-z]:\\)"
)
_GLUED_TAIL_RE = compile_re(r"(?<=\S)\[[ \t]*\d{1,3}%\][ \t]+(?:Building|Linking|Built target|Generating|Scanning).*$")

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00ab": "'",
        "\u00bb": "'",
        "\u2039": "'",
        "\u203a": "'",
        "\u300c": "'",
        "\u300d": "'",
        "\u300e": "'",
        "\u300f": "'",
        "\u00a0": " ",
        "\u202f": " ",
        "\u2009": " ",
        "\u3000": " ",
        "\uff1a": ":",
        "\uff08": "(",
        "\uff09": ")",
    }
)
_SPACED_QUOTE_RE = compile_re("\u00ab[ \u00a0\u202f]*([^\u00bb\n]*?)[ \u00a0\u202f]*\u00bb")  # French « x » → 'x'

# Localized severity words of gcc/clang/MSVC/ld (gcc's .po files), as data: English word -> its translations.
_LOCAL_FILE = Path(__file__).with_name("localized.yaml")


def _read_local_table() -> dict[str, str]:
    """Each localized severity word (lowercased) -> the English one."""
    from legacy_gpu_patch.classify.rulesyaml import load_shipped

    data = load_shipped(_LOCAL_FILE, _LOCAL_FILE.name)
    return {w.lower(): en for en, words in data["severity"].items() for w in words}


@lru_cache(maxsize=1)
def _local_words() -> dict[str, str]:
    """The table, from the cache where it was read before (no YAML reader to start: rulecache.py)."""
    from legacy_gpu_patch.classify.rulecache import cached, code_files

    return cached("localized", [_LOCAL_FILE, *code_files()], _read_local_table)


@lru_cache(maxsize=1)
def _local_re() -> re.Pattern[str]:
    """The localized severity words before a colon; made when a line may hold one (non-ASCII, or `ehler`,
    `rreur`, `rrore`): an English log never pays for it."""
    return compile_re(
        r"(?:(?<=^)|(?<=[\s:)\]]))("
        + "|".join(re.escape(w) for w in sorted(_local_words(), key=len, reverse=True))
        + r")(?=[ \t]*(?:[A-Z]{1,3}\d{3,5}[ \t]*)?[:：])",
        re.IGNORECASE,
    )


# A localized line gets a zero-width space at its end: rules see the English severity word, and identifier rules
# can tell (macro LOCAL) that the rest of the message is not English. Messages drop the mark.
LOCAL_MARK = "\u200b"


def _local_sub(m: re.Match[str]) -> str:
    word = m.group(1)
    return _local_words().get(word.lower(), word)


def strip_prefixes(text: str) -> str:
    """The line without colours and CI/tool prefixes, indentation after them kept."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "\r" in text:
        # progress bars redraw with \r: what is left on screen is the last non-empty segment
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    for _ in range(8):
        body = text.lstrip(" \t")
        m = _PREFIX_RE.match(body)
        if not m or not m.end():
            break
        text = body[m.end() :]
    return text.rstrip()


def normalize(text: str, unprefixed: frozenset[str] = frozenset()) -> str:
    """The line as the rules see it: no colours, no CI prefixes, plain quotes, English severity words.

    `unprefixed`: characters no CI prefix starts with (fastpath.UNPREFIXED_FIRST): a line starting with one, without
    colours or \r, has no prefix to strip, only its ends (most error lines of a build: `src/x.cpp:1:2: error`)."""
    if text[:1] in unprefixed and "\x1b" not in text and "\r" not in text:
        text = text.strip()  # strip_prefixes(text).lstrip(): _PREFIX_RE cannot match at this first character
    else:
        text = strip_prefixes(text).lstrip()
    if not text.isascii():
        if "\u00ab" in text:
            text = _SPACED_QUOTE_RE.sub(r"'\1'", text)
        text = text.translate(_QUOTES)
        localized = _local_re().sub(_local_sub, text)
        # a localized severity word, or letters beyond the quotes ("error" is also Spanish): not English
        text = localized + LOCAL_MARK if localized != text or not localized.isascii() else localized
    elif "ehler" in text or "rreur" in text or "rrore" in text:
        # ASCII-only localized lines (MSVC: "Fehler C2065: ...")
        localized = _local_re().sub(_local_sub, text)
        if localized != text:
            text = localized + LOCAL_MARK
    if "`" in text:
        text = text.replace("`", "'")
    if "%]" in text:
        text = _GLUED_TAIL_RE.sub("", text)
    if text[:1] in "BLGCS" and (".o/" in text or ".obj" in text or ".o\\" in text):
        m = _GLUED_HEAD_RE.match(text)
        if m:
            text = text[m.end() :]
    return text


# --------------------------------------------------------------------------------------------- locations

_LOC_RE = compile_re(
    r"(?P<file>(?:[A-Za-z]:[\\/])?[^\s:()'\"<>|*?,;=]*[^\s:()'\"<>|*?,;=.]\.[A-Za-z][A-Za-z0-9_+]{0,5})"
    r"(?::(?P<line>\d+)(?::\d+)?:|\((?P<line2>\d+)(?:,\d+)?\)\s*:)"
)
_LOC_CMAKE_RE = compile_re(r"CMake (?:Error|Warning)(?: \(dev\))? at (?P<file>[^\s:]+(?: [^\s:]+)*):(?P<line>\d+)")
_LOC_PY_RE = compile_re(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_LOC_LD_RE = compile_re(r"(?P<file>[^\s:()'\"]+\.[A-Za-z][A-Za-z0-9_+]{0,5}):\(\.[a-z]")
_PY_EXC_RE = compile_re(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")
# what every match of _LOC_RE holds (its line number's `:` or `(` and first digit): a line without it is not searched
# with _LOC_RE, whose leading `[^...]*` is tried at every place of the line (~11 us on a linker's 80-character line,
# paid by each kept occurrence of a failing build's linker errors); likewise `:(.` of _LOC_LD_RE (~3 us)
_LOC_NEEDS = compile_re(r"[:(]\d")


def location(text: str, before: Callable[[], Sequence[str]]) -> tuple[str | None, int | None, int]:
    """(file, line, end of the location in text) of a normalized diagnostic line; `before()` gives the lines before
    it, asked only where they are read (a Python exception's line: its `File "...", line N` comes first), so that a
    kept occurrence of a compiler error does not decode its context."""
    m = _LOC_CMAKE_RE.search(text)
    if m:
        return m.group("file"), int(m.group("line")), 0
    m = _LOC_RE.search(text) if _LOC_NEEDS.search(text) else None
    if m and m.start() < 400:
        line = m.group("line") or m.group("line2")
        return m.group("file"), int(line), m.end()
    if _PY_EXC_RE.match(text):
        for prev in reversed(before()):
            pm = _LOC_PY_RE.search(prev)
            if pm:
                return pm.group("file"), int(pm.group("line")), 0
    m = _LOC_LD_RE.search(text) if ":(." in text else None
    if m:
        return m.group("file"), None, 0
    return None, None, 0


def context_text(raw: bytes) -> str:
    """A context line as reports show it: decoded, without colours, cut to CONTEXT_CHARS."""
    text = raw[: CONTEXT_CHARS * 4].decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    return text.rstrip("\r\n")[:CONTEXT_CHARS]
