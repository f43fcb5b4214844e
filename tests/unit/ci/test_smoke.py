"""What the smoke test imports when a recipe has no built-in check: the wheel's top-level packages."""

from __future__ import annotations

import zipfile
from pathlib import Path

from legacy_gpu_patch.ci import smoke


def _wheel(path: Path, names: list[str], top_level: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for n in names:
            zf.writestr(n, "")
        if top_level is not None:
            zf.writestr("p-1.0.dist-info/top_level.txt", top_level)
    return path


def test_top_level_txt_wins(tmp_path: Path) -> None:
    w = _wheel(tmp_path / "p-1.0-py3-none-any.whl", ["a/__init__.py"], "alpha\nbeta\n")
    assert smoke.top_level_modules(w) == ("alpha", "beta")


def test_packages_and_modules_without_top_level_txt(tmp_path: Path) -> None:
    w = _wheel(tmp_path / "p-1.0-py3-none-any.whl",
               ["pkg/__init__.py", "pkg/sub/__init__.py", "single.py", "data/file.txt", "p-1.0.dist-info/RECORD",
                "p-1.0.data/scripts/tool"])
    assert smoke.top_level_modules(w) == ("pkg", "single")


def test_known_recipes_have_a_cpu_and_a_gpu_check() -> None:
    from legacy_gpu_patch.config.recipe import SearchPath, find_recipe

    for name, spec in smoke.BUILTIN.items():
        assert find_recipe(name, SearchPath.from_options()).name == name  # keyed by the real recipe names
        assert spec.imports and spec.cpu and spec.gpu, name
    compile(smoke.BUILTIN["chainer-1.24"].cpu, "chainer-cpu", "exec")
