"""Recipe parameters: their schema, the frozen Param, and checks of values and `when:` conditions against them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.gpuarch import ArchSyntaxError, canonical_arch_list, parse_arch_list, split_arch_list
from legacy_gpu_patch.config.schema import Ctx, Key, ListOf, Map, Scalar, Str, did_you_mean, regex_check

PARAM_KINDS = ("version", "arch", "bool", "string")
DETECTORS = ("python", "cuda")

PARAM_SCHEMA = Map(
    {
        "type": Key(Str(choices=PARAM_KINDS), default="string"),
        "default": Key(Scalar(), required=True),
        "choices": Key(ListOf(Scalar()), default=None),
        "allowed": Key(Str(), default=None),  # a range for version/arch parameters
        "detect": Key(Str(choices=DETECTORS), default=None),  # used when default is "auto"
        # A string parameter's values must match this (whole) regex: values reach source files through templates.
        "pattern": Key(Str(check=regex_check, what="a regular expression"), default=None),
        "description": Key(Str(), default=""),
    },
    what="parameter mapping",
)


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any
    choices: tuple[Any, ...] | None
    allowed: str | None
    detect: str | None
    description: str
    pattern: str | None = None


def check_when(when: dict[str, Any] | None, params: dict[str, Param], ctx: Ctx) -> None:
    for name, cond in (when or {}).items():
        if name not in params:
            raise ctx.child("when").child(name).error(
                f"unknown parameter{did_you_mean(name, params)}; this recipe has: {', '.join(params) or 'none'}"
            )
        problem = conditions.check_condition(params[name].kind, cond)
        if problem:
            raise ctx.child("when").child(name).error(problem)


def check_param(name: str, p: dict[str, Any], ctx: Ctx) -> Param:
    kind = p["type"]
    default = p["default"]
    if p["allowed"] is not None:
        if kind not in ("version", "arch"):
            raise ctx.child("allowed").error("'allowed' ranges apply to version and arch parameters only")
        problem = conditions.check_condition(kind, p["allowed"])
        if problem:
            raise ctx.child("allowed").error(problem)
    if default == "auto" and not p["detect"] and kind != "string":
        raise ctx.child("default").error("'auto' needs 'detect: python' or 'detect: cuda'")
    param = Param(name, kind, default, tuple(p["choices"]) if p["choices"] else None, p["allowed"], p["detect"],
                  p["description"], p["pattern"])
    if default != "auto":
        problem = param_problem(param, default)
        if problem:
            raise ctx.child("default").error(problem)
    return param


def canonical_arch_value(text: str) -> str:
    """What an `arch` parameter stores: lower case, and a list sorted and merged (gpuarch.canonical_arch_list), so
    "sm_90+PTX,sm_80" and "sm_80,sm_90+ptx" are the same value; what does not parse is returned lower-cased for
    param_problem to explain."""
    low = str(text).strip().lower()
    try:
        return canonical_arch_list(low)
    except ArchSyntaxError:
        return low


def _arch_list_problem(param: Param, value: Any) -> str | None:
    """An `arch` value may be one target or a list ("sm_80,sm_86,sm_89,sm_90+ptx"): every target is checked.

    `choices` name the GPUs a recipe supports, so sm_90+ptx is accepted where sm_90 is listed (the PTX is extra
    code for the same target, for newer GPUs); a PTX-only compute_XX must be listed itself. `allowed` must hold
    for every target: a range says what the recipe's patches are proven for, and one target outside it is enough
    to break the build.
    """
    try:
        targets = parse_arch_list(str(value), recipe_value=True)
    except ArchSyntaxError as exc:
        return exc.message if len(split_arch_list(str(value))) < 2 else f"{exc.message} (in {str(value)!r})"
    listed = {str(c) for c in param.choices} if param.choices is not None else None
    for t in targets:
        if listed is not None and t.name not in listed and not (t.sass and t.sm in listed):
            return (f"{t.name!r}{' (in ' + repr(str(value)) + ')' if len(targets) > 1 else ''} is not one of "
                    f"{', '.join(sorted(listed))}{did_you_mean(t.name, sorted(listed))}")
        if param.allowed is not None and not conditions.holds("arch", param.allowed, t.name):
            return f"{t.name!r} is outside the allowed range {param.allowed}"
    return None


def param_problem(param: Param, value: Any) -> str | None:
    """Why `value` is not valid for `param`, or None."""
    if param.kind == "arch":
        return _arch_list_problem(param, value)
    try:
        if param.kind == "version":
            conditions.parse_version(str(value))
        elif param.kind == "bool" and not isinstance(value, bool):
            return f"expected true or false, got {value!r}"
    except ValueError as exc:
        return str(exc)
    if param.choices is not None and str(value) not in {str(c) for c in param.choices}:
        choices = [str(c) for c in param.choices]
        return f"{value!r} is not one of {', '.join(choices)}{did_you_mean(str(value), choices)}"
    if param.pattern is not None and not re.fullmatch(param.pattern, str(value)):
        return f"{value!r} does not match the pattern {param.pattern!r}"
    if param.allowed is not None and not conditions.holds(param.kind, param.allowed, value):
        return f"{value!r} is outside the allowed range {param.allowed}"
    return None
