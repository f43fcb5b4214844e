"""`lgpatch cache size` and `lgpatch cache gc` on a real cache: mirrors made by apply and add-mirror, downloads
added with `cache add`, and the temporaries a killed download or clone leaves."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from helpers import Upstream, git, git_recipe, write_recipe

pytestmark = pytest.mark.integration

PATCH = "--- /dev/null\n+++ b/added.h\n@@ -0,0 +1 @@\n+#pragma once\n"


def test_cache_size_and_gc(lgpatch, tmp_path: Path, upstream: Upstream) -> None:
    cache = Path(os.environ["LGPATCH_CACHE"])
    pinned = tmp_path / "fix.patch"
    pinned.write_text(PATCH)
    sha = hashlib.sha256(PATCH.encode()).hexdigest()
    steps = f"  - id: fix\n    url-patch: {{url: 'http://127.0.0.1:9/fix.patch', sha256: {sha}}}\n"
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("gcdemo", "gc fixture", upstream, steps), "gcdemo.yaml")
    assert lgpatch("--recipe-path", d, "cache", "add", pinned).code == 0
    unpinned = tmp_path / "old.tar.gz"
    unpinned.write_bytes(b"an sdist no recipe wants any more" * 100)
    assert lgpatch("--recipe-path", d, "cache", "add", "--any", unpinned).code == 0
    assert lgpatch("--recipe-path", d, "apply", "gcdemo", "--workdir", tmp_path / "wt").code == 0
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(upstream.path), str(other))
    assert lgpatch("cache", "add-mirror", "https://example.invalid/unused.git", other).code == 0
    downloads = cache / "downloads" / "sha256"
    stale, fresh = downloads / ".dl-killed", downloads / ".dl-running"
    stale.write_bytes(b"x" * 1000)
    fresh.write_bytes(b"y" * 10)
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    dead_clone = cache / "mirrors" / "example.invalid" / "half.git.tmp-4194303"  # beyond any live pid
    dead_clone.mkdir(parents=True)
    (dead_clone / "objects").write_bytes(b"z" * 100)

    r = lgpatch("--recipe-path", d, "cache", "size", "--json")
    assert r.code == 0, r.err
    sizes = json.loads(r.out)
    assert sizes["download"] > 3000 and sizes["mirror"] > 0 and sizes["temporary"] >= 1110
    assert sizes["total"] == sizes["download"] + sizes["mirror"] + sizes["temporary"]
    r = lgpatch("--recipe-path", d, "cache", "size")
    assert r.code == 0 and "total in" in r.out and "mirrors (2)" in r.out

    r = lgpatch("--recipe-path", d, "cache", "gc", "--dry-run")
    assert r.code == 0, r.err
    unpinned_sha = hashlib.sha256(unpinned.read_bytes()).hexdigest()
    assert f"would remove download {unpinned_sha}" in r.out and ".dl-killed" in r.out and "half.git.tmp" in r.out
    assert (downloads / unpinned_sha).exists() and stale.exists()

    r = lgpatch("--recipe-path", d, "cache", "gc")
    assert r.code == 0, r.err
    assert not (downloads / unpinned_sha).exists() and not stale.exists() and not dead_clone.exists()
    assert (downloads / sha).exists() and fresh.exists()  # pinned, and a download that may still be running
    assert (cache / "mirrors/example.invalid/unused.git").exists()  # mirrors only with --mirrors

    r = lgpatch("--recipe-path", d, "cache", "gc", "--mirrors")
    assert r.code == 0, r.err
    assert not (cache / "mirrors/example.invalid/unused.git").exists()
    assert "removed mirror example.invalid/unused.git" in r.out
    # The recipe's own mirror stayed: a new tree still comes from the cache alone.
    r = lgpatch("--recipe-path", d, "apply", "gcdemo", "--workdir", tmp_path / "wt2", "--offline")
    assert r.code == 0, r.err
