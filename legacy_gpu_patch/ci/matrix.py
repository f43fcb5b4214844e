"""`lgpatch matrix`: recipes × parameter values → a GitHub Actions job matrix, pruned by the CUDA knowledge.

Every combination of the swept values is a candidate job; one that cannot work is moved to `excluded` with the
reason (the toolkit's nvcc does not know a target the job asks for, a toolkit older than lgpatch's tables).
Parameters not swept keep the recipe's default as written ("auto" stays "auto": it is detected on the job's own
machine, not on the one that plans). A swept value outside a parameter's `allowed` range or `choices` is an error
(ConfigError, exit 3), exactly as `lgpatch apply` treats it.

Each job carries what the workflow needs besides the parameters: `job` (a name safe for artifact and cache keys),
`lgpatch_args` (the `--param` options for `lgpatch ci`) and `recipe_digest` (sha256 over the recipe file and its
patchsets' files, for cache keys).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config.recipe import Param, Recipe, param_problem
from legacy_gpu_patch.config.schema import did_you_mean
from legacy_gpu_patch.errors import ConfigError

GITHUB_MATRIX_LIMIT = 256  # jobs per matrix on GitHub Actions
EXTRA_KEYS = ("recipe", "job", "lgpatch_args", "recipe_digest")
_TARGET_RE = re.compile(r"^(sm|compute)_\d+[af]?(\+ptx)?$", re.I)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Matrix:
    include: tuple[dict[str, Any], ...]
    excluded: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"include": list(self.include), "excluded": list(self.excluded)}

    def github_matrix(self) -> dict[str, Any]:
        """What `strategy.matrix: ${{ fromJSON(...) }}` gets: `include` only — any other key would become a matrix
        dimension and multiply the jobs."""
        return {"include": list(self.include)}


def parse_sweeps(items: Sequence[str]) -> dict[str, list[str]]:
    """('cuda=11.1,13.0', 'python=3.12') → {'cuda': ['11.1', '13.0'], 'python': ['3.12']}; repeated names add."""
    sweeps: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        parts = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not parts:
            raise ConfigError(f"--param {item!r}: expected NAME=V1[,V2,...]")
        for v in parts:
            if v not in sweeps.setdefault(name, []):
                sweeps[name].append(v)
    return sweeps


def coerce(param: Param, raw: Any) -> Any:
    """A command-line string as the parameter's type (the same rules as `lgpatch apply`)."""
    if param.kind == "bool" and isinstance(raw, str):
        low = raw.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ConfigError(f"parameter {param.name}: expected true or false, got {raw!r}")
    if param.kind in ("arch", "version"):
        return str(raw).strip().lower() if param.kind == "arch" else str(raw).strip()
    return raw


def check_value(recipe: Recipe, param: Param, raw: Any) -> Any:
    value = coerce(param, raw)
    if value == "auto" and param.detect:
        return value
    problem = param_problem(param, value)
    if problem:
        raise ConfigError(f"recipe {recipe.name}, parameter {param.name}: {problem}")
    return value


def recipe_digest(recipe: Recipe) -> str:
    """sha256 over the recipe file and every file of the patchsets it uses: a cache key that changes with them."""
    h = hashlib.sha256(Path(recipe.path).read_bytes())
    for entry in recipe.entries:
        if entry.patchset is None:
            continue
        folder = Path(entry.patchset.path)
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            h.update(f.relative_to(folder).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def job_name(recipe: Recipe, values: Mapping[str, Any], swept: Sequence[str]) -> str:
    """chainer-1.24-cuda13.0-python3.12: the recipe and the swept values, in characters any key accepts."""
    parts = [recipe.name] + [f"{n}{_text(values[n])}" for n in swept]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts))


def lgpatch_args(values: Mapping[str, Any]) -> str:
    return " ".join(f"--param {name}={_text(v)}" for name, v in values.items())


