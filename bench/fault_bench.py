#!/usr/bin/env python3
"""kill -9 `lgpatch apply` at random moments, N times; every tree must come back to a step boundary, with no loss.

Each trial starts `lgpatch apply` as a child process (half the trials on a fresh work tree, half on an existing one
made for other parameters, so that kills also land in rewinds and re-applies), sends SIGKILL after a random delay,
and then checks what the next `lgpatch status` leaves:

    - no journal and no .git/index.lock left;
    - HEAD is the pristine baseline or an lgpatch step commit;
    - `git status --porcelain` is empty: no half-written file stays in the tree;
    - partial changes of an interrupted step are kept in a stash entry named 'lgpatch: partial changes…';
    - the user's own stash entry (the existing-tree trials make one) is still there;

and finally that `lgpatch apply` completes and gives exactly the reference run's tree (same tree hash).

    python bench/fault_bench.py                 # 100 trials
    python bench/fault_bench.py --trials 20 --files 1500

It prints the counts (killed mid-step, repaired, partial changes stashed, final hash OK) and exits 1 if any trial
broke a rule. Only the standard library and lgpatch (`python -m legacy_gpu_patch`) are used.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@localhost"}
PARTIAL = "lgpatch: partial changes"
USER_STASH = "user: my notes"


def git(cwd: Path, *args: str, check: bool = True) -> str:
    # --no-optional-locks: looking must not take .git/index.lock (a repair may be about to remove a stale one).
    proc = subprocess.run(["git", "--no-optional-locks", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV})
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def make_fixture(base: Path, n_files: int) -> Path:
    """An upstream repository and a recipe with several steps, one of them a regex over every file."""
    up = base / "upstream"
    rng = random.Random(7)
    for i in range(n_files):
        path = up / f"src/m{i % 40}/f{i}.h"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "CAFFE2_API void f(); CAFFE2_API int g();\n" if i % 3 == 0 else "void h(); int k();\n"
        path.write_text("#pragma once\n" + body * rng.randint(40, 120), encoding="utf-8")
    guard = up / "include/guard.cuh"
    guard.parent.mkdir(parents=True)
    guard.write_text("#if __CUDA_ARCH__ <= 750\n#define W 32\n#else\n#error arch\n#endif\n", encoding="utf-8")
    git(up, "init", "-q", "-b", "main")
    git(up, "add", "-A")
    git(up, "commit", "-qm", "upstream")
    git(up, "tag", "v1.0")
    commit = git(up, "rev-parse", "HEAD")

    recipes = base / "recipes"
    ps = recipes / "patchsets" / "guard"
    ps.mkdir(parents=True)
    (ps / "patchset.yaml").write_text("""\
name: guard
description: widen the arch guard
steps:
  - id: widen
    patch: widen.patch
  - id: note
    insert: {file: include/guard.cuh, at: end, text: "// widened by lgpatch"}
""", encoding="utf-8")
    (ps / "widen.patch").write_text("--- a/include/guard.cuh\n+++ b/include/guard.cuh\n@@ -1,2 +1,2 @@\n"
                                    "-#if __CUDA_ARCH__ <= 750\n+#if __CUDA_ARCH__ <= 1290\n #define W 32\n",
                                    encoding="utf-8")
    (recipes / "fault.yaml").write_text(f"""\
name: fault
description: fault-injection fixture (several steps; a regex step rewrites a third of {n_files} files)
source: {{git: {{url: "{up.as_uri()}", ref: v1.0, commit: {commit}}}}}
parameters:
  cuda: {{type: version, default: "11.1"}}
steps:
  - guard
  - id: rename
    when: {{cuda: ">=11.0"}}
    regex: {{files: ["src/**/*.h"], pattern: CAFFE2_API, replace: TORCH_API}}
  - id: rename-some-back
    regex: {{files: ["src/m1*/*.h"], pattern: TORCH_API, replace: EXPORT_API, on_missing: ignore}}
  - id: trailer
    insert: {{file: include/guard.cuh, at: start, text: "// patched tree"}}
