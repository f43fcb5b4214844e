"""`new-recipe --sdist NAME==VER` against a real package index (PEP 691 JSON, served over HTTP on loopback)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from helpers import Runner, git

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration


def _sdist(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"tinypkg-1.0/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def index(http_dir: tuple[Path, str]) -> tuple[str, str]:
    root, url = http_dir
    archive = _sdist({"setup.py": "from setuptools import setup\nsetup(name='tinypkg')\n", "tiny.py": "X = 1\n"})
    (root / "files").mkdir()
    (root / "files" / "tinypkg-1.0.tar.gz").write_bytes(archive)
    sha = hashlib.sha256(archive).hexdigest()
    page = root / "simple" / "tinypkg"
    page.mkdir(parents=True)
    (page / "index.html").write_text(json.dumps({"meta": {"api-version": "1.0"}, "name": "tinypkg", "files": [
        {"filename": "tinypkg-1.0-py3-none-any.whl", "url": "../../files/none.whl", "hashes": {"sha256": "0" * 64}},
        {"filename": "tinypkg-1.0.tar.gz", "url": "../../files/tinypkg-1.0.tar.gz", "hashes": {"sha256": sha}},
    ]}))
    return f"{url}/simple", sha


def test_new_recipe_from_an_sdist_pins_its_sha256_and_applies_offline(index: tuple[str, str], tmp_path: Path,
                                                                     lgpatch: Runner) -> None:
    url, sha = index
    recipes = tmp_path / "recipes"
    made = lgpatch("--recipe-path", recipes, "new-recipe", "tiny", "--sdist", "tinypkg==1.0", "--index", url)
    assert made.code == 0, made.err
    text = (recipes / "tiny.yaml").read_text()
    assert f"sha256: {sha}" in text and f'index: "{url}"' in text
    applied = lgpatch("--recipe-path", recipes, "apply", "tiny", "--offline", "-C", tmp_path / "wt")
    assert applied.code == 0, applied.err
    assert (tmp_path / "wt" / "tiny.py").read_text() == "X = 1\n"
    assert git(tmp_path / "wt", "status", "--porcelain") == ""


def test_new_recipe_sdist_of_a_missing_version(index: tuple[str, str], tmp_path: Path, lgpatch: Runner) -> None:
    url, _ = index
    r = lgpatch("--recipe-path", tmp_path / "r", "new-recipe", "tiny", "--sdist", "tinypkg==2.0", "--index", url)
    assert r.code == ExitCode.SOURCE and "has no sdist of tinypkg 2.0" in r.err
    assert not (tmp_path / "r" / "tiny.yaml").exists()


def test_new_recipe_usage_errors(tmp_path: Path, lgpatch: Runner) -> None:
    r = lgpatch("--recipe-path", tmp_path, "new-recipe", "x", "--git", "file:///nowhere")
    assert r.code == ExitCode.USAGE and "--git URL --ref TAG" in r.err
    r = lgpatch("new-recipe", "x", "--sdist", "a==1")
    assert r.code == ExitCode.CONFIG and "needs a recipe folder" in r.err
    r = lgpatch("--recipe-path", tmp_path, "new-recipe", "Bad_Name", "--sdist", "a==1")
    assert r.code == ExitCode.CONFIG and "recipe name 'Bad_Name'" in r.err
