"""Streaming build-log classifier: which error is this, what causes it, which patchset fixes it.

Rules are data (legacy_gpu_patch/classify/rules/*.yaml, schema in rules_config.py). The log is read once, in chunks:

1. **Candidate lines.** A handful of case-sensitive literals ("triggers": `rror`, `ERROR`, `fatal`, `ndefined`, ...)
   are searched with `bytes.find` over each chunk (a trigger holding a byte rare in logs, such as the R of `ERROR`,
   through a memchr for that byte: see _Finder). `bytes.find` runs at C speed and touches no line that cannot
   matter, which is what makes a pure-Python classifier fast enough for gigabyte logs: per-line Python work is paid
   only for the few lines that contain a trigger (and for the few lines after them, for context). The commonest of
   those (compiler command echoes with -Werror, include chains and progress lines naming ErrorHandling.cpp) are
   decided on their raw bytes by one bytes regex of the lead exceptions, undecoded (see Classifier._raw_skipped).
2. **Normalisation** of a candidate: ANSI colours, CI prefixes (ISO timestamps, Docker BuildKit `#16 72.51`, Spack
   `>> 853`, MSBuild `1>`, progress `[ 45%]`/`[12/345]`), curly/guillemet quotes (gcc's ‘…’, »…«, « … »), localized
   severity words (Fehler, erreur, エラー, 错误, ...) and interleaved progress fragments from parallel jobs.
3. **Rules in order**, each gated by its own cheap lowercase literals (`prefilter`); the first rule whose regex
   matches decides. Exception rules (warnings about deprecated things, command echoes, ...) decide "no finding".
4. **Grouping**: findings are keyed by rule and a capture (`(?P<key>...)`, else the message without its location),
   so the same error in 40 translation units is one finding with count 40. Context lines before/after are kept for
   the first occurrence. `findings()` ranks the first root cause first: errors before warnings, root causes before
   consequences ("make: *** Error 1"), specific categories before the generic `other`, then by log position.

Lines wrapped by CMake (`CMake Error at ...:` + indented text) are joined into one message ("block" rules); a
generic finding also tries the next line joined to it, for messages a CI wrapped. Invalid UTF-8 is decoded with
replacement characters; memory stays bounded: lines longer than `max_line` bytes are matched on their first
`max_line` bytes, at most `max_findings` distinct findings and `max_occurrences` locations each are kept.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Optional

from legacy_gpu_patch.classify.rules_schema import CATEGORIES, RULES_FILE_SCHEMA
from legacy_gpu_patch.config.resources import rules_dir
from legacy_gpu_patch.config.schema import Ctx, did_you_mean
from legacy_gpu_patch.config.yamlio import LineDict, load_file
from legacy_gpu_patch.errors import ConfigError

try:  # the regex parser, to tell anchored patterns and first bytes (Python 3.11+; sre_parse before)
    from re import _constants as _sre_constants
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

__all__ = [
    "CATEGORIES",
    "Classifier",
    "Finding",
    "Rule",
    "RuleSet",
    "classify_bytes",
    "classify_file",
    "classify_lines",
    "load_rules",
    "normalize",
]

MATCH_WINDOW = 2048  # bytes of a long line looked at, around its first trigger
CONTEXT_CHARS = 300  # a context line is cut to this many characters in reports
MESSAGE_CHARS = 500
FULL_SCAN_BYTES = 2 << 20  # the first bytes of a log are searched with every trigger
SMALL_CHUNK = 256 << 10  # below this a chunk is joined to the open line of the last one (one scan, not two)
RECENT_BYTES = 2 << 20  # chunks kept for a search with the extended triggers when a failure shows
WRAP_MIN = 72  # a line this long may continue on the next one (consoles and CI viewers wrap at 80-200 columns)

# --------------------------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class BlockSpec:
    cont: re.Pattern[str]
    stop: re.Pattern[str] | None
    end: re.Pattern[str] | None
    max_lines: int


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    severity: str
    regex: re.Pattern[str]
    prefilter: tuple[str, ...]
    explanation: str
    fix: str
    patchsets: tuple[str, ...]
    exception: bool
    secondary: bool
    generic: bool
    block: BlockSpec | None
    examples: tuple[str, ...]
    not_examples: tuple[str, ...]
    source: str  # file:line where the rule is defined
    key_groups: tuple[str, ...]
    priority: int = 0  # position in the rule order (lower wins)


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    triggers: tuple[bytes, ...]  # searched in every chunk (non-ASCII ones only where their lead byte occurs)
    extended_triggers: tuple[bytes, ...]  # searched where a failure is likely: see Classifier._scan
    lead: int  # rules[:lead] (lead files) are tried first, one by one, each gated by its own prefilter
    literals: tuple[str, ...]  # distinct prefilter literals of rules[lead:]
    literal_rules: tuple[tuple[int, ...], ...]  # literals[i] gates these rule indices
    always: frozenset[int]  # rules[lead:] without a prefilter
    files: tuple[str, ...]

    def by_id(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def candidates(self, low: str) -> list[int]:
        """Indices (priority order) of rules[lead:] whose prefilter literals occur in the lowercased line."""
        idx = set(self.always)
        for lit, rules in zip(self.literals, self.literal_rules):
            if lit in low:
                idx.update(rules)
        return sorted(idx)


_MACRO_RE = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")


def _expand(pattern: str, macros: dict[str, str], ctx: Ctx, depth: int = 0) -> str:
    if depth > 8:
        raise ctx.error("macros nest too deeply (a macro refers to itself?)")

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in macros:
            raise ctx.error(f"unknown macro {{{name}}}{did_you_mean(name, macros)}; known: {', '.join(macros)}")
        return "(?:" + _expand(macros[name], macros, ctx, depth + 1) + ")"

    return _MACRO_RE.sub(sub, pattern)


def _lines_of(raw: Any, key: str) -> list[int]:
    value = raw.get(key) if isinstance(raw, dict) else None
    return list(getattr(value, "item_lines", []))


def _key_line(raw: Any, key: str, default: int) -> int:
    return raw.key_lines.get(key, default) if isinstance(raw, LineDict) else default


def rule_files(directory: Path | None = None) -> list[Path]:
    folder = directory or rules_dir()
    return sorted(folder.glob("*.yaml"))


def load_rules(files: Sequence[Path] | None = None) -> RuleSet:
    """Load and validate rule files (default: the shipped ones, in file-name order). Errors name file:line: key."""
    if files is None:
        return _default_rules()
    return _load(tuple(Path(f) for f in files))


@lru_cache(maxsize=1)
def _default_rules() -> RuleSet:
    return _load(tuple(rule_files()))


def _load(files: tuple[Path, ...]) -> RuleSet:
    if not files:
        raise ConfigError("no rule files found", hint=f"rules live in {rules_dir()}")
    parsed: list[tuple[str, Any, dict[str, Any]]] = []
    seen_plain: str | None = None
    macros: dict[str, str] = {}
    literal_sets: dict[str, list[str]] = {}
    triggers: list[str] = []
    extended: list[str] = []
    for path in files:
        shown = path.name if path.parent == rules_dir() else str(path)
        raw = load_file(path, shown)
        if raw is None:
            raw = LineDict()
        data = RULES_FILE_SCHEMA.validate(raw, Ctx(shown, "", getattr(raw, "line", 0)))
        if data["lead"] and seen_plain:
            raise Ctx(shown, "lead", _key_line(raw, "lead", 0)).error(
                f"a lead file must come before every other rules file ({seen_plain} sorts before it)"
            )
        if not data["lead"] and data["rules"]:
            seen_plain = seen_plain or shown
        for name, value in data["macros"].items():
            if name in macros:
                raise Ctx(shown, f"macros.{name}", 0).error(f"macro {name} is defined twice")
            macros[name] = value
        for name, value in data["literal_sets"].items():
            if name in literal_sets:
                raise Ctx(shown, f"literal_sets.{name}", 0).error(f"literal set {name} is defined twice")
            literal_sets[name] = value
        triggers += data["triggers"]
        extended += data["extended_triggers"]
        parsed.append((shown, raw, data))
    if not triggers:
        raise ConfigError("rule files define no triggers: no line would ever be looked at")
    rules: list[Rule] = []
    lead = 0
    seen: dict[str, str] = {}
    for shown, raw, data in parsed:
        lines = _lines_of(raw, "rules")
        raw_rules = raw.get("rules", []) if isinstance(raw, dict) else []
        for i, r in enumerate(data["rules"]):
            line = lines[i] if i < len(lines) else 0
            raw_rule = raw_rules[i] if i < len(raw_rules) else {}
            ctx = Ctx(shown, f"rules[{i}]", line)
            if r["id"] in seen:
                raise ctx.child("id", _key_line(raw_rule, "id", line)).error(
                    f"duplicate rule id {r['id']!r} (first in {seen[r['id']]})"
                )
            seen[r["id"]] = f"{shown}:{line}"
            rules.append(replace(_compile_rule(r, raw_rule, macros, literal_sets, ctx), priority=len(rules)))
        if data["lead"]:
            lead = len(rules)
    literal_rules: dict[str, list[int]] = {}
    always: set[int] = set()
    for i in range(lead, len(rules)):
        if not rules[i].prefilter:
            always.add(i)
        for lit in rules[i].prefilter:
            literal_rules.setdefault(lit, []).append(i)
    return RuleSet(
        rules=tuple(rules),
        triggers=tuple(dict.fromkeys(t.encode() for t in triggers)),
        extended_triggers=tuple(dict.fromkeys(t.encode() for t in extended)),
        lead=lead,
        literals=tuple(literal_rules),
        literal_rules=tuple(tuple(v) for v in literal_rules.values()),
        always=frozenset(always),
        files=tuple(str(f) for f in files),
    )


def _compile(pattern: str, flags: int, ctx: Ctx) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ctx.error(f"invalid regular expression: {exc}") from None


def _compile_rule(
    r: dict[str, Any], raw: Any, macros: dict[str, str], literal_sets: dict[str, list[str]], ctx: Ctx
) -> Rule:
    def sub(key: str) -> Ctx:
        return ctx.child(key, _key_line(raw, key, ctx.line))

    flags = 0 if r["case_sensitive"] else re.IGNORECASE
    regex = _compile(_expand(r["pattern"], macros, sub("pattern")), flags, sub("pattern"))
    literals: list[str] = []
    for lit in r["prefilter"]:
        if lit.startswith("$"):
            name = lit[1:]
            if name not in literal_sets:
                raise sub("prefilter").error(
                    f"unknown literal set {lit}{did_you_mean(name, literal_sets)}; known: {', '.join(literal_sets)}"
                )
            literals += literal_sets[name]
        else:
            literals.append(lit)
    prefilter = tuple(dict.fromkeys(lit.lower() for lit in literals))
    for lit in prefilter:
        if not lit.strip():
            raise sub("prefilter").error("empty prefilter literal")
    if not r["exception"] and not r["explanation"].strip():
        raise sub("explanation").error("a rule that reports a finding needs a one-sentence explanation")
    if r["exception"] and (r["patchset"] or r["fix"]):
        raise sub("exception").error("an exception rule reports nothing, so it takes no fix or patchset")
    block = None
    if r["block"] is not None:
        b = r["block"]
        bctx = sub("block")
        block = BlockSpec(
            cont=_compile(b["continue"], 0, bctx),
            stop=_compile(b["stop"], 0, bctx) if b["stop"] else None,
            end=_compile(b["end"], 0, bctx) if b["end"] else None,
            max_lines=b["max_lines"],
        )
    key_groups = tuple(name for name in regex.groupindex if name.startswith("key"))
    return Rule(
        id=r["id"],
        category=r["category"],
        severity=r["severity"],
        regex=regex,
        prefilter=prefilter,
        explanation=r["explanation"].strip(),
        fix=r["fix"].strip(),
        patchsets=tuple(r["patchset"]),
        exception=r["exception"],
        secondary=r["secondary"],
        generic=r["generic"],
        block=block,
        examples=tuple(str(e) for e in r["examples"]),
        not_examples=tuple(str(e) for e in r["not_examples"]),
        source=f"{ctx.source}:{ctx.line}",
        key_groups=key_groups,
    )


# --------------------------------------------------------------------------------------------- normalisation

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]")
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
_PREFIX_RE = re.compile("^(?:\ufeff|" + "|".join(_PREFIXES) + ")")
_RAW_PREFIX_RE = re.compile(("(?:" + "|".join(_PREFIXES) + ")").encode())  # for ASCII lines (no BOM in them)
# A progress message of another parallel job glued in front of / behind a diagnostic.
_GLUED_HEAD_RE = re.compile(
    r"^(?:Building|Linking|Generating|Compiling|Scanning)\b.*?\.(?:o|obj|so|a)(?=/|[A-Za-z]:\\)"
)
_GLUED_TAIL_RE = re.compile(r"(?<=\S)\[[ \t]*\d{1,3}%\][ \t]+(?:Building|Linking|Built target|Generating|Scanning).*$")

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
_SPACED_QUOTE_RE = re.compile("\u00ab[ \u00a0\u202f]*([^\u00bb\n]*?)[ \u00a0\u202f]*\u00bb")  # French « x » → 'x'

# Localized severity words of gcc/clang/MSVC/ld (gcc's .po files); only the position before ':' is rewritten.
_LOCAL_SEVERITY = {
    "fatal error": [
        "schwerwiegender Fehler",
        "erreur fatale",
        "errore fatale",
        "error fatal",
        "erro fatal",
        "致命的エラー",
        "致命错误",
        "致命錯誤",
        "фатальная ошибка",
        "치명적 오류",
        "błąd krytyczny",
        "fatale fout",
        "kritická chyba",
    ],
    "error": [
        "Fehler",
        "erreur",
        "errore",
        "erro",
        "エラー",
        "错误",
        "錯誤",
        "ошибка",
        "помилка",
        "오류",
        "błąd",
        "hata",
        "chyba",
        "hiba",
        "fout",
        "fel",
        "virhe",
        "σφάλμα",
        "lỗi",
    ],
    "warning": [
        "Warnung",
        "avertissement",
        "attenzione",
        "aviso",
        "advertencia",
        "警告",
        "предупреждение",
        "попередження",
        "경고",
        "ostrzeżenie",
        "uyarı",
        "varování",
        "figyelmeztetés",
        "waarschuwing",
        "varning",
        "varoitus",
        "cảnh báo",
    ],
    "note": [
        "Anmerkung",
        "Hinweis",
        "remarque",
        "nota",
        "備考",
        "附注",
        "附註",
        "замечание",
        "참고",
        "uwaga",
        "poznámka",
        "opmerking",
        "anm",
    ],
}
_LOCAL_WORDS = {w: en for en, words in _LOCAL_SEVERITY.items() for w in words}
_LOCAL_RE = re.compile(
    r"(?:(?<=^)|(?<=[\s:)\]]))("
    + "|".join(re.escape(w) for w in sorted(_LOCAL_WORDS, key=len, reverse=True))
    + r")(?=[ \t]*(?:[A-Z]{1,3}\d{3,5}[ \t]*)?[:：])",
    re.IGNORECASE,
)


# A localized line gets a zero-width space at its end: rules see the English severity word, and identifier rules
# can tell (macro LOCAL) that the rest of the message is not English. Messages drop the mark.
LOCAL_MARK = "\u200b"


def _local_sub(m: re.Match[str]) -> str:
    word = m.group(1)
    for w, en in _LOCAL_WORDS.items():
        if w.lower() == word.lower():
            return en
    return word


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


def normalize(text: str) -> str:
    """The line as the rules see it: no colours, no CI prefixes, plain quotes, English severity words."""
    text = strip_prefixes(text).lstrip()
    if not text.isascii():
        if "\u00ab" in text:
            text = _SPACED_QUOTE_RE.sub(r"'\1'", text)
        text = text.translate(_QUOTES)
        localized = _LOCAL_RE.sub(_local_sub, text)
        # a localized severity word, or letters beyond the quotes ("error" is also Spanish): not English
        text = localized + LOCAL_MARK if localized != text or not localized.isascii() else localized
    elif "ehler" in text or "rreur" in text or "rrore" in text:
        # ASCII-only localized lines (MSVC: "Fehler C2065: ...")
        localized = _LOCAL_RE.sub(_local_sub, text)
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

_LOC_RE = re.compile(
    r"(?P<file>(?:[A-Za-z]:[\\/])?[^\s:()'\"<>|*?,;=]*[^\s:()'\"<>|*?,;=.]\.[A-Za-z][A-Za-z0-9_+]{0,5})"
    r"(?::(?P<line>\d+)(?::\d+)?:|\((?P<line2>\d+)(?:,\d+)?\)\s*:)"
)
_LOC_CMAKE_RE = re.compile(r"CMake (?:Error|Warning)(?: \(dev\))? at (?P<file>[^\s:]+(?: [^\s:]+)*):(?P<line>\d+)")
_LOC_PY_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_LOC_LD_RE = re.compile(r"(?P<file>[^\s:()'\"]+\.[A-Za-z][A-Za-z0-9_+]{0,5}):\(\.[a-z]")
_PY_EXC_RE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")


def _location(text: str, before: Sequence[str]) -> tuple[str | None, int | None, int]:
    """(file, line, end of the location in text) of a normalized diagnostic line."""
    m = _LOC_CMAKE_RE.search(text)
    if m:
        return m.group("file"), int(m.group("line")), 0
    m = _LOC_RE.search(text)
    if m and m.start() < 400:
        line = m.group("line") or m.group("line2")
        return m.group("file"), int(line), m.end()
    if _PY_EXC_RE.match(text):
        for prev in reversed(before):
            pm = _LOC_PY_RE.search(prev)
            if pm:
                return pm.group("file"), int(pm.group("line")), 0
    m = _LOC_LD_RE.search(text)
    if m:
        return m.group("file"), None, 0
    return None, None, 0


# --------------------------------------------------------------------------------------------- findings


@dataclass
class Occurrence:
    log_line: int
    file: str | None
    line: int | None
    phase: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"log_line": self.log_line, "file": self.file, "line": self.line, "phase": self.phase}


@dataclass
class Finding:
    """One distinct problem; `count` occurrences of it (the same error in 40 files is one finding)."""

    rule: str
    category: str
    severity: str
    message: str
    file: str | None
    line: int | None
    log_line: int  # 1-based line of the first occurrence in the log
    phase: str | None
    explanation: str
    fix: str
    patchsets: tuple[str, ...]
    secondary: bool
    generic: bool
    key: str
    context_before: list[str] = field(default_factory=list)
    context_after: list[str] = field(default_factory=list)
    count: int = 1
    occurrences: list[Occurrence] = field(default_factory=list)
    _after_wanted: int = 0

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def where(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or f"log line {self.log_line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "rule": self.rule,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "log_line": self.log_line,
            "phase": self.phase,
            "message": self.message,
            "count": self.count,
            "explanation": self.explanation,
            "fix": self.fix,
            "patchset": list(self.patchsets),
            "secondary": self.secondary,
            "context": {"before": list(self.context_before), "after": list(self.context_after)},
            "occurrences": [o.to_dict() for o in self.occurrences],
        }


def rank_key(f: Finding) -> tuple[bool, bool, bool, int]:
    return (f.severity != "error", f.secondary, f.generic, f.log_line)


@dataclass
class _Block:
    rule: Rule
    lineno: int
    header: str
    before: list[str]
    lines: list[str] = field(default_factory=list)


@dataclass
class _Recent:
    """A chunk kept for a later search with the extended triggers."""

    block: bytes
    base: int  # lines before it
    processed: set[int]  # line starts already looked at
    extended: bool  # already searched with the extended triggers
    start: int = 0  # the chunk is block[start:end] (the data read, scanned in place)
    end: int = -1


@dataclass
class _Pending:
    """A generic finding waiting one line: a CI may have wrapped its message."""

    rule: Rule
    lineno: int
    text: str
    before: list[str]
    match: re.Match[str]


def _context_text(raw: bytes) -> str:
    text = raw[: CONTEXT_CHARS * 4].decode("utf-8", "replace")
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    return text.rstrip("\r\n")[:CONTEXT_CHARS]


_NEW_MESSAGE_RE = re.compile(
    r"^(?:\S+:\d+(?::\d+)?:|\S+\(\d+(?:,\d+)?\)\s*:|(?:fatal )?error\b|warning\b|note\b|In file included|"
    r"\[[ \t]*\d+%\]|\[\d+/\d+\]|(?:g?make|ninja)(?:\[\d+\])?:|FAILED:|--|\*\*|Traceback|CMake|#)",
    re.IGNORECASE,
)

# a line with its own severity marker starts a message of its own (it does not continue a wrapped one)
_MARKER_RE = re.compile(r"\b(?:error|warning|fatal|note)\b[ \t]*:|[a-z](?:Error|Exception|Warning):")

# --------------------------------------------------------------------------------------------- classifier


# Lead exceptions that can be tested on the raw bytes of a plain line (ASCII, no colours, no \r; CI prefixes
# stripped as normalize() strips them): the compiler command echoes, include chains, progress, CMake status and
# test lines that make up most trigger-holding lines of a build log. A raw match means normalize() leaves the head
# as it is and the same exception reads it (on ASCII text a bytes pattern and its str twin agree, case-insensitive
# ones included, as long as the text holds none of \x1c-\x1f, which only str patterns count as whitespace).
_RAW_SKIP_IDS = ("command-echo", "include-chain", "progress-line", "cmake-status", "test-result-line")
# normalize() strips a glued progress message only from a text starting with one of these (see normalize)
_GLUE_FIRST = frozenset(b"BLGCS")


def _first_bytes(regex: re.Pattern[bytes]) -> frozenset[int] | None:
    """The bytes a match of `regex` can start with, or None when that is not plain to see."""
    if regex.flags & re.IGNORECASE:
        return None
    c = _sre_constants

    def first(items: Any) -> set[int] | None:
        for op, av in items:
            if op is c.AT:
                continue  # zero-width
            if op is c.LITERAL:
                return {av}
            if op is c.IN:
                out: set[int] = set()
                for iop, iav in av:
                    if iop is c.LITERAL:
                        out.add(iav)
                    elif iop is c.RANGE:
                        out.update(range(iav[0], iav[1] + 1))
                    elif iop is c.CATEGORY and iav is c.CATEGORY_DIGIT:
                        out.update(b"0123456789")
                    else:
                        return None
                return out
            if op is c.SUBPATTERN:
                return None if av[1] & re.IGNORECASE else first(av[3])
            if op is c.BRANCH:
                union: set[int] = set()
                for branch in av[1]:
                    f = first(branch)
                    if f is None:
                        return None
                    union |= f
                return union
            if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] >= 1:
                return first(av[2])
            return None
        return None

    try:
        found = first(_sre_parse.parse(regex.pattern, regex.flags))
    except Exception:  # an internal module: any surprise means "not known"
        return None
    return frozenset(found) if found is not None else None


_RAW_PREFIX_FIRST = _first_bytes(_RAW_PREFIX_RE)
# first bytes of a line _strip_raw_prefixes may change (all of them where the prefixes' first bytes are unknown)
_MAY_BE_PREFIXED = frozenset(
    bytes((b,)) for b in (range(256) if _RAW_PREFIX_FIRST is None else (*_RAW_PREFIX_FIRST, 0x20, 0x09))
)


def _strip_raw_prefixes(raw: bytes) -> bytes:
    """strip_prefixes() for an ASCII line without colours or \\r, in bytes (its indentation and end kept)."""
    text = raw
    for _ in range(8):
        body = text.lstrip(b" \t")
        if not body or (_RAW_PREFIX_FIRST is not None and body[0] not in _RAW_PREFIX_FIRST):
            break
        m = _RAW_PREFIX_RE.match(body)
        if not m or not m.end():
            break
        text = body[m.end() :]
    return text


def _anchored(regex: re.Pattern[Any]) -> bool:
    """Whether every match of `regex` must start at the beginning of the text (each branch starts with `^`).

    Such a pattern is run with match(), not search(): search() tries it at every position of the line (sre only
    stops early for a pattern whose very first item is `^`, not for `(^a)|(^b)`), match() once. False when unsure.
    """
    if regex.flags & re.MULTILINE:
        return False
    try:
        parsed = _sre_parse.parse(regex.pattern, regex.flags)
    except Exception:  # an internal module: any surprise means "not known to be anchored"
        return False
    c = _sre_constants
    begin = (c.AT_BEGINNING, c.AT_BEGINNING_STRING)

    def starts(items: Any) -> bool:
        if not len(items):
            return False
        op, av = items[0]
        if op is c.AT:
            return av in begin
        if op is c.SUBPATTERN:
            add_flags = av[1]
            return not add_flags & re.MULTILINE and starts(av[3])
        if op is c.BRANCH:
            return all(starts(b) for b in av[1])
        if op is getattr(c, "ATOMIC_GROUP", None):
            return starts(av)
        return False

    return starts(parsed)


_Step = tuple[Rule, Optional[list[tuple[int, Rule]]], Callable[[str], Optional["re.Match[str]"]]]


def _lead_steps(lead: Sequence[Rule]) -> list[_Step]:
    """The lead rules in order, runs of two or more exceptions without prefilter merged into one regex.

    A merged step is (a stand-in Rule holding the merged regex, [(group of each member, member)], its matcher); the
    others are (rule, None, matcher). Each member's pattern is wrapped in a group of its own, numbered after the
    groups before it. The matcher is the regex's match() where the pattern is anchored (see _anchored), else search().
    """
    steps: list[_Step] = []
    run: list[Rule] = []

    def close_run() -> None:
        if len(run) < 2:
            steps.extend((r, None, _matcher(r.regex)) for r in run)
        else:
            parts, members, idx = [], [], 1
            for r in run:
                flags = "" if r.regex.flags & re.IGNORECASE == 0 else "(?i:"
                body = r.regex.pattern
                parts.append(f"({flags}{body}{')' if flags else ''})")
                members.append((idx, r))
                idx += 1 + r.regex.groups
            try:
                merged = re.compile("|".join(parts))
            except re.error:  # duplicate group names across members: keep them apart
                steps.extend((r, None, _matcher(r.regex)) for r in run)
            else:
                steps.append((replace(run[0], regex=merged), members, _matcher(merged)))
        run.clear()

    for rule in lead:
        if rule.exception and not rule.prefilter:
            run.append(rule)
        else:
            close_run()
            steps.append((rule, None, _matcher(rule.regex)))
    close_run()
    return steps


def _matcher(regex: re.Pattern[str]) -> Callable[[str], re.Match[str] | None]:
    return regex.match if _anchored(regex) else regex.search


@lru_cache(maxsize=8)
def _lead_machinery(lead: tuple[Rule, ...]) -> tuple[re.Pattern[bytes] | None, list[_Step]]:
    """The raw fast-path regex and the lead steps of a rule set, built once (a Classifier is cheap to make)."""
    return _raw_skip_regex(lead), _lead_steps(lead)


def _raw_skip_regex(lead: Sequence[Rule]) -> re.Pattern[bytes] | None:
    """One bytes regex for the raw fast path, or None where the rules do not allow it.

    Only exceptions preceded by exceptions alone qualify: whatever lead rule reads such a line first, it is not a
    finding.
    """
    parts = []
    for rule in lead:
        if not rule.exception:
            break
        if rule.id not in _RAW_SKIP_IDS:
            continue
        src = rule.regex.pattern
        if not src.startswith("^") or not src.isascii():
            continue
        group = b"(?i:" if rule.regex.flags & re.IGNORECASE else b"(?:"
        parts.append(group + src[1:].encode() + b")")
    if not parts:
        return None
    # the indentation once, before the alternation: its branches then start with a literal that sre tests first
    return re.compile(b"[ \t]*(?:" + b"|".join(parts) + b")")


# Bytes rare in build logs, rarest first. Most of a log is lowercase words, digits, paths and flags; its uppercase
# letters are mostly those of CUDA, CMAKE, CXX, TORCH and of capitalised words (Found, Linking, Fill), and these are
# left out. Non-ASCII bytes rank before all.
_RARE_BYTES = b"`~^|@!$&?;{}\\*QZJVYKWGBHPNRO"
PLAIN_AFTER_MISS = 8 << 20  # bytes searched with bytes.find after a trigger's rare byte proved frequent


@lru_cache(maxsize=256)
def _rare_index(needle: bytes) -> int:
    """Index in `needle` of its rarest byte by _RARE_BYTES, or -1 (none, or a trigger searched only where its
    non-ASCII lead byte occurs: there its bytes are not rare)."""
    if not needle[:1].isascii():
        return -1
    best, best_rank = -1, len(_RARE_BYTES)
    for i, byte in enumerate(needle):
        if byte >= 0x80:
            rank = -1
        else:
            rank = _RARE_BYTES.find(bytes((byte,)))
            if rank < 0:
                continue
        if rank < best_rank:
            best, best_rank = i, rank
    return best


class _Finder:
    """One trigger's search: bytes.find, or, for a trigger that holds a byte rare in build logs ("ERROR",
    "Killed", "** WARNING"), memchr for that byte (bytes.find of one byte: many bytes a cycle) with each hit checked
    in place. Fastsearch steps through a log a few bytes at a time, and slower when the log is full of the trigger's
    letters; the rare byte is skipped to. Where the rare byte turns out frequent (more than one miss per 2 KiB
    searched), the search falls back to bytes.find for the next PLAIN_AFTER_MISS bytes: never much slower than the
    plain search. Both return the same position: the first occurrence at or after `pos` ending by `end`.
    """

    __slots__ = ("byte", "k", "needle", "plain_left")

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self.k = _rare_index(needle)
        self.byte = needle[self.k : self.k + 1] if self.k >= 0 else b""
        self.plain_left = 0

    def first(self, block: bytes, pos: int, end: int) -> int:
        return self.rare(block, pos, end) if self.byte else block.find(self.needle, pos, end)

    def rare(self, block: bytes, pos: int, end: int) -> int:
        needle = self.needle
        find = block.find
        if self.plain_left > 0:
            q = find(needle, pos, end)
            self.plain_left -= (q if q >= 0 else end) - pos
            return q
        k = self.k
        byte = self.byte
        startswith = block.startswith
        budget = 8 + ((end - pos) >> 11)
        q = find(byte, pos + k, end)
        while q >= 0:
            if startswith(needle, q - k, end):
                return q - k
            budget -= 1
            if budget < 0:
                # every start up to q - k was checked: none holds the trigger
                self.plain_left = PLAIN_AFTER_MISS
                return find(needle, q - k + 1, end)
            q = find(byte, q + 1, end)
        return -1


def _starts_before(m: re.Match[str], seam: int) -> bool:
    """Whether a reading of a joined line begins before `seam`: the match itself (one that does not merely start
    with a look-ahead at column 0), or its key (the name it is about)."""
    if 0 < m.start() < seam:
        return True
    return any(m.start(g) < seam for g, v in m.groupdict().items() if v is not None and g.startswith("key"))


class Classifier:
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
        full_scan: int = FULL_SCAN_BYTES,
    ) -> None:
        self.rules = rules or load_rules()
        self.context_before = context_before
        self.context_after = context_after
        self.max_line = max_line
        self.max_findings = max_findings
        self.max_occurrences = max_occurrences
        self.phase: str | None = None
        self.lines = 0  # complete lines seen
        self.bytes = 0
        self.errors = 0  # error occurrences (not distinct findings)
        self.warnings = 0
        self.dropped = 0  # occurrences of findings beyond max_findings
        self._findings: dict[tuple[str, str], Finding] = {}
        self._partial = b""
        self._skip_long = False
        self._carry: deque[bytes] = deque(maxlen=max(context_before, 1))
        self._want = 0  # lines after the current one that must be looked at (context, blocks, joins)
        self._after_open: list[Finding] = []
        self._block: _Block | None = None
        self._pending: _Pending | None = None
        self._rules = self.rules.rules
        self._lead = self.rules.lead
        self._literals = self.rules.literals
        self._literal_rules = self.rules.literal_rules
        self._always = self.rules.always
        self.full_scan = full_scan
        self._core = tuple(_Finder(t) for t in self.rules.triggers if t[0] < 0x80)
        self._gated = tuple((t[:1], _Finder(t)) for t in self.rules.triggers if t[0] >= 0x80)
        self._extended = tuple(_Finder(t) for t in self.rules.extended_triggers)
        self._scanned = 0
        self._recent: deque[_Recent] = deque()
        self._recent_bytes = 0
        self._block_start = 0  # where the chunk being scanned starts in its block
        self._consequence = False
        self.on_finding: Any = None  # callback(finding, new: bool) for live displays
        self._raw_skip, self._lead_steps = _lead_machinery(self._rules[: self._lead])

    # ----------------------------------------------------------------------------------------- feeding

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
        self._rescan()  # the end of a log is where a build fails
        return self.findings()

    # ----------------------------------------------------------------------------------------- scanning

    def _needles(self, block: bytes, extended: bool, ascii: bool | None = None) -> Sequence[_Finder]:
        if ascii is None:
            ascii = block.isascii()
        if not self._gated or ascii:
            return self._core + self._extended if extended else self._core
        needles = list(self._core)
        leads: dict[bytes, bool] = {}
        for lead, needle in self._gated:
            present = leads.get(lead)
            if present is None:
                present = leads[lead] = lead in block  # a one-byte search is a memchr: nearly free
            if present:
                needles.append(needle)
        if extended:
            needles += self._extended
        return needles

    @staticmethod
    def _candidates(block: bytes, needles: Iterable[_Finder], start: int = 0, end: int = -1) -> dict[int, int]:
        """Line start → position of the first trigger in that line, for every line of block[start:end] (whole
        lines) holding a trigger."""
        if end < 0:
            end = len(block)
        find = block.find
        rfind = block.rfind
        cands: dict[int, int] = {}
        for needle in needles:
            p = needle.first(block, start, end)
            while p >= 0:
                s = rfind(b"\n", start, p) + 1 or start
                if s not in cands or cands[s] > p:
                    cands[s] = p
                p = find(b"\n", p, end)
                if p < 0:
                    break
                p = needle.first(block, p, end)
        return cands

    def _scan(self, block: bytes, start: int = 0, end: int = -1) -> None:
        """Classify a run of complete lines (it ends with b"\\n").

        The core triggers are searched everywhere. The extended ones (phrases of errors that carry no "error":
        "cannot find -lcuda", "Killed", "*** WARNING: Skip installing") are searched in the first `full_scan`
        bytes (so short logs and excerpts get everything), and later only where a failure shows: when a
        consequence line ("make: *** Error 1", "collect2: ld returned 1") is found, the recent chunks are searched
        again with them, and so is the end of the log. Each trigger costs a pass over the data; this keeps the
        passes over a gigabyte log to the few core ones.

        The passes are interleaved with the line work: each trigger's next occurrence is kept and searched again
        only once the scan has gone past it, so the lines come in order without a table of them, and a line the
        raw fast path decides (see _raw_skipped) costs a few C calls. Line numbers are counted only for the lines
        that need one, and once per chunk for the rest.
        """
        find = block.find
        rfind = block.rfind
        if end < 0:
            end = len(block)
        extended = self._scanned < self.full_scan
        self._scanned += end - start
        self._block_start = start
        plain = block.isascii()  # then so is every line: _raw_skipped need not ask
        # [next occurrence, trigger, its rare-byte search or None] of each trigger present; `end` once it has none left
        nexts: list[list[Any]] = []
        for finder in self._needles(block, extended, plain):
            rare = finder.rare if finder.byte else None
            p = rare(block, start, end) if rare is not None else find(finder.needle, start, end)
            if p >= 0:
                nexts.append([p, finder.needle, rare])
        processed: set[int] = set()
        base = self.lines
        counted_pos = start
        counted = 0
        pos = start  # first byte not yet looked at (a line start)
        raw_skipped = self._raw_skipped
        while pos < end:
            hit = end  # the first trigger at or after pos
            for nx in nexts:
                p = nx[0]
                if p < pos:
                    rare = nx[2]
                    p = rare(block, pos, end) if rare is not None else find(nx[1], pos, end)
                    if p < 0:
                        p = end
                    nx[0] = p
                if p < hit:
                    hit = p
            if self._want > 0:
                s = pos  # context, block or join: the next line, trigger or not
                e = find(b"\n", s)
                if hit >= e:
                    hit = -1
            elif hit >= end:
                break
            else:
                s = rfind(b"\n", pos, hit) + 1 or pos
                e = find(b"\n", hit)
                if raw_skipped(block[s:e], plain):
                    processed.add(s)
                    pos = e + 1
                    continue
            counted += block.count(b"\n", counted_pos, s)
            counted_pos = s
            if self._line(base + counted + 1, block, s, e, hit, checked=self._want <= 0):
                processed.add(s)
            pos = e + 1
        self.lines = base + counted + block.count(b"\n", counted_pos, end)
        # keep the last lines for the before-context of the next chunk's first lines
        k = self._carry.maxlen or 1
        tail: list[bytes] = []
        stop = end - 1
        while len(tail) < k and stop > start:
            first = block.rfind(b"\n", start, stop) + 1 or start
            tail.append(block[first:stop])
            stop = first - 1
        for line in reversed(tail):
            self._carry.append(line)
        self._recent.append(_Recent(block, base, processed, extended, start, end))
        self._recent_bytes += end - start
        while self._recent_bytes > RECENT_BYTES and len(self._recent) > 1:
            old = self._recent.popleft()
            self._recent_bytes -= old.end - old.start
        if self._consequence:
            self._consequence = False
            self._rescan()

    def _rescan(self) -> None:
        """Search the recent chunks with the extended triggers, classifying lines not looked at yet."""
        if not self._extended:
            return
        for rec in self._recent:
            if rec.extended:
                continue
            rec.extended = True
            block = rec.block
            cands = self._candidates(block, self._extended, rec.start, rec.end)
            for s in sorted(cands):
                if s in rec.processed:
                    continue
                rec.processed.add(s)
                e = block.find(b"\n", s)
                lineno = rec.base + block.count(b"\n", rec.start, s) + 1
                raw = block[s:e]
                if len(raw) > MATCH_WINDOW:
                    lo = max(0, cands[s] - s - MATCH_WINDOW // 4)
                    raw = raw[lo : lo + MATCH_WINDOW]
                text = normalize(raw.decode("utf-8", "replace"))
                hit = self.match(text) if text else None
                if hit is None or hit[0].exception or hit[0].block is not None:
                    continue
                before = self._before_in(block, s, self.context_before, rec.start)
                after = self._after_in(block, e, self.context_after, rec.end)
                self._record(hit[0], hit[1], lineno, text, before, after=after)

    @staticmethod
    def _before_in(block: bytes, s: int, n: int, lo: int = 0) -> list[str]:
        out: list[bytes] = []
        end = s - 1
        while len(out) < n and end >= lo:
            start = block.rfind(b"\n", lo, end) + 1 or lo
            out.append(block[start:end])
            end = start - 1
        return [_context_text(b) for b in reversed(out)]

    @staticmethod
    def _after_in(block: bytes, e: int, n: int, hi: int = -1) -> list[str]:
        out = []
        pos = e + 1
        if hi < 0:
            hi = len(block)
        while len(out) < n and pos < hi:
            nxt = block.find(b"\n", pos, hi)
            if nxt < 0:
                break
            out.append(_context_text(block[pos:nxt]))
            pos = nxt + 1
        return out

    def _before(self, block: bytes, s: int, n: int) -> list[str]:
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
        return [_context_text(b) for b in reversed(out)]

    def _raw_skipped(self, raw: bytes, ascii: bool = False) -> bool:
        """Whether a plain line is decided on its raw bytes: a command echo, include chain or progress line.

        The raw regex (see _raw_skip_regex) reads the line as normalize() would leave it only when the line is
        ASCII and holds nothing that normalize() rewrites besides its prefixes (stripped here as there): colours,
        \\r, a progress message of another job glued in front ("Building x.o/src/a.cpp:1: error"), localized
        severity words of ASCII languages (they end the line with LOCAL_MARK, which an anchored `$` then misses).
        Then the same exception reads the normalized text, and the decode and normalisation are saved. A long line
        is read on its first MATCH_WINDOW bytes, as _line() reads it.
        """
        skip = self._raw_skip
        if skip is None or not (ascii or raw.isascii()):
            return False
        head = raw if len(raw) <= MATCH_WINDOW else raw[:MATCH_WINDOW]
        if head[:1] in _MAY_BE_PREFIXED:
            head = _strip_raw_prefixes(head)
        if skip.match(head) is None:
            return False
        # `in` on str: bytes' `in` first tries the needle as an int and pays for the TypeError, several times slower
        text = raw.decode("latin-1")
        if "\x1b" in text or "\r" in text or "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text:
            return False
        # _LOCAL_RE rewrites a word only before a colon: most command echoes have none
        if ":" in text and ("ehler" in text or "rreur" in text or "rrore" in text):
            return False
        body = head.lstrip()
        if body and body[0] not in _GLUE_FIRST:
            return True
        return not (".o/" in text or ".obj" in text or ".o\\" in text)

    def _line(self, lineno: int, block: bytes, s: int, e: int, hit: int, checked: bool = False) -> bool:
        """Look at one line; True when it was classified or taken into a block or join (done with it).

        `checked`: the caller already knows the raw fast path does not decide the line.
        """
        raw = block[s:e]
        if self._want > 0:
            self._want -= 1
            text = None
            if self._after_open:
                ctx = _context_text(raw)
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
            if self._pending is not None:
                if text is None:
                    text = normalize(raw[: MATCH_WINDOW * 2].decode("utf-8", "replace"))
                if self._finish_pending(text, strip_prefixes(raw[:256].decode("utf-8", "replace"))[:1].encode()):
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

    # ----------------------------------------------------------------------------------------- matching

    def match(self, text: str) -> tuple[Rule, re.Match[str]] | None:
        """The first rule (exceptions included) that matches a normalized line.

        The rules of the lead files (anchored exceptions: command echoes, progress lines, warnings) are tried
        first, one by one; then the prefilter literals present in the line select the rules worth a regex among
        the rest, in priority order.
        """
        hit = self._lead_match(text)
        if hit is not None:
            return hit
        rules = self._rules
        low = text.lower()
        idx = set(self._always)
        for lit, gated in zip(self._literals, self._literal_rules):
            if lit in low:
                idx.update(gated)
        for i in sorted(idx):
            m = rules[i].regex.search(text)
            if m:
                return rules[i], m
        return None

    def _lead_match(self, text: str) -> tuple[Rule, re.Match[str]] | None:
        low = None
        for rule, group, find in self._lead_steps:
            if group is not None:
                # consecutive exceptions without prefilter, as one regex: which one matched does not matter
                gm = find(text)
                if gm:
                    for idx, member in group:
                        if gm.start(idx) >= 0:
                            return member, gm
                continue
            if rule.prefilter:
                if low is None:
                    low = text.lower()
                for lit in rule.prefilter:
                    if lit in low:
                        break
                else:
                    continue
            m = find(text)
            if m:
                return rule, m
        return None

    def _match_excluding(self, text: str, header: Rule) -> tuple[Rule, re.Match[str]] | None:
        """Like match(), for the joined text of a block: skipping block headers (the one that opened it too)."""
        low = text.lower()
        for rule in self._rules:
            if rule is header or rule.block is not None:
                continue
            if rule.prefilter and not any(lit in low for lit in rule.prefilter):
                continue
            m = rule.regex.search(text)
            if m:
                return rule, m
        return None

    def _classify(self, lineno: int, text: str, block: bytes | None, s: int) -> None:
        hit = self.match(text)
        if hit is None:
            return
        rule, m = hit
        if rule.exception:
            return
        before = self._before(block, s, self.context_before) if block is not None else []
        if rule.block is not None:
            self._finish_block()
            self._block = _Block(rule, lineno, text, before)
            self._want = max(self._want, rule.block.max_lines)
            return
        if rule.generic or len(text) >= WRAP_MIN:
            # a generic reading, or a line long enough to have been wrapped by a CI: the next line decides
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
        m = blk.rule.regex.search(blk.header)
        if m:
            self._record(blk.rule, m, blk.lineno, joined, blk.before, after=context_after)

    def _own_message(self, text: str) -> bool:
        """Whether a line reads as a message of its own (a specific rule, or an exception such as a warning)."""
        hit = self.match(text)
        return hit is not None and not hit[0].generic

    def _finish_pending(self, next_text: str | None, next_raw: bytes = b"") -> bool:
        """Resolve a waiting finding; True if `next_text` was consumed as its wrapped continuation.

        Only a line that stops mid-word can continue on the next; the joined text wins only if a rule of higher
        priority reads it (a wrapped identifier completed, a generic error that turns out to be a known one). An
        indented next line is source code, not a continuation.
        """
        p = self._pending
        if p is None:
            return False
        self._pending = None
        if (
            next_text
            and (p.text[-1:].isalnum() or p.text[-1:] in "_-/.")
            and next_raw[:1] not in (b" ", b"\t")
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
        m: re.Match[str],
        lineno: int,
        text: str,
        before: list[str],
        after: list[str] | None = None,
    ) -> None:
        file, line, loc_end = _location(text, before)
        key = None
        for name in rule.key_groups:
            key = m.group(name)
            if key:
                break
        if not key:
            key = text[loc_end:].strip().lower()[:200]
        fkey = (rule.id, key)
        found = self._findings.get(fkey)
        if rule.severity == "error":
            self.errors += 1
        else:
            self.warnings += 1
        occ = Occurrence(lineno, file, line, self.phase)
        if rule.secondary:
            self._consequence = True
        if found is not None:
            found.count += 1
            if len(found.occurrences) < self.max_occurrences:
                found.occurrences.append(occ)
            if self.on_finding:
                self.on_finding(found, False)
            return
        if len(self._findings) >= self.max_findings:
            self.dropped += 1
            return
        finding = Finding(
            rule=rule.id,
            category=rule.category,
            severity=rule.severity,
            message=text.replace(LOCAL_MARK, "")[:MESSAGE_CHARS],
            file=file,
            line=line,
            log_line=lineno,
            phase=self.phase,
            explanation=rule.explanation,
            fix=rule.fix,
            patchsets=rule.patchsets,
            secondary=rule.secondary,
            generic=rule.generic,
            key=key,
            context_before=before,
            occurrences=[occ],
        )
        if after is not None:
            finding.context_after = after[: self.context_after]
        elif self.context_after:
            finding._after_wanted = self.context_after
            self._after_open.append(finding)
            self._want = max(self._want, self.context_after)
        self._findings[fkey] = finding
        if self.on_finding:
            self.on_finding(finding, True)

    # ----------------------------------------------------------------------------------------- results

    def findings(self) -> list[Finding]:
        """Distinct findings, the first root cause first (see module docstring)."""
        return sorted(self._findings.values(), key=rank_key)

    def has_errors(self) -> bool:
        return any(f.is_error for f in self._findings.values())


# --------------------------------------------------------------------------------------------- conveniences

CHUNK = 1 << 20


def classify_stream(stream: BinaryIO, classifier: Classifier | None = None, chunk: int = CHUNK) -> Classifier:
    """Classify a whole stream; the classifier is closed (its end searched with the extended triggers too)."""
    c = classifier or Classifier()
    read = stream.read
    while True:
        data = read(chunk)
        if not data:
            break
        c.feed(data)
    c.close()  # not flush() alone: the end of a log is where a build fails (see Classifier._scan)
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


def iter_categories() -> Iterator[tuple[str, str]]:
    yield from CATEGORIES.items()
