"""Parameter values, version/arch ranges and `when:` conditions.

`when:` is a mapping of parameter name → condition; all entries must hold (AND). A condition is
- a range string for `version` and `arch` parameters: ">=11.0,<13", "==12.*", ">=sm_80", "<sm_90";
- a list of alternatives (OR), each a range or a plain value: [sm_86, sm_90] or [">=12", "11.8"];
- a plain value compared for equality (strings, booleans).

An `arch` parameter may hold a list of targets ("sm_80,sm_86,sm_89,sm_90+ptx", a multi-architecture build). A
condition on it holds when *any* target of the list satisfies it (one alternative's clauses by the same target):
the whole tree is compiled for every listed target, so a patchset that one of them needs — `>=sm_80` for
GpuDefs.cuh's #error — must be in the tree; a fix gated on an arch must be harmless to the others anyway, since
every translation unit is compiled for all of them. "All" would drop the sm_80 fix from an sm_75+sm_86 build, which
then fails compiling for sm_86. An `allowed:` range or `choices:` is checked for every target (config/params.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from legacy_gpu_patch.config.gpuarch import ArchSyntaxError, parse_arch, parse_arch_list

_OPS = ("==", "!=", ">=", "<=", ">", "<")


def parse_version(text: str) -> Version:
    try:
        return Version(str(text))
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a version (like 11.1 or 3.12)") from None


def arch_number(text: str) -> int:
    """sm_86 → 86, sm_100a → 100, compute_90 → 90, sm_86+ptx → 86 (a recipe's spelling: gpuarch.parse_arch)."""
    try:
        return parse_arch(str(text), recipe_value=True).number
    except ArchSyntaxError:
        raise ValueError(f"{text!r} is not a GPU architecture (like sm_86 or sm_90)") from None


def arch_numbers(text: str) -> list[int]:
    """The capabilities of an `arch` value that may be a list: "sm_80,sm_90+ptx" → [80, 90]; "sm_86" → [86]."""
    try:
        return [a.number for a in parse_arch_list(str(text), recipe_value=True)]
    except ArchSyntaxError:
        raise ValueError(f"{text!r} is not a GPU architecture or a list of them (like sm_86 or sm_80,sm_90+ptx)"
                         ) from None


def _split_alternatives(cond: Any) -> list[Any]:
    return list(cond) if isinstance(cond, list) else [cond]


def _is_range(text: str) -> bool:
    return isinstance(text, str) and text.strip().startswith(_OPS)


def _arch_clause_holds(clause: str, value: int) -> bool:
    clause = clause.strip()
    for op in sorted(_OPS, key=len, reverse=True):
        if clause.startswith(op):
            target = arch_number(clause[len(op) :].strip())
            return {
                "==": value == target,
                "!=": value != target,
                ">=": value >= target,
                "<=": value <= target,
                ">": value > target,
                "<": value < target,
            }[op]
    return value == arch_number(clause)


def _version_range(spec: str) -> SpecifierSet:
    try:
        return SpecifierSet(spec.replace(" ", ""))
    except InvalidSpecifier:
        raise ValueError(f"{spec!r} is not a version range (like '>=11.0,<13')") from None


def check_condition(kind: str, cond: Any) -> str | None:
    """Validate a condition for a parameter of `kind`; return a problem text or None."""
    for alt in _split_alternatives(cond):
        try:
            if kind == "version" and _is_range(alt):
                _version_range(alt)
            elif kind == "version":
                parse_version(str(alt))
            elif kind == "arch":
                for clause in str(alt).split(","):
                    _arch_clause_holds(clause, 0)
            elif kind == "bool" and not isinstance(alt, bool):
                return f"expected true or false, got {alt!r}"
        except ValueError as exc:
            return str(exc)
    return None


def holds(kind: str, cond: Any, value: Any) -> bool:
    """Does the parameter value satisfy the condition?"""
    for alt in _split_alternatives(cond):
        if kind == "version":
            v = parse_version(str(value))
            if _is_range(alt):
                if _version_range(alt).contains(v, prereleases=True):
                    return True
            elif v == parse_version(str(alt)):
                return True
        elif kind == "arch":
            # any target of a list (see the module's docstring for why any, not all)
            if any(all(_arch_clause_holds(c, num) for c in str(alt).split(",")) for num in arch_numbers(value)):
                return True
        elif kind == "bool":
            if bool(value) == alt:
                return True
        elif str(alt) == str(value):
            return True
    return False


@dataclass(frozen=True)
class Verdict:
    selected: bool
    reasons: tuple[str, ...]  # one text per condition, e.g. "cuda=11.1 matches >=11.0"


def evaluate(when: dict[str, Any] | None, params: dict[str, Any], kinds: dict[str, str]) -> Verdict:
    if not when:
        return Verdict(True, ())
    reasons = []
    selected = True
    for name, cond in when.items():
        ok = holds(kinds.get(name, "string"), cond, params.get(name))
        shown = cond if not isinstance(cond, list) else " or ".join(map(str, cond))
        reasons.append(f"{name}={params.get(name)} {'matches' if ok else 'does not match'} {shown}"
                       + _which_targets(kinds.get(name, "string"), cond, params.get(name), ok))
        selected = selected and ok
    return Verdict(selected, tuple(reasons))


def _which_targets(kind: str, cond: Any, value: Any, ok: bool) -> str:
    """For a list of targets that matches: which of them do (a list matches when any target does)."""
    if kind != "arch" or not ok:
        return ""
    targets = parse_arch_list(str(value), recipe_value=True)
    if len(targets) < 2:
        return ""
    return " (" + ", ".join(a.name for a in targets if holds(kind, cond, a.name)) + ")"


_TEMPLATE_RE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_names(text: str) -> set[str]:
    return {m.group(1) for m in _TEMPLATE_RE.finditer(text) if m.group(1)}


def render(text: str, values: dict[str, Any]) -> str:
    """Replace ${name} with the value; $$ is a literal $. Unknown names raise KeyError."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return str(values[m.group(1)])

    return _TEMPLATE_RE.sub(sub, text)
