#!/usr/bin/env python3
"""lgpatch apply vs the hand pipeline it replaces, on a generated tree or on any real git tree.

    (A) hand:    git clone --local + git checkout PIN + git apply PATCH
                 + grep -rlw PATTERN --include=... . | xargs sed -i 's/\\bPATTERN\\b/REPLACE/g'
    (B) lgpatch: lgpatch apply RECIPE --workdir FRESH      (the same patch step + regex step; one commit per step)

Each timing is wall-clock of the whole command from a fresh directory, best of N, A and B alternating so that a
change in machine load hits both. Before timing, one lgpatch apply warms the mirror cache (a second apply needs no
network, the normal case) and both pipelines run once to warm the page cache. After each pair the two resulting
trees are compared (`git write-tree` of the hand tree vs lgpatch's HEAD tree): the benchmark refuses to report a
ratio for two pipelines that did different work.

Every timed run is traced with GIT_TRACE2_EVENT (both pipelines alike), so that the report also gives what each
pipeline spends outside `git checkout` — the same command in both, and on a shared or virtual disk the part whose
time swings by 3-5x from run to run — and the ratio both would have with the best checkout time seen.

    python bench/apply_bench.py                          # generated tree: 6,500 files, ~2.5 % use CAFFE2_API
    python bench/apply_bench.py --tree /work/.mirror/mcrl+pytorch-lms/repo \\
        --commit 4ff3872a2099993bf7e8c588f7182f3df777205b --pattern CAFFE2_API --replace TORCH_API
    python bench/apply_bench.py --profile                # also: cProfile of one lgpatch apply, top functions

Only the standard library and lgpatch (run as `python -m legacy_gpu_patch`) are used.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_GLOBS = "**/*.h,**/*.hpp,**/*.cpp,**/*.cc,**/*.cu,**/*.cuh"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00+0000",
           "GIT_COMMITTER_DATE": "2020-01-01T00:00:00+0000"}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV})
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout.strip()


# ------------------------------------------------------------------------------------------- the generated tree

_DIRS = ["aten/src/ATen", "aten/src/ATen/native", "aten/src/ATen/native/cuda", "aten/src/ATen/cuda", "aten/src/TH",
         "aten/src/THC", "c10/core", "c10/util", "c10/cuda", "c10/macros", "caffe2/core", "caffe2/operators",
         "caffe2/utils", "caffe2/cuda_rtc", "caffe2/sgd", "caffe2/quantization/server", "torch/csrc/autograd",
         "torch/csrc/jit", "torch/csrc/jit/passes", "torch/csrc/api/include/torch", "torch/csrc/distributed/c10d",
         "third_party/cub/cub", "third_party/fmt/include", "tools/codegen", "test/cpp/api", "benchmarks/cpp"]
_EXTS = [(".h", 30), (".cpp", 34), (".cu", 10), (".cuh", 4), (".cc", 6), (".hpp", 2), (".py", 8), (".txt", 3),
         (".cmake", 1), (".md", 2)]
_STATEMENTS = [
    "  int64_t numel = self.numel();",
    "  auto iter = TensorIterator::unary_op(result, self);",
    "  TORCH_CHECK(dim >= 0 && dim < ndim, \"dimension out of range\");",
    "  for (int64_t i = 0; i < n; ++i) {\n    out[i] = static_cast<scalar_t>(in[i]) * alpha;\n  }",
    "  C10_CUDA_CHECK(cudaGetLastError());",
    "  const auto& opts = self.options().dtype(at::kFloat);",
    "  if (input.is_cuda()) {\n    return at::native::foo_cuda(input, weight, bias);\n  }",
    "  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());",
    "  AT_DISPATCH_FLOATING_TYPES(self.scalar_type(), \"op_cpu\", [&] {\n    kernel<scalar_t>(iter);\n  });",
    "  return std::make_tuple(output, indices);",
    "  // Accumulate in a wider type to avoid overflow for large reductions.",
    "  cudaStream_t stream = at::cuda::getCurrentCUDAStream();",
    "  dim3 grid((n + kThreads - 1) / kThreads);",
]


def _cxx_file(rng: random.Random, index: int, api: bool, size: int) -> str:
    lines = ["// Generated for lgpatch's apply benchmark: the shape of a framework source file, not its content.",
             "#pragma once" if rng.random() < 0.5 else f'#include "common_{index % 17}.h"',
             "#include <vector>", "#include <tuple>", "", "namespace at {", "namespace native {", ""]
    fn = 0
    while sum(len(x) + 1 for x in lines) < size:
        export = "CAFFE2_API " if api and rng.random() < 0.35 else ""
        lines.append(f"{export}Tensor op_{index}_{fn}(const Tensor& self, int64_t dim, Scalar alpha) {{")
        lines += [rng.choice(_STATEMENTS) for _ in range(rng.randint(3, 9))]
        lines += ["  return self;", "}", ""]
        if rng.random() < 0.05:
            lines.append("// CAFFE2_APIS and MY_CAFFE2_API are other names: a word-boundary rename leaves them.")
        fn += 1
    if api and "CAFFE2_API " not in "\n".join(lines):
        lines.insert(8, f"class CAFFE2_API Op{index} {{}};")
    return "\n".join([*lines, "} // namespace native", "} // namespace at", ""])


def generate_tree(root: Path, n_files: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    exts, weights = zip(*_EXTS)
    stats = {"files": 0, "bytes": 0, "api_files": 0}
    for i in range(n_files):
        folder = rng.choice(_DIRS)
        ext = rng.choices(exts, weights)[0]
        sub = f"m{i % 7}/" if rng.random() < 0.3 else ""
        rel = f"{folder}/{sub}f{i}{ext}"
        size = int(min(max(rng.lognormvariate(8.0, 0.8), 300), 40000))  # mean ~4 KB, long tail
        if ext in (".py", ".txt", ".cmake", ".md"):
            # CAFFE2_API outside the rename's globs: the glob must keep these unchanged.
            text = "# build description\n" + ("set(CAFFE2_API_FLAGS on)  # CAFFE2_API\n" if i % 41 == 0 else "")
            text += "".join(f"value_{j} = {j}\n" for j in range(size // 14))
        else:
            api = rng.random() < 0.025
            text = _cxx_file(rng, i, api, size)
            stats["api_files"] += api
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        stats["files"] += 1
        stats["bytes"] += len(text)
    guard = root / "caffe2/utils/GpuDefs.cuh"
    guard.write_text(
        "#ifndef CAFFE2_UTILS_GPU_DEFS_H_\n#define CAFFE2_UTILS_GPU_DEFS_H_\n\nnamespace caffe2 {\n\n"
        "#if __CUDA_ARCH__ <= 750\nconstexpr int kWarpSize = 32;\n#else\n"
        "#error Unknown __CUDA_ARCH__; please define parameters for compute capability\n#endif\n\n"
        "} // namespace caffe2\n\n#endif\n", encoding="utf-8")
    return stats


def make_generated_upstream(base: Path, n_files: int, seed: int) -> tuple[Path, str, str]:
    up = base / "upstream"
    up.mkdir()
    t0 = time.perf_counter()
    stats = generate_tree(up, n_files, seed)
    git(up, "init", "-q", "-b", "main")
    git(up, "add", "-A")
    git(up, "commit", "-qm", "generated tree")
    git(up, "tag", "v1.0")
    # Packed, like any real repository or mirror: `git clone --local` then hard-links one pack, not 6,500 loose
    # objects (which would slow the hand pipeline's clone and flatter lgpatch, whose mirror is packed).
    git(up, "repack", "-adq")
    print(f"generated tree: {stats['files']} files, {stats['bytes'] / 1e6:.1f} MB "
          f"(mean {stats['bytes'] / stats['files'] / 1024:.1f} KiB), {stats['api_files']} files use CAFFE2_API "
          f"({100 * stats['api_files'] / stats['files']:.1f} %), in {time.perf_counter() - t0:.1f} s")
    return up, "v1.0", git(up, "rev-parse", "HEAD")


# ------------------------------------------------------------------------------------------- the patch and recipe


def make_patch(store: Path, commit: str, preferred: str | None) -> tuple[str, str]:
    """A small unified diff against the pinned tree: widen the arch guard when the file exists, else a comment."""
    files = git(store, "ls-tree", "-r", "--name-only", commit).splitlines()
    rel = preferred if preferred in files else next(
        (f for f in files if f.endswith("GpuDefs.cuh")), next(f for f in files if f.endswith(".h")))
    old = subprocess.run(["git", "cat-file", "blob", f"{commit}:{rel}"], cwd=store, capture_output=True,
                         check=True).stdout.decode("utf-8", errors="surrogateescape").splitlines(keepends=True)
    new = list(old)
    hit = next((i for i, line in enumerate(old) if "__CUDA_ARCH__ <= 750" in line), None)
    if hit is not None:
        new[hit] = new[hit].replace("<= 750", "<= 1290")
        new.insert(hit, "// The warp size is 32 on every NVIDIA architecture.\n")
    else:
        new.insert(min(3, len(new)), "// lgpatch benchmark: a one-line change.\n")
    diff = "".join(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}"))
    return rel, diff


def write_recipe(folder: Path, url: str, ref: str, commit: str, globs: list[str], pattern: str,
                 replace: str) -> None:
    (folder / "patchsets").mkdir(parents=True)
    files = ", ".join(f'"{g}"' for g in globs)
    (folder / "bench.yaml").write_text(f"""\
