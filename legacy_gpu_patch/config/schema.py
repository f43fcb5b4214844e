"""Config schemas as data, with breadcrumb errors.

A schema is a tree of small validator objects. Validating returns plain Python data (defaults filled in) or raises
ConfigError naming ``file:line: key.path[3].key: problem`` and, for misspelt keys or values, the closest valid one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from legacy_gpu_patch.config.yamlio import LineDict, LineList
from legacy_gpu_patch.errors import ConfigError

_MISSING = object()


def closest(word: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    match = closest(word, candidates)
    return f" (did you mean {match!r}?)" if match else ""


@dataclass
class Ctx:
    """Where we are: file name, key path, and the best line number known for it."""

    source: str
    path: str = ""
    line: int = 0

    def child(self, key: str | int, line: int | None = None) -> Ctx:
        if isinstance(key, int):
            path = f"{self.path}[{key}]"
        else:
            path = f"{self.path}.{key}" if self.path else str(key)
        return Ctx(self.source, path, line or self.line)

    def error(self, problem: str) -> ConfigError:
        where = f"{self.source}:{self.line}" if self.line else self.source
        key = f" {self.path}:" if self.path else ""
        return ConfigError(f"{where}:{key} {problem}")


class Validator:
    def validate(self, value: Any, ctx: Ctx) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__.lower()


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "empty (null)"
    return f"{type(value).__name__} {value!r}"


@dataclass
class Str(Validator):
    pattern: str | None = None
    choices: Sequence[str] | None = None
    what: str = "a string"
    check: Callable[[str], str | None] | None = None  # returns a problem text or None
    allow_numbers: bool = False  # YAML reads `cuda: 11.1` as a float; accept it as its text

    def validate(self, value: Any, ctx: Ctx) -> str:
        if self.allow_numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise ctx.error(f"expected {self.what}, got {_type_name(value)}")
        if self.choices is not None and value not in self.choices:
            raise ctx.error(
                f"{value!r} is not one of {', '.join(self.choices)}{did_you_mean(value, self.choices)}"
            )
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise ctx.error(f"{value!r} is not {self.what}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ctx.error(problem)
        return value


@dataclass
class Bool(Validator):
    def validate(self, value: Any, ctx: Ctx) -> bool:
        if not isinstance(value, bool):
            raise ctx.error(f"expected true or false, got {_type_name(value)}")
        return value


@dataclass
class Int(Validator):
    minimum: int | None = None

    def validate(self, value: Any, ctx: Ctx) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ctx.error(f"expected an integer, got {_type_name(value)}")
        if self.minimum is not None and value < self.minimum:
            raise ctx.error(f"must be at least {self.minimum}")
        return value


@dataclass
class Scalar(Validator):
    """Any YAML scalar (string, number, bool), kept as given."""

    def validate(self, value: Any, ctx: Ctx) -> Any:
        if isinstance(value, (dict, list)) or value is None:
            raise ctx.error(f"expected a scalar value, got {_type_name(value)}")
        return value


@dataclass
class ListOf(Validator):
    item: Validator
    min_items: int = 0
    single_ok: bool = False  # accept `x` as shorthand for `[x]`

    def validate(self, value: Any, ctx: Ctx) -> list[Any]:
        if self.single_ok and not isinstance(value, list):
            value = [value]
        if not isinstance(value, list):
            raise ctx.error(f"expected a list, got {_type_name(value)}")
        if len(value) < self.min_items:
            raise ctx.error(f"needs at least {self.min_items} item(s)")
        lines = value.item_lines if isinstance(value, LineList) else []
        return [
            self.item.validate(item, ctx.child(i, lines[i] if i < len(lines) else None))
            for i, item in enumerate(value)
        ]


@dataclass
class MapOf(Validator):
    """A mapping with free-form keys (environment variables, parameters)."""

    value: Validator
    key: Validator = field(default_factory=lambda: Str())

    def validate(self, value: Any, ctx: Ctx) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ctx.error(f"expected a mapping, got {_type_name(value)}")
        lines = value.key_lines if isinstance(value, LineDict) else {}
        out = {}
        for k, v in value.items():
            sub = ctx.child(str(k), lines.get(k))
            out[self.key.validate(k, sub)] = self.value.validate(v, sub)
        return out


@dataclass
class Key:
    validator: Validator
    required: bool = False
    default: Any = _MISSING
    doc: str = ""


@dataclass
class Map(Validator):
    """A mapping with a fixed set of keys. Unknown keys are errors, with a suggestion."""

    keys: dict[str, Key]
    one_of: Sequence[str] = ()  # exactly one of these keys must be present
    what: str = "mapping"
    one_of_why: str = ""  # said when more than one is present, e.g. "a step does one thing"

    def validate(self, value: Any, ctx: Ctx) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ctx.error(f"expected a {self.what}, got {_type_name(value)}")
        lines = value.key_lines if isinstance(value, LineDict) else {}
        own_line = getattr(value, "line", 0) or ctx.line
        for k in value:
            if k not in self.keys:
                sub = ctx.child(str(k), lines.get(k))
                raise sub.error(f"unknown key{did_you_mean(str(k), self.keys)}; valid keys: {', '.join(self.keys)}")
        if self.one_of:
            present = [k for k in self.one_of if k in value]
            if len(present) != 1:
                here = Ctx(ctx.source, ctx.path, own_line)
                if not present:
                    raise here.error(f"needs exactly one of: {', '.join(self.one_of)}")
                why = f" ({self.one_of_why})" if self.one_of_why else ""
                raise here.error(f"has more than one of: {', '.join(present)}{why}")
        out: dict[str, Any] = {}
        for name, spec in self.keys.items():
            if name in value:
                out[name] = spec.validator.validate(value[name], ctx.child(name, lines.get(name)))
            elif spec.required:
                raise Ctx(ctx.source, ctx.path, own_line).error(f"missing required key {name!r}")
            elif spec.default is not _MISSING:
                out[name] = spec.default() if callable(spec.default) else spec.default
        return out


@dataclass
class AnyOf(Validator):
    """The first alternative whose `accepts` says yes validates the value."""

    alternatives: Sequence[tuple[Callable[[Any], bool], Validator]]
    what: str = "value"

    def validate(self, value: Any, ctx: Ctx) -> Any:
        for accepts, validator in self.alternatives:
            if accepts(value):
                return validator.validate(value, ctx)
        raise ctx.error(f"expected {self.what}, got {_type_name(value)}")


def regex_check(text: str) -> str | None:
    try:
        re.compile(text)
    except re.error as exc:
        return f"invalid regular expression {text!r}: {exc}"
    return None


def relpath_check(text: str) -> str | None:
    """Paths in recipes and patchsets are relative and stay inside their folder."""
    if not text or text.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", text):
        return f"{text!r} must be a relative path"
    if any(part == ".." for part in re.split(r"[/\\]", text)):
        return f"{text!r} must not contain '..'"
    if "\0" in text:
        return "path contains a NUL byte"
    return None


@dataclass
class Condition(Validator):
    """The value of one `when:` entry: a scalar or a list of scalars (alternatives).

    Whether it fits the parameter's kind (version range, arch range) is checked once the recipe's parameters are
    known, by recipe.check_when().
    """

    def validate(self, value: Any, ctx: Ctx) -> Any:
        alternatives = value if isinstance(value, list) else [value]
        if not alternatives:
            raise ctx.error("empty list of alternatives")
        for alt in alternatives:
            if isinstance(alt, (dict, list)) or alt is None:
                raise ctx.error(f"expected a value or range like '>=11.0', got {_type_name(alt)}")
        return [*value] if isinstance(value, list) else value


WHEN = MapOf(Condition())
