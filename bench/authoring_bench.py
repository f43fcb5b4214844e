#!/usr/bin/env python3
"""What the authoring loop costs, against `lgpatch apply` of the same recipe measured in the same run.

    (A) lgpatch apply RECIPE -C FRESH              the baseline: pristine tree + every step, one commit each
    (C) lgpatch check RECIPE --ref OTHER           the series applied at the pin and at OTHER in scratch clones
    (R) lgpatch refresh -C TREE -m ...             one edited file captured as a new step (snapshot, patch file,
                                                   recipe files, re-apply of that step) in an applied tree

Each command is timed as a process (wall clock, best of N, the three alternating so a change in machine load hits
all of them), after one untimed round that warms the mirror cache and the page cache. The ratios C/A and R/A are
what the report gives.

    python bench/authoring_bench.py                  # generated tree: 4,000 files, a patch and a regex step
    python bench/authoring_bench.py --recipe pytorch-lms --source /work/.mirror/mcrl+pytorch-lms/repo \\
        --ref v1.5.0 --commit 4ff3872a2099993bf7e8c588f7182f3df777205b --cache-add LMS.patch --edit c10/core/Allocator.h

With --recipe, the shipped recipe and patchsets are copied into a scratch folder first (refresh writes only a
user's own recipe folders). Only the standard library and lgpatch (run as `python -m legacy_gpu_patch`) are used.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@localhost"}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def generated(root: Path, files: int) -> tuple[Path, str]:
    """A tree of `files` headers (every 40th uses API_EXPORT), tagged v1.0, and v1.1 with lines added on top."""
    up = root / "up"
    for i in range(files):
        path = up / f"src/m{i // 200}/f{i}.h"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"int f{i}_{j}(void);\n" for j in range(30))
        path.write_text("#pragma once\n" + ("API_EXPORT int api(void);\n" if i % 40 == 0 else "") + body)
    git(up, "init", "-q", "-b", "main")
    git(up, "add", "-A")
    git(up, "commit", "-qm", "v1.0")
    git(up, "tag", "v1.0")
    first = up / "src/m0/f0.h"
    first.write_text("// v1.1\n// moved\n" + first.read_text())
    git(up, "commit", "-qam", "v1.1")
    git(up, "tag", "v1.1")
    recipes = root / "recipes"
    ps = recipes / "patchsets" / "port"
    ps.mkdir(parents=True)
    (ps / "one.patch").write_text("--- a/src/m0/f0.h\n+++ b/src/m0/f0.h\n@@ -3,2 +3,2 @@\n int f0_0(void);\n"
                                  "-int f0_1(void);\n+long f0_1(void);\n")
    (ps / "patchset.yaml").write_text("name: port\ndescription: bench\nsteps:\n  - id: one\n    patch: one.patch\n"
                                      "  - id: rename\n    regex: {files: ['**/*.h'], pattern: API_EXPORT, "
                                      "replace: API_PUBLIC}\n")
    commit = git(up, "rev-parse", "v1.0")
    (recipes / "bench.yaml").write_text(f"name: bench\ndescription: bench\nsource:\n  git: {{url: \"{up.as_uri()}\", "
                                        f"ref: v1.0, commit: {commit}}}\nsteps:\n  - port\n")
    return recipes, "src/m1/f200.h"


def lgpatch(recipes: Path, *args: str | Path, check: bool = True) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "legacy_gpu_patch", "--recipe-path", str(recipes), *map(str, args)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if check and proc.returncode != 0:
        raise SystemExit(f"lgpatch {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--recipe")
    ap.add_argument("--source", type=Path)
    ap.add_argument("--ref", default="v1.1")
    ap.add_argument("--commit")
    ap.add_argument("--cache-add", type=Path, action="append", default=[])
    ap.add_argument("--edit", help="file of the tree that refresh edits (default: one of the generated tree)")
    ap.add_argument("--no-submodules", action="store_true", help="pass --no-submodules to apply")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lgpatch-authoring-bench-"))
    os.environ["LGPATCH_CACHE"] = str(root / "cache")
    try:
        if args.recipe:
            recipes = root / "recipes"
            shutil.copytree(REPO / "recipes", recipes)
            shutil.copytree(REPO / "patchsets", root / "patchsets")
            recipe, edit = args.recipe, args.edit
        else:
            (recipes, edit), recipe = generated(root, args.files), "bench"
        for extra in args.cache_add:
            lgpatch(recipes, "cache", "add", extra)
        src = ["--source", args.source] if args.source else []
        apply_extra = [*src, *(["--no-submodules"] if args.no_submodules else [])]
        check_args = ["check", recipe, "--ref", args.ref, *src, *(["--commit", args.commit] if args.commit else [])]
        tree = root / "tree"
        lgpatch(recipes, "apply", recipe, "-C", tree, *apply_extra)  # warms the mirror and page caches
        lgpatch(recipes, *check_args, check=False)
        best = {"apply": float("inf"), "check": float("inf"), "refresh": float("inf")}
        for n in range(args.repeat):
            fresh = root / f"fresh{n}"
            best["apply"] = min(best["apply"], lgpatch(recipes, "apply", recipe, "-C", fresh, *apply_extra))
            shutil.rmtree(fresh)
            best["check"] = min(best["check"], lgpatch(recipes, *check_args, check=False))
            with open(tree / edit, "a", encoding="utf-8") as f:
                f.write(f"/* bench edit {n} */\n")
            best["refresh"] = min(best["refresh"], lgpatch(recipes, "refresh", "-C", tree, "-m", f"bench edit {n}"))
        files = len(git(tree, "ls-files").splitlines())
        print(f"tree: {files} files; recipe {recipe}; best of {args.repeat}")
        for name, seconds in best.items():
            ratio = "" if name == "apply" else f"   {seconds / best['apply']:.2f}x apply"
            print(f"  {name:<8} {seconds:7.2f} s{ratio}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
