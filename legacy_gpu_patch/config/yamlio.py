"""Safe YAML loading that remembers where every key and item came from.

Validation errors must name file, line and key path; PyYAML's safe constructor drops the marks, so we keep them in
dict/list subclasses that behave exactly like the plain containers everywhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from legacy_gpu_patch.errors import ConfigError


class LineDict(dict):
    """A dict that also knows the line (1-based) of each key and of itself."""

    line: int = 0
    key_lines: dict[Any, int]


class LineList(list):
    """A list that also knows the line of each item and of itself."""

    line: int = 0
    item_lines: list[int]


class _Loader(yaml.SafeLoader):
    """SafeLoader (no arbitrary objects) that records marks and rejects duplicate keys."""

    source_name = "<yaml>"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LineDict:
        result = LineDict()
        result.line = node.start_mark.line + 1
        result.key_lines = {}
        self.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"{self.source_name}:{line}: mapping key is not a scalar") from None
            if key in result:
                raise ConfigError(
                    f"{self.source_name}:{key_node.start_mark.line + 1}: duplicate key {key!r} "
                    f"(first at line {result.key_lines[key]})"
                )
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = key_node.start_mark.line + 1
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LineList:
        result = LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.item_lines = [child.start_mark.line + 1 for child in node.value]
        return result


def _float_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    # Nothing in our files is a real number, but versions are everywhere: `python: 3.10` must stay "3.10", not the
    # float 3.1 (which would silently select the steps meant for Python 3.1). So floats keep their text.
    return str(node.value)


_Loader.add_constructor("tag:yaml.org,2002:float", _float_as_text)
_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:seq", _Loader.construct_sequence)


def loads(text: str, source_name: str = "<yaml>") -> Any:
    """Parse YAML text safely; any syntax problem becomes a ConfigError naming source and line."""
    loader = None
    try:
        # The reader rejects control characters in its constructor, so it belongs inside the try.
        loader = _Loader(text)
        loader.source_name = source_name
        return loader.get_single_data()
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(f"{source_name}: YAML nested too deeply") from None
    except (ValueError, IndexError, KeyError, AttributeError, TypeError) as exc:
        # PyYAML's constructors raise plain Python errors on explicit tags with bad values (`!!int x`, `!!int`).
        line = getattr(loader, "line", None) if loader is not None else None
        where = f"{source_name}:{line + 1}" if isinstance(line, int) else source_name
        raise ConfigError(f"{where}: invalid YAML value ({type(exc).__name__}: {exc})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source_name}:{mark.line + 1}" if mark else source_name
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source_name}: YAML error: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_file(path: Path, display_name: str | None = None) -> Any:
    name = display_name or str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    return loads(text, name)
