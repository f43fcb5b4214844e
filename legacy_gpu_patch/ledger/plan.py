"""Resolve parameters and turn a recipe into the ordered list of steps that run for them (and why)."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from typing import Any

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.params import canonical_arch_value
from legacy_gpu_patch.config.patchset import PatchBody, Step, body_data
from legacy_gpu_patch.config.recipe import Param, Recipe, param_problem
from legacy_gpu_patch.config.schema import did_you_mean
from legacy_gpu_patch.errors import ConfigError

# Bump when a step kind's semantics change, so existing trees re-apply instead of trusting old commits.
STEP_SEMANTICS = 1
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(param: Param, raw: Any) -> Any:
    if param.kind == "bool" and isinstance(raw, str):
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError(f"parameter {param.name}: expected true or false, got {raw!r}")
    if param.kind == "arch":
        return canonical_arch_value(raw)  # a list of targets is sorted and merged: one spelling per set
    if param.kind == "version":
        return str(raw).strip()
    return raw


def detect(param: Param) -> str:
    if param.detect == "python":
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    if param.detect == "cuda":
        from legacy_gpu_patch.cuda import nvcc_probe

        # The same search doctor uses: PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, pip-installed nvcc.
        nvcc = nvcc_probe.which_nvcc()
        version = nvcc_probe.probe(nvcc).version if nvcc else None
        if version:
            return version
        raise ConfigError(f"parameter {param.name}: cannot detect the CUDA version (no nvcc found); pass --cuda X.Y")
    raise ConfigError(f"parameter {param.name}: nothing to detect it from")


def resolve_params(recipe: Recipe, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults, then the user's values; every value checked against the parameter's type, choices and range."""
    unknown = [k for k in given if k not in recipe.params]
    if unknown:
        name = unknown[0]
        raise ConfigError(
            f"recipe {recipe.name} has no parameter {name!r}{did_you_mean(name, recipe.params)}; "
            f"its parameters: {', '.join(recipe.params) or 'none'}"
        )
    values: dict[str, Any] = {}
    for name, param in recipe.params.items():
        raw = given.get(name, param.default)
        value = detect(param) if raw == "auto" and param.detect else _coerce(param, raw)
        problem = param_problem(param, value)
        if problem:
            raise ConfigError(f"recipe {recipe.name}, parameter {name}: {problem}")
        values[name] = value
    return values


@dataclass(frozen=True)
class PlannedStep:
    step: Step
    selected: bool
    reasons: tuple[str, ...]
    digest: str


def _template_params(step: Step) -> set[str]:
    # Only templated values change what a step writes; `when:` parameters only decide whether it runs,
    # and a change in that shows up as a different sequence of steps.
    text = step.templated_text()
    return conditions.template_names(text) if text is not None else set()


def step_digest(step: Step, levels: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """sha256 of everything that decides what the step writes: its spec, its input files, the params it uses."""
    inputs: dict[str, Any] = {}
    if isinstance(step.body, PatchBody):
        inputs["patch_sha256"] = hashlib.sha256((step.base_dir / step.body.path).read_bytes()).hexdigest()
    payload = {
        "semantics": STEP_SEMANTICS,
        "key": step.key,
        "kind": step.kind,
        "body": body_data(step.body),
        "when": levels,
        "inputs": inputs,
        "params": {n: params.get(n) for n in sorted(_template_params(step))},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def make_plan(recipe: Recipe, params: dict[str, Any]) -> list[PlannedStep]:
    kinds = recipe.param_kinds()
    plan: list[PlannedStep] = []
    for entry in recipe.entries:
        patchset = entry.patchset
        steps = [entry.step] if entry.step is not None else list(patchset.steps if patchset else ())
        for step in steps:
            # A step runs when its own condition, its patchset's and the recipe entry's all hold.
            levels = [w for w in (entry.when, patchset.when if patchset else None, step.when) if w]
            verdicts = [conditions.evaluate(w, params, kinds) for w in levels]
            selected = all(v.selected for v in verdicts)
            reasons = tuple(r for v in verdicts for r in v.reasons)
            plan.append(PlannedStep(step, selected, reasons, step_digest(step, levels, params)))
    return plan
