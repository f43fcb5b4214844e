"""The shipped rule files, parsed by libyaml: the same data as config.yamlio, ten times faster.

`lgpatch classify` parses ~13 rule files at every start; PyYAML's pure-Python scanner takes ~0.12 s of CPU for
them, a third of the whole start-up, which a user pays on every log however small. PyYAML's C parser (CSafeLoader,
present where PyYAML was built with libyaml) gives the same nodes and marks; the constructors are yamlio's own
(line numbers, duplicate keys, floats as text), so the result is the same LineDict/LineList tree
(tests/unit/classify/test_rules_yaml.py compares them on every shipped file). Only the shipped files, which the
tests parse both ways, are read this way; any problem, and every user rule file, goes through yamlio, whose
messages name file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from legacy_gpu_patch.config import yamlio

__all__ = ["load_shipped"]

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
