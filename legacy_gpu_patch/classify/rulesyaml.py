"""Reading rule files: parsed (the shipped ones by libyaml), validated, their macros, literal sets and triggers
gathered (`read_rule_files`); rules.py compiles the result. Imported only when rule files are read (rulecache.py).

The shipped rule files are parsed by libyaml: the same data as config.yamlio, ten times faster.

`lgpatch classify` parses ~13 rule files at every start; PyYAML's pure-Python scanner takes ~0.12 s of CPU for
them, a third of the whole start-up, which a user pays on every log however small. PyYAML's C parser (CSafeLoader,
present where PyYAML was built with libyaml) gives the same nodes and marks; the constructors are yamlio's own
(line numbers, duplicate keys, floats as text), so the result is the same LineDict/LineList tree
(tests/unit/classify/test_rules_yaml.py compares them on every shipped file). Only the shipped files, which the
tests parse both ways, are read this way; any problem, and every user rule file, goes through yamlio, whose
messages name file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from legacy_gpu_patch.classify.rules_schema import RULES_FILE_SCHEMA
from legacy_gpu_patch.config import yamlio
from legacy_gpu_patch.config.resources import rules_dir
from legacy_gpu_patch.config.schema import Ctx
from legacy_gpu_patch.config.yamlio import LineDict, load_file

__all__ = ["Parsed", "key_line", "lines_of", "load_shipped", "read_rule_files"]

_CBase: Any = getattr(yaml, "CSafeLoader", None)

if _CBase is not None:

    class _CLoader(_CBase):
        source_name = "<yaml>"
        construct_mapping = yamlio._Loader.construct_mapping
        construct_sequence = yamlio._Loader.construct_sequence

    # the constructors yamlio's loader registers, on this loader too (the registries are per class)
    _CLoader.yaml_constructors = dict(yamlio._Loader.yaml_constructors)
    _CLoader.yaml_multi_constructors = dict(yamlio._Loader.yaml_multi_constructors)


def load_shipped(path: Path, shown: str) -> Any:
    """yamlio.load_file(path, shown), parsed by libyaml where PyYAML has it."""
    if _CBase is None:
        return yamlio.load_file(path, shown)
    try:
        loader = _CLoader(path.read_bytes().decode("utf-8"))
        loader.source_name = shown
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except Exception:  # whatever it is, yamlio reports it as it always does (file:line: problem)
        return yamlio.load_file(path, shown)


def lines_of(raw: Any, key: str) -> list[int]:
    value = raw.get(key) if isinstance(raw, dict) else None
    return list(getattr(value, "item_lines", []))


def key_line(raw: Any, key: str, default: int) -> int:
    key_lines = getattr(raw, "key_lines", None)  # a yamlio.LineDict
    return key_lines.get(key, default) if isinstance(key_lines, dict) else default


@dataclass
class Parsed:
    """What the rule files declare, before the rules are compiled."""

    files: list[tuple[str, Any, dict[str, Any]]] = field(default_factory=list)  # (shown name, raw, validated)
    macros: dict[str, str] = field(default_factory=dict)
    literal_sets: dict[str, list[str]] = field(default_factory=dict)
    triggers: list[str] = field(default_factory=list)


def read_rule_files(files: tuple[Path, ...], shipped: bool = False) -> Parsed:
    """Validate each file and gather its macros, literal sets and triggers (errors name file:line: key)."""
    out = Parsed()
    seen_plain: str | None = None
    for path in files:
        shown = path.name if path.parent == rules_dir() else str(path)
        raw = load_shipped(path, shown) if shipped else load_file(path, shown)
        if raw is None:
            raw = LineDict()
        data = RULES_FILE_SCHEMA.validate(raw, Ctx(shown, "", getattr(raw, "line", 0)))
        if data["lead"] and seen_plain:
            raise Ctx(shown, "lead", key_line(raw, "lead", 0)).error(
                f"a lead file must come before every other rules file ({seen_plain} sorts before it)"
            )
        if not data["lead"] and data["rules"]:
            seen_plain = seen_plain or shown
        for kind, table in (("macros", out.macros), ("literal_sets", out.literal_sets)):
            for name, value in data[kind].items():
                if name in table:
                    what = "macro" if kind == "macros" else "literal set"
                    raise Ctx(shown, f"{kind}.{name}", 0).error(f"{what} {name} is defined twice")
                table[name] = value
        out.triggers += data["triggers"]
        out.files.append((shown, raw, data))
    return out
