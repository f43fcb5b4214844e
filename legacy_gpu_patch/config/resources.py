"""Where the shipped recipes and patchsets are.

In a wheel they are package data under legacy_gpu_patch/_data/ (see pyproject's force-include); in a source
checkout or an editable install they are the repository's top-level recipes/ and patchsets/ folders.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # the package root (this module is in config/)


def _data_dir(name: str) -> Path:
    installed = _PKG / "_data" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name


def builtin_recipes_dir() -> Path:
    return _data_dir("recipes")


def builtin_patchsets_dir() -> Path:
    return _data_dir("patchsets")


def rules_dir() -> Path:
    return _PKG / "classify" / "rules"