name: apply-bench
description: lgpatch apply benchmark (a patch step and a tree-wide regex step)
source:
  git: {{url: "{url}", ref: "{ref}", commit: {commit}}}
steps:
  - id: widen
    patch: widen.patch
  - id: rename
    regex: {{files: [{files}], pattern: '{pattern}', replace: '{replace}', word: true}}
""", encoding="utf-8")


# ------------------------------------------------------------------------------------------- the two pipelines


def hand_command(store: Path, commit: str, dest: Path, patch: Path, globs: list[str], pattern: str,
                 replace: str) -> str:
    includes = " ".join(f"--include={shlex.quote(g.rsplit('/', 1)[-1])}" for g in globs)
    q = shlex.quote
    sed_expr = "s/\\b" + pattern + "\\b/" + replace + "/g"
    return (
        f"git clone -q --local --no-checkout {q(str(store))} {q(str(dest))} && cd {q(str(dest))} && "
        f"git -c advice.detachedHead=false checkout -q {commit} && git apply {q(str(patch))} && "
        f"grep -rlw --exclude-dir=.git {includes} {q(pattern)} . | "
        f"xargs -r sed -i {q(sed_expr)}"
    )


def _cpu() -> float:
    """CPU seconds (user + system) of all waited-for child processes so far, grandchildren included."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds, process). CPU time is what other load on a shared machine disturbs least."""
    # Write back what earlier runs (and their deletion) left dirty, so that no run pays for its predecessor's I/O:
    # without this, whichever pipeline runs first after a clean-up is 2-4x slower on a VM disk.
    os.sync()
    c0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, _cpu() - c0, proc


