#!/usr/bin/env python3
"""kill -9 `lgpatch apply` N times, at random moments and inside git's lock windows; every tree must come back.

Each trial starts `lgpatch apply` as a child process (half the trials on a fresh work tree, half on an existing
one made for other parameters, so kills also land in rewinds and re-applies) and kills it with SIGKILL either
after a random delay or while one of git's lock files (.git/index.lock, HEAD.lock, the branch's lock,
ORIG_HEAD.lock, refs/stash.lock) exists: the bench polls for them and kills at the n-th sighting. Then it checks
what the next `lgpatch status` leaves:

    - no journal and no git lock file left; HEAD is the pristine baseline or an lgpatch step commit;
    - `git status --porcelain` is empty: no half-written file stays in the tree;
    - partial changes of an interrupted step are kept under refs/lgpatch/rescued/<n>, not in `git stash list`;
    - the user's own stash entry and branch (the existing-tree trials make both) are untouched;

and finally that `lgpatch apply` completes and gives exactly the reference run's tree (same tree hash).

    python bench/fault_bench.py                               # 200 trials on the 30-step fixture
    python bench/fault_bench.py --recipe chainer --trials 100  # the real Chainer 1.24 sdist (cached or from PyPI)

It prints the counts and exits 1 if any trial broke a rule. Only the standard library and lgpatch are used.
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
USER_STASH = "user: my notes"
GIT_LOCKS = ("index.lock", "HEAD.lock", "refs/heads/lgpatch.lock", "ORIG_HEAD.lock", "refs/stash.lock")
CHAINER_SHA = "58adfb7348d10991e180941f1ebe2daf6eee569808c3746c49adca9a25a2a43d"


def git(cwd: Path, *args: str, check: bool = True) -> str:
    # --no-optional-locks: looking must not take .git/index.lock (a repair may be about to remove a stale one).
    proc = subprocess.run(["git", "--no-optional-locks", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV})
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def make_fixture(base: Path, n_files: int) -> Path:
    """An upstream repository and a 30-step recipe: a patch, inserts, and regex steps over many files."""
    up = base / "upstream"
    rng = random.Random(7)
    for i in range(n_files):
        path = up / f"src/m{i % 30}/f{i}.h"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "CAFFE2_API void f(); CAFFE2_API int g();\n" if i % 3 == 0 else "void h(); int k();\n"
        path.write_text("#pragma once\n" + body * rng.randint(20, 60), encoding="utf-8")
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
    (ps / "patchset.yaml").write_text("name: guard\ndescription: widen the arch guard\nsteps:\n"
                                      "  - {id: widen, patch: widen.patch}\n", encoding="utf-8")
    (ps / "widen.patch").write_text("--- a/include/guard.cuh\n+++ b/include/guard.cuh\n@@ -1,2 +1,2 @@\n"
                                    "-#if __CUDA_ARCH__ <= 750\n+#if __CUDA_ARCH__ <= 1290\n #define W 32\n",
                                    encoding="utf-8")
    steps = ["  - guard", "  - id: rename\n    when: {cuda: \">=11.0\"}\n    regex: {files: [\"src/**/*.h\"], "
             "pattern: CAFFE2_API, replace: TORCH_API}"]
    for k in range(28):  # 1 + 1 + 28 = 30 steps
        if k % 2:
            steps.append(f"  - id: note{k}\n    insert: {{file: include/guard.cuh, at: end, text: '// note {k}'}}")
        else:
            steps.append(f"  - id: m{k}\n    regex: {{files: [\"src/m{k}/*.h\"], pattern: 'int k\\(\\)', "
                         f"replace: 'int k{k}()', on_missing: ignore}}")
    (recipes / "fault.yaml").write_text(
        f"name: fault\ndescription: fault-injection fixture, 30 steps over {n_files} files\n"
        f"source: {{git: {{url: \"{up.as_uri()}\", ref: v1.0, commit: {commit}}}}}\n"
        "parameters:\n  cuda: {type: version, default: \"11.1\"}\nsteps:\n" + "\n".join(steps) + "\n",
        encoding="utf-8")
    return recipes


class Bench:
    def __init__(self, base: Path, recipe: str, recipes: Path | None, other_params: list[str]) -> None:
        self.base = base
        self.recipe = recipe
        self.recipes = recipes
        self.other_params = other_params
        self.env = {**os.environ, "LGPATCH_CACHE": str(base / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        self.env.pop("CI", None)

    def argv(self, *args: str | Path) -> list[str]:
        search = ["--recipe-path", str(self.recipes)] if self.recipes else []
        return [sys.executable, "-m", "legacy_gpu_patch", *search, *map(str, args)]

    def lgpatch(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, env=self.env, timeout=900)

    def apply(self, wt: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.lgpatch("apply", self.recipe, "--workdir", wt, *extra)


def git_locks(wt: Path, child_pid: int) -> list[Path]:
    """Where the child's git lock files can appear: the tree, and the half-made tree before it is renamed in."""
    roots = [wt, wt.parent / f".{wt.name}.lgpatch-new-{child_pid}"]
    return [r / ".git" / name for r in roots for name in GIT_LOCKS]


