"""Shared by the CuPy PTX tests: the real Chainer 1.24.0 sdist, patched by `lgpatch apply` into a temporary folder.

The sdist is found next to the repository (../dl/, where the team keeps downloads; LGPATCH_CHAINER_SDIST overrides)
and put into an isolated lgpatch cache, so `apply --offline` works without the network; without a local copy it is
fetched from PyPI when reachable, else the test skips with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from helpers import REPO, network_available, run_cli_subprocess

SDIST_NAME = "chainer-1.24.0.tar.gz"
SDIST_SHA256 = "58adfb7348d10991e180941f1ebe2daf6eee569808c3746c49adca9a25a2a43d"
FP16_PATCHSET = "cupy-fp16-header"
FP16_REASON = (
    f"patchset {FP16_PATCHSET} is not available: CuPy 1.24's kernel header cupy/core/carray.cuh uses the pre-CUDA-9 "
    "half API (__float2half_rn returning unsigned short) and does not compile with nvcc >= 9 without it"
)


def local_sdist() -> Path | None:
    for candidate in (os.environ.get("LGPATCH_CHAINER_SDIST"), REPO.parent / "dl" / SDIST_NAME):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def patchset_available(name: str) -> bool:
    from legacy_gpu_patch.config.recipe import SearchPath

    return SearchPath.from_options().find_patchset(name) is not None


def recipe_available(name: str) -> bool:
    from legacy_gpu_patch.config.recipe import SearchPath

    return any(f.stem == name for f in SearchPath.from_options().recipe_files())


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LGPATCH_RECIPE_PATH", "LGPATCH_PATCHSET_PATH", "CI")}
    env["LGPATCH_CACHE"] = str(root / "cache")
    return env


def _lgpatch(root: Path, *args: str | Path) -> str:
    proc = run_cli_subprocess(*args, cwd=root, env=_env(root), timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"lgpatch {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}\n{proc.stdout}")
    return proc.stdout


def apply(root: Path, recipe: str | None, patchsets: list[str] | None = None, params: dict[str, str] | None = None,
          ) -> tuple[Path, dict]:
    """`lgpatch apply --strict` into root/tree: a shipped recipe by name, or a test recipe listing `patchsets`.

    Returns the tree and apply's --json summary.
    """
    root.mkdir(parents=True, exist_ok=True)
    extra: list[str | Path] = []
    if recipe is None:
        recipe = "ptx-proof"
        steps = "".join(f"  - {name}\n" for name in patchsets or [])
        (root / "recipes").mkdir(exist_ok=True)
        (root / "recipes" / "ptx-proof.yaml").write_text(textwrap.dedent(f"""\
            name: ptx-proof
            description: Patchsets of the chainer-1.24 recipe on the pristine Chainer 1.24.0 sdist (test recipe).
            source:
              sdist: {{name: chainer, version: "1.24.0", sha256: {SDIST_SHA256}}}
            parameters:
              ptx_arch: {{type: string, default: auto}}
            steps:
            """) + steps, encoding="utf-8")
        extra = ["--recipe-path", root / "recipes"]
    sdist = local_sdist()
    offline: list[str] = []
    if sdist is not None:
        _lgpatch(root, *extra, "cache", "add", sdist)
        offline = ["--offline"]
    elif not network_available():
        pytest.skip(f"the Chainer 1.24.0 sdist is not at {REPO.parent / 'dl' / SDIST_NAME} (or LGPATCH_CHAINER_SDIST) "
                    "and PyPI is not reachable")
    param_args = [a for k, v in (params or {}).items() for a in ("-p", f"{k}={v}")]
    out = _lgpatch(root, *extra, "apply", recipe, *offline, "--strict", "--json", "-C", root / "tree", *param_args)
    return root / "tree", json.loads(out)


def load_arch_select(tree: Path, name: str) -> ModuleType:
    """The patched tree's cupy/cuda/_arch_select.py on its own: no CuPy package, no CUDA, fresh per-process state."""
    spec = importlib.util.spec_from_file_location(name, tree / "cupy" / "cuda" / "_arch_select.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