def run_hand(cmd: str, trace: Path | None = None) -> tuple[float, float, float]:
    """(wall, CPU, seconds inside `git checkout`) of the hand pipeline."""
    env = {**os.environ, "GIT_TRACE2_EVENT": str(trace)} if trace else None
    wall, cpu, proc = timed(["bash", "-c", cmd], env)
    if proc.returncode != 0:
        raise SystemExit(f"hand pipeline failed: {proc.stderr.strip()}\n  command: {cmd}")
    return wall, cpu, git_time_by_command(trace).get("checkout", 0.0) if trace else 0.0


def lgpatch_argv(recipes: Path, dest: Path, source: Path | None, profile_out: Path | None = None) -> list[str]:
    runner = [sys.executable]
    if profile_out is not None:
        runner += ["-m", "cProfile", "-o", str(profile_out)]
    argv = [*runner, "-m", "legacy_gpu_patch", "--recipe-path", str(recipes), "apply", "apply-bench",
            "--workdir", str(dest), "--no-strict"]
    return argv + (["--source", str(source)] if source else [])


def run_lgpatch(argv: list[str], env: dict[str, str], trace: Path | None = None) -> tuple[float, float, float]:
    """(wall, CPU, seconds inside `git checkout`) of one lgpatch apply."""
    wall, cpu, proc = timed(argv, {**env, "GIT_TRACE2_EVENT": str(trace)} if trace else env)
    if proc.returncode != 0:
        raise SystemExit(f"lgpatch apply failed (exit {proc.returncode}):\n{proc.stderr}")
    return wall, cpu, git_time_by_command(trace).get("checkout", 0.0) if trace else 0.0


def hand_tree(dest: Path) -> str:
    git(dest, "add", "-A")
    return git(dest, "write-tree")