def kill_in_lock_window(child: subprocess.Popen[bytes], wt: Path, sighting: int, limit_s: float) -> bool:
    """Poll for git's lock files; SIGKILL the child at the `sighting`-th lock window seen. True if it was killed.
    With sighting 0, only count the windows (returned through the COUNTED list) and never kill."""
    paths = git_locks(wt, child.pid)
    seen = 0
    deadline = time.monotonic() + limit_s
    while child.poll() is None and time.monotonic() < deadline:
        if any(os.path.exists(p) for p in paths):
            seen += 1
            if sighting and seen >= sighting:
                child.send_signal(signal.SIGKILL)
                return True
            while child.poll() is None and any(os.path.exists(p) for p in paths):
                time.sleep(0.0001)  # let this window close before counting the next one
        time.sleep(0.0002)
    COUNTED.append(seen)
    return False


COUNTED: list[int] = []


def at_step_boundary(wt: Path) -> list[str]:
    """The rules a tree must satisfy after the next lgpatch command; returns the broken ones."""
    broken = []
    if (wt / ".git/lgpatch/journal.json").exists():
        broken.append("journal left behind")
    broken += [f".git/{name} left behind" for name in GIT_LOCKS if (wt / ".git" / name).exists()]
    if git(wt, "status", "--porcelain", "--untracked-files=all"):
        broken.append("uncommitted (half-written) changes in the tree")
    head = git(wt, "rev-parse", "HEAD")
    baseline = git(wt, "rev-list", "--max-parents=0", "HEAD")
    if head != baseline and "Lgpatch-Step:" not in git(wt, "log", "-1", "--format=%B"):
        broken.append(f"HEAD {head[:12]} is neither the baseline nor an lgpatch step commit")
    return broken


def rescued(wt: Path) -> int:
    return len(git(wt, "for-each-ref", "refs/lgpatch/rescued").splitlines())