""", encoding="utf-8")
    return recipes


class Bench:
    def __init__(self, base: Path, recipes: Path) -> None:
        self.base = base
        self.recipes = recipes
        self.env = {**os.environ, "LGPATCH_CACHE": str(base / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        self.env.pop("CI", None)

    def argv(self, *args: str | Path) -> list[str]:
        return [sys.executable, "-m", "legacy_gpu_patch", "--recipe-path", str(self.recipes), *map(str, args)]

    def lgpatch(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, env=self.env, timeout=600)


def at_step_boundary(wt: Path) -> list[str]:
    """The rules a tree must satisfy after the next lgpatch command; returns the broken ones."""
    broken = []
    if (wt / ".git/lgpatch/journal.json").exists():
        broken.append("journal left behind")
    if (wt / ".git/index.lock").exists():
        broken.append(".git/index.lock left behind")
    if git(wt, "status", "--porcelain", "--untracked-files=all"):
        broken.append("uncommitted (half-written) changes in the tree")
    head = git(wt, "rev-parse", "HEAD")
    baseline = git(wt, "rev-list", "--max-parents=0", "HEAD")
    if head != baseline and "Lgpatch-Step:" not in git(wt, "log", "-1", "--format=%B"):
        broken.append(f"HEAD {head[:12]} is neither the baseline nor an lgpatch step commit")
    return broken


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--files", type=int, default=2000, help="files in the fixture tree (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (and failing trees)")
    ap.add_argument("--tmp", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="lgpatch-fault-bench-", dir=args.tmp))
    counts: Counter[str] = Counter()
    failures: list[str] = []
    try:
        recipes = make_fixture(base, args.files)
        bench = Bench(base, recipes)
        ref = base / "reference"
        proc = bench.lgpatch("apply", "fault", "--workdir", ref)
        if proc.returncode != 0:
            raise SystemExit(f"reference apply failed:\n{proc.stderr}")
        reference_tree = git(ref, "rev-parse", "HEAD^{tree}")
        # Durations: a fresh apply (clone + every step) and a re-apply on a tree made for other parameters.
        t0 = time.perf_counter()
        bench.lgpatch("apply", "fault", "--workdir", base / "timing")
        fresh_s = time.perf_counter() - t0
        template = base / "template"
        assert bench.lgpatch("apply", "fault", "--workdir", template, "--cuda", "10.2").returncode == 0
        (template / "README.user").write_text("my notes\n")
        git(template, "stash", "push", "-u", "-q", "-m", USER_STASH)
        probe = base / "probe"
        shutil.copytree(template, probe, symlinks=True)
        t0 = time.perf_counter()
        bench.lgpatch("apply", "fault", "--workdir", probe)
        reapply_s = time.perf_counter() - t0
        shutil.rmtree(probe)
        shutil.rmtree(base / "timing")
        print(f"fixture: {args.files} files; fresh apply {fresh_s:.2f} s, re-apply after a parameter change "
              f"{reapply_s:.2f} s; {args.trials} trials (seed {args.seed})")

        for trial in range(args.trials):
            wt = base / f"wt-{trial}"
            existing = trial % 2 == 1
            if existing:
                shutil.copytree(template, wt, symlinks=True)
                user_stash = git(wt, "rev-parse", "stash@{0}")
            delay = rng.uniform(0.0, (reapply_s if existing else fresh_s) * 1.1)
            child = subprocess.Popen(bench.argv("apply", "fault", "--workdir", wt), env=bench.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            finished_first = child.poll() is not None
            if not finished_first:
                child.send_signal(signal.SIGKILL)
            child.wait()
            problems: list[str] = []
            journal = wt / ".git/lgpatch/journal.json"
            if finished_first:
                counts["finished before the kill"] += 1
            elif not wt.exists():
                counts["killed while creating the tree"] += 1
            elif journal.exists():
                op = json.loads(journal.read_text() or "{}").get("op", "?")
                counts["killed mid-step" if op == "step" else f"killed mid-{op}"] += 1
            else:
                counts["killed between steps"] += 1
            if wt.exists():
                dirty_before = bool(git(wt, "status", "--porcelain", "--untracked-files=all", check=False))
                had_journal = journal.exists()
                stashes_before = git(wt, "stash", "list", check=False)
                status = bench.lgpatch("status", "-C", wt, "--json")
                if status.returncode != 0:
                    problems.append(f"status exit {status.returncode}: {status.stderr.strip()[-300:]}")
                else:
                    if "repaired the interrupted" in status.stderr:
                        counts["repaired by the next command"] += 1
                    elif had_journal:
                        problems.append("a journal was left but status did not say it repaired anything")
                    problems += at_step_boundary(wt)
                    stashes = git(wt, "stash", "list")
                    if had_journal and dirty_before:
                        if stashes.count(PARTIAL) == stashes_before.count(PARTIAL) + 1:
                            counts["partial changes kept in a stash"] += 1
                        else:
                            problems.append("partial changes were not kept in an 'lgpatch: partial changes' stash")
                    if existing and (USER_STASH not in stashes or user_stash not in git(
                            wt, "rev-list", "--walk-reflogs", "stash")):
                        problems.append("the user's own stash entry was lost")
            final = bench.lgpatch("apply", "fault", "--workdir", wt)
            if final.returncode != 0:
                problems.append(f"final apply exit {final.returncode}: {final.stderr.strip()[-300:]}")
            else:
                problems += at_step_boundary(wt)
                if git(wt, "rev-parse", "HEAD^{tree}") == reference_tree:
                    counts["final tree hash OK"] += 1
                else:
                    problems.append("final tree differs from the reference run")
            leftovers = [p.name for p in base.iterdir() if p.name.startswith(f".wt-{trial}.lgpatch-new-")]
            if leftovers:
                problems.append(f"half-created trees left: {leftovers}")
            if problems:
                failures.append(f"trial {trial} ({'existing' if existing else 'fresh'} tree, kill after "
                                f"{delay:.2f} s): " + "; ".join(problems))
            elif not args.keep:
                shutil.rmtree(wt, ignore_errors=True)
            if sys.stdout.isatty():
                print(f"  trial {trial + 1:>3}/{args.trials}: {'FAIL' if problems else 'ok'}", end="\r", flush=True)
            elif problems:
                print(f"  trial {trial + 1:>3}/{args.trials}: FAIL", flush=True)
        print()
        print("results:")
        for key in ("finished before the kill", "killed while creating the tree", "killed between steps",
                    "killed mid-step", "killed mid-rewind", "repaired by the next command",
                    "partial changes kept in a stash", "final tree hash OK"):
            print(f"  {key:<34} {counts.get(key, 0):>4}")
        for key in sorted(set(counts) - {"finished before the kill", "killed while creating the tree",
                                         "killed between steps", "killed mid-step", "killed mid-rewind",
                                         "repaired by the next command", "partial changes kept in a stash",
                                         "final tree hash OK"}):
            print(f"  {key:<34} {counts[key]:>4}")
        print(f"  {'trials that broke a rule':<34} {len(failures):>4}")
        for f in failures:
            print(f"    {f}")
    finally:
        if args.keep or failures:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
