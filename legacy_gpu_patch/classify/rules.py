"""The classifier's rules: loaded from legacy_gpu_patch/classify/rules/*.yaml (schema in rules_schema.py), compiled.

File order, then list order, is priority: the first rule whose regex matches a normalized line decides it. Patterns
use `{MACRO}` fragments; prefilters use `$NAME` literal sets; both are defined once in the files. Load errors name
file:line: key, as for recipes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, AnyStr

from legacy_gpu_patch.classify.categories import CATEGORIES
from legacy_gpu_patch.classify.srecache import compile_re
from legacy_gpu_patch.config.resources import rules_dir
from legacy_gpu_patch.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from legacy_gpu_patch.classify.rulesyaml import Parsed
    from legacy_gpu_patch.config.schema import Ctx

# The YAML reader and the schema validators (rules_schema, config.schema, config.yamlio: PyYAML) are imported where
# rule files are read: the shipped rule set usually comes from its cache (rulecache.py), and then they are not.

__all__ = ["CATEGORIES", "BlockSpec", "Rule", "RuleSet", "distinct_triggers", "load_rules", "rule_files"]


@dataclass(frozen=True)
class BlockSpec:
    cont: re.Pattern[str]
    stop: re.Pattern[str] | None
    end: re.Pattern[str] | None
    max_lines: int


@dataclass(frozen=True)
class Rule:
    """One rule; its regex is compiled when first used (a run reaches a few dozen of ~150 rules: start-up)."""

    id: str
    category: str
    severity: str
    pattern: str  # macros expanded
    flags: int
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
    priority: int = 0  # position in the rule order (lower wins)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return compile_re(self.pattern, self.flags)

    @cached_property
    def key_groups(self) -> tuple[str, ...]:
        """The names of the groups that key a finding (`key`, `key2`, ...), in pattern order."""
        return tuple(name for name in self.regex.groupindex if name.startswith("key"))


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    triggers: tuple[bytes, ...]  # searched in every line of the log (non-ASCII ones where their lead byte occurs)
    lead: int  # rules[:lead] (lead files) are tried first, one by one, each gated by its own prefilter
    literals: tuple[str, ...]  # distinct prefilter literals of rules[lead:]
    literal_rules: tuple[tuple[int, ...], ...]  # literals[i] gates these rule indices
    always: frozenset[int]  # rules[lead:] without a prefilter
    files: tuple[str, ...]
    shipped: bool = False  # the package's own rule files (what prepare.py reads of them is cached with them)

    def by_id(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)


_MACRO_RE = compile_re(r"\{([A-Z][A-Z0-9_]*)\}")


def _expand(pattern: str, macros: dict[str, str], ctx: Ctx, depth: int = 0) -> str:
    if depth > 8:
        raise ctx.error("macros nest too deeply (a macro refers to itself?)")

    def sub(m: re.Match[str]) -> str:
        from legacy_gpu_patch.config.schema import did_you_mean

        name = m.group(1)
        if name not in macros:
            raise ctx.error(f"unknown macro {{{name}}}{did_you_mean(name, macros)}; known: {', '.join(macros)}")
        return "(?:" + _expand(macros[name], macros, ctx, depth + 1) + ")"

    return _MACRO_RE.sub(sub, pattern)


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
    from legacy_gpu_patch.classify.rulecache import cached, code_files

    files = tuple(rule_files())
    found = cached("rules", [*files, *code_files()], lambda: _load(files, shipped=True))
    # The cache is shared by every checkout and install of the same rules and code, and its copy names the files of
    # the one that wrote it, which may be gone since: the caches keyed on top of it read this checkout's files.
    here = tuple(str(f) for f in files)
    return found if found.files == here else replace(found, files=here)


def _compile_all(parsed: Parsed, shipped: bool) -> tuple[list[Rule], int]:
    """The rules in priority order, and how many of them come from lead files. The regexes of the shipped rules,
    which the tests compile, are compiled when first used; those of other files now (errors name file:line)."""
    from legacy_gpu_patch.classify.rulesyaml import key_line, lines_of
    from legacy_gpu_patch.config.schema import Ctx

    rules: list[Rule] = []
    lead = 0
    seen: dict[str, str] = {}
    for shown, raw, data in parsed.files:
        lines = lines_of(raw, "rules")
        raw_rules = raw.get("rules", []) if isinstance(raw, dict) else []
        for i, r in enumerate(data["rules"]):
            line = lines[i] if i < len(lines) else 0
            raw_rule = raw_rules[i] if i < len(raw_rules) else {}
            ctx = Ctx(shown, f"rules[{i}]", line)
            if r["id"] in seen:
                raise ctx.child("id", key_line(raw_rule, "id", line)).error(
                    f"duplicate rule id {r['id']!r} (first in {seen[r['id']]})"
                )
            seen[r["id"]] = f"{shown}:{line}"
            rule = _compile_rule(r, raw_rule, parsed.macros, parsed.literal_sets, ctx, shipped)
            rules.append(replace(rule, priority=len(rules)))
        if data["lead"]:
            lead = len(rules)
    return rules, lead


def holding_no_other(strings: Iterable[AnyStr]) -> list[AnyStr]:
    """Those of `strings` that hold no other one of them, in their order: a text holding one that holds another holds
    that other too, so searching for the others alone finds every text the whole set would."""
    items = list(strings)
    return [t for t in items if not any(o != t and o in t for o in items)]


def _never(text: str) -> None:
    """A search that finds nothing (trial_gate, where no aware unit comes before the decider)."""
    return None


def _any_of(strings: set[str]) -> Any:
    """A search that finds something exactly where the text holds one of `strings` (_never: none): a trie of those
    that hold no other (a string holding another is found through it), so that sre tries the next character of a
    branch, not each string in turn at each position (~1.7 us a line, against ~3.5 us for the flat alternation)."""
    from legacy_gpu_patch.classify.literalindex import _trie

    least = sorted(holding_no_other(strings))
    return compile_re(_trie(least)).search if least else _never


def distinct_triggers(triggers: Sequence[str]) -> tuple[bytes, ...]:
    """The triggers as bytes, each once, without those that hold another one (a line holding `is undefined` holds
    `ndefined`: searching both would be one more pass over the log for no line more)."""
    return tuple(holding_no_other(dict.fromkeys(t.encode() for t in triggers)))


def _load(files: tuple[Path, ...], shipped: bool = False) -> RuleSet:
    if not files:
        raise ConfigError("no rule files found", hint=f"rules live in {rules_dir()}")
    from legacy_gpu_patch.classify.rulesyaml import read_rule_files

    parsed = read_rule_files(files, shipped)
    if not parsed.triggers:
        raise ConfigError("rule files define no triggers: no line would ever be looked at")
    rules, lead = _compile_all(parsed, shipped)
    literal_rules: dict[str, list[int]] = {}
    always: set[int] = set()
    for i in range(lead, len(rules)):
        if not rules[i].prefilter:
            always.add(i)
        for lit in rules[i].prefilter:
            literal_rules.setdefault(lit, []).append(i)
    return RuleSet(
        rules=tuple(rules),
        triggers=distinct_triggers(parsed.triggers),
        lead=lead,
        literals=tuple(literal_rules),
        literal_rules=tuple(tuple(v) for v in literal_rules.values()),
        always=frozenset(always),
        files=tuple(str(f) for f in files),
        shipped=shipped,
    )


def _compile(pattern: str, flags: int, ctx: Ctx) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ctx.error(f"invalid regular expression: {exc}") from None


def _compile_rule(
    r: dict[str, Any], raw: Any, macros: dict[str, str], literal_sets: dict[str, list[str]], ctx: Ctx, lazy: bool
) -> Rule:
    from legacy_gpu_patch.classify.rulesyaml import key_line

    def sub(key: str) -> Ctx:
        return ctx.child(key, key_line(raw, key, ctx.line))

    flags = 0 if r["case_sensitive"] else re.IGNORECASE
    pattern = _expand(r["pattern"], macros, sub("pattern"))
    if not lazy:
        _compile(pattern, flags, sub("pattern"))
    prefilter = _prefilter(r["prefilter"], literal_sets, sub("prefilter"))
    if not r["exception"] and not r["explanation"].strip():
        raise sub("explanation").error("a rule that reports a finding needs a one-sentence explanation")
    if r["exception"] and (r["patchset"] or r["fix"]):
        raise sub("exception").error("an exception rule reports nothing, so it takes no fix or patchset")
    block = _block_spec(r["block"], sub("block")) if r["block"] is not None else None
    return Rule(
        id=r["id"],
        category=r["category"],
        severity=r["severity"],
        pattern=pattern,
        flags=flags,
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
    )



def _prefilter(items: list[str], literal_sets: dict[str, list[str]], ctx: Ctx) -> tuple[str, ...]:
    """A rule's prefilter literals, lowercased, `$NAME` sets expanded."""
    literals: list[str] = []
    for lit in items:
        if lit.startswith("$"):
            name = lit[1:]
            if name not in literal_sets:
                from legacy_gpu_patch.config.schema import did_you_mean

                raise ctx.error(
                    f"unknown literal set {lit}{did_you_mean(name, literal_sets)}; known: {', '.join(literal_sets)}"
                )
            literals += literal_sets[name]
        else:
            literals.append(lit)
    prefilter = tuple(dict.fromkeys(lit.lower() for lit in literals))
    for lit in prefilter:
        if not lit.strip():
            raise ctx.error("empty prefilter literal")
    return prefilter


def _block_spec(b: dict[str, Any], ctx: Ctx) -> BlockSpec:
    return BlockSpec(
        cont=_compile(b["continue"], 0, ctx),
        stop=_compile(b["stop"], 0, ctx) if b["stop"] else None,
        end=_compile(b["end"], 0, ctx) if b["end"] else None,
        max_lines=b["max_lines"],
    )