def summarise(label: str, a: list[tuple[float, float, float]], b: list[tuple[float, float, float]]) -> float:
    print(f"\n{label}")
    ratios = []
    for k, what in ((0, "wall"), (1, "CPU (user+sys)")):
        xa, xb = [t[k] for t in a], [t[k] for t in b]
        ratio = min(xb) / min(xa)
        ratios.append(ratio)
        print(f"  {what}:")
        print(f"    (A) hand pipeline  best {min(xa):7.3f} s   runs: {' '.join(f'{x:.3f}' for x in xa)}")
        print(f"    (B) lgpatch apply  best {min(xb):7.3f} s   runs: {' '.join(f'{x:.3f}' for x in xb)}")
        print(f"    ratio lgpatch/hand = {ratio:.2f}x  (target <= 1.20x: {'met' if ratio <= 1.2 else 'NOT met'})")
    # The checkout (writing every file) is the same git command in both pipelines and, on a shared or virtual
    # disk, by far the noisiest part. What each pipeline adds around it is steadier: report it separately, and the
    # ratio both would have with the best checkout time seen.
    co = min(t[2] for t in a + b)
    rest_a, rest_b = min(t[0] - t[2] for t in a), min(t[0] - t[2] for t in b)
    est = (co + rest_b) / (co + rest_a)
    print("  outside the checkout (wall minus `git checkout`, best of N):")
    print(f"    (A) hand {rest_a:.3f} s   (B) lgpatch {rest_b:.3f} s   best checkout {co:.3f} s")
    print(f"    ratio with the best checkout = ({co:.3f} + {rest_b:.3f}) / ({co:.3f} + {rest_a:.3f}) = {est:.2f}x  "
          f"(target <= 1.20x: {'met' if est <= 1.2 else 'NOT met'})")
    return ratios[0]


def git_time_by_command(trace: Path) -> dict[str, float]:
    """Seconds spent in each top-level git command, from a GIT_TRACE2_EVENT file (git's own clock)."""
    names: dict[str, str] = {}
    totals: dict[str, float] = {}
    for line in trace.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        sid = ev.get("sid", "")
        if "/" in sid:  # a git process started by git itself: counted in its parent
            continue
        if ev.get("event") == "cmd_name":
            names[sid] = ev.get("name", "?")
        elif ev.get("event") == "atexit":
            name = names.get(sid, "?")
            totals[name] = totals.get(name, 0.0) + float(ev.get("t_abs", 0.0))
    return totals


def breakdown(label: str, argv: list[str], env: dict[str, str], trace: Path) -> None:
    """Where one run's wall time goes: each git command (by git's own clock) and the rest (Python, grep, sed)."""
    trace.unlink(missing_ok=True)
    wall, _cpu_s, proc = timed(argv, {**env, "GIT_TRACE2_EVENT": str(trace)})
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed: {proc.stderr}")
    per = git_time_by_command(trace)
    in_git = sum(per.values())
    parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
    print(f"  {label:<8} wall {wall:.3f} s = git {in_git:.3f} s ({parts}) + other {wall - in_git:.3f} s")