def expand(recipes: Sequence[tuple[str, Recipe]], sweeps: Mapping[str, Sequence[str]]) -> Matrix:
    """(argument as given, recipe) pairs × sweeps → Matrix. A swept name no recipe has is an error."""
    known = {n for _, r in recipes for n in r.params}
    for name in sweeps:
        if name not in known:
            raise ConfigError(f"--param {name}: no recipe given has a parameter {name!r}{did_you_mean(name, known)}; "
                              f"their parameters: {', '.join(sorted(known)) or 'none'}")
        if name in EXTRA_KEYS:
            raise ConfigError(f"parameter {name!r} collides with the matrix key of the same name")
    include: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    for arg, recipe in recipes:
        swept = [n for n in recipe.params if n in sweeps]
        digest = recipe_digest(recipe)
        columns = [[check_value(recipe, recipe.params[n], v) for v in sweeps[n]] for n in swept]
        for combo in itertools.product(*columns):
            values = {n: p.default for n, p in recipe.params.items()}
            values.update(zip(swept, combo))
            entry: dict[str, Any] = {"recipe": arg, **values, "job": job_name(recipe, values, swept),
                                     "lgpatch_args": lgpatch_args(values), "recipe_digest": digest}
            reason = why_impossible(recipe, values)
            if reason is None:
                include.append(entry)
            else:
                excluded.append({**entry, "reason": reason})
    return Matrix(tuple(include), tuple(excluded))


# --------------------------------------------------------------------------------------------- pruning


def _targets(recipe: Recipe, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(parameter, target) pairs nvcc will be asked for: arch parameters, and string parameters named *arch whose
    value is a target spelling (chainer's ptx_arch)."""
    from legacy_gpu_patch.cuda.archflags import split_arch_list

    out = []
    for name, p in recipe.params.items():
        value = str(values.get(name, ""))
        if value in ("", "auto"):
            continue
        if p.kind == "arch" or (p.kind == "string" and name.endswith("arch")):
            out += [(name, t) for t in split_arch_list(value) if _TARGET_RE.match(t) or p.kind == "arch"]
    return out


def why_impossible(recipe: Recipe, values: Mapping[str, Any]) -> str | None:
    """Why this combination cannot build, from lgpatch's CUDA tables (no nvcc is asked: the planning machine is not
    the build machine), or None."""
    from legacy_gpu_patch.cuda import knowledge as ck

    cuda = values.get("cuda")
    if "cuda" not in recipe.params or cuda in (None, "", "auto"):
        return None
    try:
        row = ck.toolkit(str(cuda))
    except ck.UnknownToolkit as exc:
        return str(exc)
    except ValueError:
        return None
    mm = ck.major_minor(str(cuda))
    for name, text in _targets(recipe, values):
        problem = _unknown_target(mm, row, text)
        if problem:
            return f"{name}={text}: {problem}"
    return None


def _unknown_target(mm: str, row: Any, text: str) -> str | None:
    from legacy_gpu_patch.cuda import knowledge as ck
    from legacy_gpu_patch.cuda import targets
    from legacy_gpu_patch.cuda.archflags import parse_arch

    arch = parse_arch(text)
    wanted = ([arch.sm] if arch.sass else []) + ([arch.compute] if arch.ptx else [])
    missing = [t for t in wanted if t not in row.sass and t not in row.ptx]
    if not missing:
        return None
    first = ck.oldest_toolkit_with(missing[0])
    last = ck.newest_toolkit_with(missing[0])
    if first is None or last is None:
        known = "no CUDA toolkit in lgpatch's tables knows it"
    elif ck.vtuple(mm) < first.key:
        known = f"nvcc knows it from CUDA {first.version}"
    else:
        known = f"CUDA {last.version} is the last toolkit whose nvcc knows it"
    reason = f"CUDA {mm}'s nvcc does not know {missing[0]} ({known})"
    plan = targets.plan(mm, arch.number)
    if plan.buildable and plan.targets:
        reason += f"; for that GPU CUDA {mm} could emit {', '.join(plan.targets)} ({plan.status}) instead"
    return reason