class Trials:
    def __init__(self, bench: Bench, template: Path, reference_tree: str, durations: tuple[float, float],
                 windows: tuple[int, int], rng: random.Random) -> None:
        self.bench, self.template, self.reference_tree = bench, template, reference_tree
        self.durations, self.windows, self.rng = durations, windows, rng
        self.counts: Counter[str] = Counter()
        self.failures: list[str] = []

    def kill(self, wt: Path, existing: bool, in_lock: bool) -> tuple[str, bool]:
        child = subprocess.Popen(self.bench.argv("apply", self.bench.recipe, "--workdir", wt), env=self.bench.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if in_lock:
            sighting = self.rng.randint(1, max(1, self.windows[existing]))
            how = f"kill at git lock window {sighting}"
            killed = kill_in_lock_window(child, wt, sighting, limit_s=600)
        else:
            delay = self.rng.uniform(0.0, self.durations[existing] * 1.1)
            how = f"kill after {delay:.2f} s"
            time.sleep(delay)
            killed = child.poll() is None
            if killed:
                child.send_signal(signal.SIGKILL)
        child.wait()
        return how, not killed

    def one(self, trial: int, in_lock: bool) -> None:
        base, counts = self.bench.base, self.counts
        wt = base / f"wt-{trial}"
        existing = trial % 2 == 1
        if existing:
            shutil.copytree(self.template, wt, symlinks=True)
        how, finished_first = self.kill(wt, existing, in_lock)
        problems: list[str] = []
        journal = wt / ".git/lgpatch/journal.json"
        locks_left = [n for n in GIT_LOCKS if (wt / ".git" / n).exists()]
        if finished_first:
            counts["finished before the kill"] += 1
        elif not (wt / ".git").exists():  # nothing, or the empty folder the creator had claimed
            counts["killed while creating the tree"] += 1
        elif journal.exists():
            op = json.loads(journal.read_text() or "{}").get("op", "?")
            counts["killed mid-step" if op == "step" else f"killed mid-{op}"] += 1
        else:
            counts["killed between steps"] += 1
        if locks_left:
            counts["git lock file(s) left by the kill"] += 1
        if (wt / ".git").exists():
            problems += self.check_next_command(wt, existing, journal.exists(), bool(locks_left))
        final = self.bench.apply(wt)
        if final.returncode != 0:
            problems.append(f"final apply exit {final.returncode}: {final.stderr.strip()[-300:]}")
        else:
            problems += at_step_boundary(wt) + self.user_things_kept(wt, existing)
            if git(wt, "rev-parse", "HEAD^{tree}") == self.reference_tree:
                counts["final tree hash OK"] += 1
            else:
                problems.append("final tree differs from the reference run")
        leftovers = [p.name for p in base.iterdir() if p.name.startswith(f".wt-{trial}.lgpatch-new-")]
        if leftovers:
            problems.append(f"half-created trees left: {leftovers}")
        if problems:
            self.failures.append(f"trial {trial} ({'existing' if existing else 'fresh'} tree, {how}): "
                                 + "; ".join(problems))
        else:
            shutil.rmtree(wt, ignore_errors=True)

    def check_next_command(self, wt: Path, existing: bool, had_journal: bool, had_locks: bool) -> list[str]:
        problems = []
        dirty_before = bool(git(wt, "status", "--porcelain", "--untracked-files=all", check=False))
        rescued_before = rescued(wt)
        status = self.bench.lgpatch("status", "-C", wt, "--json")
        if status.returncode != 0:
            return [f"status exit {status.returncode}: {status.stderr.strip()[-300:]}"]
        if "repaired the interrupted" in status.stderr:
            self.counts["repaired by the next command"] += 1
        elif had_journal:
            problems.append("a journal was left but status did not say it repaired anything")
        if had_locks and had_journal:
            if "left by a killed lgpatch" in status.stderr:
                self.counts["git locks removed by the next command"] += 1
            else:
                problems.append("git lock files were left but status did not say it removed them")
        problems += at_step_boundary(wt)
        if had_journal and dirty_before:
            if rescued(wt) == rescued_before + 1:
                self.counts["partial changes kept in refs/lgpatch/rescued"] += 1
            else:
                problems.append("partial changes were not kept under refs/lgpatch/rescued")
        return problems + self.user_things_kept(wt, existing)

    def user_things_kept(self, wt: Path, existing: bool) -> list[str]:
        problems = []
        stashes = git(wt, "stash", "list")
        if "lgpatch: partial" in stashes:
            problems.append("a repair put partial changes into the user's git stash list")
        if existing:
            if USER_STASH not in stashes or self.user_stash not in git(wt, "rev-list", "--walk-reflogs", "stash"):
                problems.append("the user's own stash entry was lost")
            if git(wt, "rev-parse", "mine") != self.user_branch:
                problems.append("the user's own branch moved")
        return problems

    user_stash = ""
    user_branch = ""


def prepare(bench: Bench, base: Path) -> Trials:
    ref = base / "reference"
    proc = bench.apply(ref)
    if proc.returncode != 0:
        raise SystemExit(f"reference apply failed:\n{proc.stderr}")
    reference_tree = git(ref, "rev-parse", "HEAD^{tree}")
    template = base / "template"
    if bench.apply(template, *bench.other_params).returncode != 0:
        raise SystemExit("template apply failed")
    # The user's own things in an existing tree: a branch with a commit, and a stash entry.
    git(template, "branch", "mine")
    git(template, "checkout", "-q", "mine")
    (template / "MINE.txt").write_text("my commit\n")
    git(template, "add", "MINE.txt")
    git(template, "commit", "-qm", "my own commit")
    git(template, "checkout", "-q", "lgpatch")
    (template / "README.user").write_text("my notes\n")
    git(template, "stash", "push", "-u", "-q", "-m", USER_STASH)
    durations, windows = [], []
    for existing in (False, True):  # time one un-killed run of each kind and count its git lock windows
        probe = base / "probe"
        if existing:
            shutil.copytree(template, probe, symlinks=True)
        t0 = time.perf_counter()
        child = subprocess.Popen(bench.argv("apply", bench.recipe, "--workdir", probe), env=bench.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kill_in_lock_window(child, probe, 0, limit_s=900)
        child.wait()
        durations.append(time.perf_counter() - t0)
        windows.append(COUNTED[-1])
        shutil.rmtree(probe)
    trials = Trials(bench, template, reference_tree, (durations[0], durations[1]), (windows[0], windows[1]),
                    random.Random(1))
    trials.user_stash = git(template, "rev-parse", "stash@{0}")
    trials.user_branch = git(template, "rev-parse", "mine")
    print(f"{bench.recipe}: fresh apply {durations[0]:.2f} s ({windows[0]} git lock windows seen), re-apply after "
          f"a parameter change {durations[1]:.2f} s ({windows[1]} windows)", flush=True)
    return trials


def seed_chainer_sdist(bench: Bench) -> None:
    """Reuse a cached Chainer sdist (this user's lgpatch cache) so the bench needs no network; else apply downloads
    it from PyPI as a user's first apply would."""
    from legacy_gpu_patch.source.cache import cache_root

    for c in (cache_root() / "downloads/sha256" / CHAINER_SHA, Path.home() / ".cache/lgpatch/downloads/sha256"
              / CHAINER_SHA):
        if c.is_file():
            bench.lgpatch("cache", "add", c)
            return


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", choices=["fixture", "chainer"], default="fixture")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--files", type=int, default=300, help="files in the fixture tree (default 300)")
    ap.add_argument("--lock-share", type=float, default=0.5, help="share of trials killed in a git lock window")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (and failing trees)")
    ap.add_argument("--tmp", type=Path, default=None)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="lgpatch-fault-bench-", dir=args.tmp))
    trials = None
    started = time.perf_counter()
    try:
        if args.recipe == "fixture":
            bench = Bench(base, "fault", make_fixture(base, args.files), ["--cuda", "10.2"])
        else:
            bench = Bench(base, "chainer-1.24", None, ["--param", "numpy=1.20"])
            seed_chainer_sdist(bench)
        trials = prepare(bench, base)
        trials.rng = random.Random(args.seed)
        done = 0
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop early with SIGINT/SIGTERM: report so far
        try:
            for trial in range(args.trials):
                in_lock = trials.rng.random() < args.lock_share
                trials.one(trial, in_lock)
                trials.counts["kills aimed at a git lock window" if in_lock else "kills at a random moment"] += 1
                done = trial + 1
                print(f"  trial {done:>3}/{args.trials}: {len(trials.failures)} failed so far", flush=True,
                      end="\r" if sys.stdout.isatty() else "\n")
        except KeyboardInterrupt:
            print(f"\nstopped after {done} of {args.trials} trials (the interrupted trial is not counted)")
        print()
        report(trials, done, time.perf_counter() - started)
    finally:
        if args.keep or (trials and trials.failures):
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if trials is None or trials.failures else 0)


def report(trials: Trials, n: int, seconds: float) -> None:
    order = ["kills at a random moment", "kills aimed at a git lock window", "finished before the kill",
             "killed while creating the tree", "killed between steps", "killed mid-step", "killed mid-rewind",
             "git lock file(s) left by the kill", "git locks removed by the next command",
             "repaired by the next command", "partial changes kept in refs/lgpatch/rescued", "final tree hash OK"]
    print(f"results ({n} trials, {seconds:.0f} s):")
    for key in order + sorted(set(trials.counts) - set(order)):
        print(f"  {key:<46} {trials.counts.get(key, 0):>4}")
    print(f"  {'trials that broke a rule':<46} {len(trials.failures):>4}")
    for f in trials.failures:
        print(f"    {f}")


if __name__ == "__main__":
    main()