def profile_once(recipes: Path, base: Path, source: Path | None, env: dict[str, str], top: int) -> None:
    import pstats

    out = base / "apply.prof"
    run_lgpatch(lgpatch_argv(recipes, base / "profiled", source, out), env)
    print(f"\ncProfile of one lgpatch apply (cumulative, top {top}; file {out}):")
    stats = pstats.Stats(str(out))
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=6500, help="files in the generated tree (default 6500)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", "-n", type=int, default=5, help="timed runs of each pipeline (best of N)")
    ap.add_argument("--tree", type=Path, help="a real git repository or bare mirror to use instead")
    ap.add_argument("--ref", default=None, help="the recipe's ref for --tree (default: the commit itself)")
    ap.add_argument("--commit", help="the pinned commit of --tree (default: its HEAD)")
    ap.add_argument("--pattern", default="CAFFE2_API")
    ap.add_argument("--replace", default="TORCH_API")
    ap.add_argument("--globs", default=DEFAULT_GLOBS, help=f"comma-separated **/*.ext globs ({DEFAULT_GLOBS})")
    ap.add_argument("--patch-file", default="caffe2/utils/GpuDefs.cuh", help="file the small patch changes")
    ap.add_argument("--profile", action="store_true", help="also profile one lgpatch apply with cProfile")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time each git command of one run of each pipeline (GIT_TRACE2_EVENT)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--tmp", type=Path, default=None, help="where to put the temporary folder")
    args = ap.parse_args()
    globs = [g.strip() for g in args.globs.split(",") if g.strip()]
    if any(not g.startswith("**/*.") or "/" in g[3:] for g in globs):
        raise SystemExit("--globs: only **/*.ext globs have an exact grep --include equivalent")

    base = Path(tempfile.mkdtemp(prefix="lgpatch-apply-bench-", dir=args.tmp))
    try:
        env = {**os.environ, "LGPATCH_CACHE": str(base / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("CI", None)
        if args.tree:
            store = args.tree.resolve()
            commit = args.commit or git(store, "rev-parse", "HEAD")
            ref = args.ref or commit
            url, source = store.as_uri(), store  # `--source PATH`: how a local clone or mirror is used
            n = len(git(store, "ls-tree", "-r", "--name-only", commit).splitlines())
            print(f"real tree: {store} @ {commit[:12]} ({n} files)")
        else:
            store, ref, commit = make_generated_upstream(base, args.files, args.seed)
            url, source = store.as_uri(), None  # through lgpatch's mirror cache, warmed below
        rel, diff = make_patch(store, commit, args.patch_file)
        recipes = base / "recipes"
        write_recipe(recipes, url, ref, commit, globs, args.pattern, args.replace)
        (recipes / "widen.patch").write_text(diff, encoding="utf-8", errors="surrogateescape")
        patch = recipes / "widen.patch"
        print(f"patch: {rel} ({diff.count(chr(10))} lines); regex: \\b{args.pattern}\\b -> {args.replace} over "
              f"{', '.join(globs)}")
        print(f"machine: {os.cpu_count()} CPU(s), python {sys.version.split()[0]}, "
              f"{git(base, '--version')}; best of {args.repeat}, A/B alternating")

        # Warm-up: lgpatch fills its mirror cache; both pipelines run once (page cache), and their trees must match.
        warm_lg, warm_hand = base / "warm-lgpatch", base / "warm-hand"
        t_first = run_lgpatch(lgpatch_argv(recipes, warm_lg, source), env)[0]
        run_hand(hand_command(store, commit, warm_hand, patch, globs, args.pattern, args.replace))
        lg_tree, h_tree = git(warm_lg, "rev-parse", "HEAD^{tree}"), hand_tree(warm_hand)
        if lg_tree != h_tree:
            diff_stat = subprocess.run(["git", "diff", "--stat", lg_tree, h_tree], cwd=warm_hand,
                                       capture_output=True, text=True).stdout
            raise SystemExit(f"the two pipelines produced different trees ({lg_tree} vs {h_tree}):\n{diff_stat}")
        changed = git(warm_lg, "diff", "--name-only", f"{commit}..HEAD").splitlines()
        print(f"warm-up: first lgpatch apply (mirror clone) {t_first:.2f} s; both trees identical "
              f"({lg_tree[:12]}), {len(changed)} files changed")
        for d in (warm_lg, warm_hand):
            shutil.rmtree(d)

        a_times: list[tuple[float, float, float]] = []
        b_times: list[tuple[float, float, float]] = []
        for i in range(args.repeat):
            order = [("A", "B"), ("B", "A")][i % 2]
            for which in order:
                dest = base / f"run-{which}-{i}"
                trace = base / f"trace-{which}-{i}.json"
                if which == "A":
                    a_times.append(run_hand(hand_command(store, commit, dest, patch, globs, args.pattern,
                                                         args.replace), trace))
                else:
                    b_times.append(run_lgpatch(lgpatch_argv(recipes, dest, source), env, trace))
            if git(base / f"run-B-{i}", "rev-parse", "HEAD^{tree}") != hand_tree(base / f"run-A-{i}"):
                raise SystemExit(f"run {i}: the two pipelines produced different trees")
            for which in ("A", "B"):
                shutil.rmtree(base / f"run-{which}-{i}")
        label = f"tree {args.tree} @ {commit[:12]}" if args.tree else f"generated tree ({args.files} files)"
        summarise(label, a_times, b_times)
        if args.breakdown:
            print("\nbreakdown of one more run of each (the checkout is the same work in both):")
            breakdown("hand", ["bash", "-c", hand_command(store, commit, base / "bd-A", patch, globs, args.pattern,
                                                          args.replace)], env, base / "trace-A.json")
            breakdown("lgpatch", lgpatch_argv(recipes, base / "bd-B", source), env, base / "trace-B.json")
        if args.profile:
            profile_once(recipes, base, source, env, 25)
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
