#!/usr/bin/env python3
"""Classifier throughput and memory on quiet, error-dense (two kinds) and CMake-tailed logs, against grep.

    python bench/classify_bench.py                      # 200 MB logs, 1 GB for peak RSS
    python bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 3
    python bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 5 --against DIR   # DIR: an export of main
    python bench/classify_bench.py --equal-against DIR  # the --json of both checkouts compared, no timing

1. Generates three logs of --size-mb: *quiet* (a build that passes: ninja/CMake/gcc/nvcc/setuptools/pytest lines,
   CI timestamp and BuildKit prefixes, innocent mentions of "error", a few real errors at the end), *error-dense*
   (a failing build: one line in five a distinct compiler/linker/nvcc error) and *cmake-tail* (the quiet log whose
   tail has ~3,000 CMake `-- Looking for X - not found` lines) and *error-dense-words* (error-dense's rate, its
   errors naming distinct lowercase identifiers and paths: nearly every error line a new shape), with its two kinds
   of newness apart: *error-dense-names* (distinct identifiers in 140 files) and *error-dense-paths* (distinct
   paths, four identifiers).
2. For each log, alternately (A/B/C, --repeat rounds, so a busy moment of the shared machine hits all alike):
   `lgpatch classify LOG --json` as a process (start-up included: what a user gets), the classifier in-process,
   and `grep -cE` with the same literal prefilters (the classifier's triggers), all from the page cache. Prints
   min/median/max seconds and MB/s of each, the process/grep ratio (median of the rounds' ratios), and the
   error-dense/quiet ratio of the process times. `--against DIR` times DIR's CLI too, in the same rounds (a
   before/after in one run: single runs of this shared machine spread by 20-30%).
3. Peak RSS of `lgpatch classify` as a process on a --big-mb log and on a log of 10 MB single lines.
4. Start-up: the CLI on a two-line log, with the rule cache empty (a first run) and filled (every later run).

The package's bytecode is compiled first (`compileall`, as `pip install` does; --no-compile leaves a checkout's
sources to be compiled at every start, as under PYTHONDONTWRITEBYTECODE), and each log is classified once untimed
(the rule cache filled, the page cache warm).

Stands alone: stdlib plus the legacy_gpu_patch package of this checkout. Goals (issue 12): quiet >= 150 MB/s and
<= 2.5x grep as a process; error-dense <= 3x quiet; peak RSS < 200 MB on 1 GB.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _classify_equal import equal_against  # noqa: E402 - after the path set-up
from classify_logs import (  # noqa: E402 - after the path set-up; re-exported for the tests
    DENSE_ERRORS,
    DIRS,
    ERRORS,
    NAMES,
    generate,
    generate_cmake_tail,
    generate_dense,
    generate_dense_split,
    generate_dense_words,
    long_lines,
    rnd_name,
)

__all__ = ["DENSE_ERRORS", "DIRS", "ERRORS", "NAMES", "generate", "generate_cmake_tail", "generate_dense",
           "generate_dense_split", "generate_dense_words", "long_lines", "main", "rnd_name"]

def triggers() -> list[str]:
    from legacy_gpu_patch.classify.classifier import load_rules

    return [t.decode() for t in load_rules().triggers]


def warm(path: Path) -> None:
    with open(path, "rb") as fh:  # the page cache, for every contender
        while fh.read(1 << 24):
            pass


def _child(argv: list[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> tuple[float, float]:
    """(wall, CPU) seconds of a child process; CPU (user + system) is what a busy shared machine distorts least."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # stdout to a pipe, not /dev/null: GNU grep stops at the first match when its output is /dev/null
    subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def time_process(path: Path, grep: bool = True, checkout: Path | None = None) -> tuple[float, float]:
    """`lgpatch classify LOG --json | ...` in a fresh interpreter (start-up included; the CPU time of the grep
    processes that search for triggers included too); `grep=False`: with the search in Python only. `checkout`:
    the package of another checkout (run from its root, so that it is the one imported), with a rule cache of its
    own beside the log (two versions sharing one would rewrite it at every run)."""
    env = None if grep else {**os.environ, "LGPATCH_CLASSIFY_GREP": "0"}
    argv = [sys.executable, "-m", "legacy_gpu_patch", "classify", str(path), "--json"]
    if checkout is None:
        return _child(argv, env=env)
    env = {**(env or os.environ), "LGPATCH_CACHE": str(path.parent / "against-cache")}
    return _child(argv, env=env, cwd=checkout)


def startup(work: Path) -> str:
    """CPU seconds of the CLI on a two-line log: rule cache empty (first run), then filled (median of 3)."""
    log = work / "two-lines.log"
    log.write_text("[1/2] Building CXX object a.o\n/src/a.cpp:3:1: error: 'uint8_t' was not declared in this scope\n")
    env = {**os.environ, "LGPATCH_CACHE": str(work / "cold-cache")}
    cold = _child([sys.executable, "-m", "legacy_gpu_patch", "classify", str(log), "--json"], env=env)[1]
    warm = [_child([sys.executable, "-m", "legacy_gpu_patch", "classify", str(log), "--json"], env=env)[1]
            for _ in range(3)]
    return (f"start-up (a two-line log, CPU): {cold:.3f} s with the rule cache empty, "
            f"{statistics.median(warm):.3f} s filled")


def compile_bytecode(compile: bool) -> str:
    """Bytecode as `pip install` leaves it (compiled ahead), or none: every start compiles the sources."""
    if not compile:
        for cache in (REPO / "legacy_gpu_patch").rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # for the children: none written meanwhile
        return "none, sources compiled at each start (--no-compile)"
    import compileall

    ok = compileall.compile_dir(str(REPO / "legacy_gpu_patch"), quiet=1)
    return "compiled ahead (as pip install does)" if ok else "compile failed: sources compiled at each start"


def time_in_process(path: Path) -> float:
    from legacy_gpu_patch.classify.classifier import Classifier, classify_stream

    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        classify_stream(fh, Classifier())
    return time.perf_counter() - t0


def time_grep(path: Path, pats: list[str]) -> tuple[float, float] | None:
    grep = shutil.which("grep")
    if grep is None:
        return None
    pattern = "|".join(re.escape(p) for p in pats)
    return _child([grep, "-cE", pattern, str(path)], env={**os.environ, "LC_ALL": "C"})


def spread(xs: list[float]) -> str:
    return f"min {min(xs):.3f} / median {statistics.median(xs):.3f} / max {max(xs):.3f} s"


def bench_log(name: str, path: Path, repeat: int, pats: list[str], python_search: bool = False,
              against: Path | None = None) -> tuple[float, float | None]:
    """Prints one log's figures; returns the median process CPU time, and that of the `against` checkout."""
    from legacy_gpu_patch.classify.classifier import load_rules

    load_rules()
    warm(path)
    time_process(path)  # untimed: the rule cache filled (a user's first run fills it)
    if against is not None:
        time_process(path, checkout=against)
    size = path.stat().st_size / 1e6
    proc: list[tuple[float, float]] = []
    inproc: list[float] = []
    greps: list[tuple[float, float]] = []
    pure: list[tuple[float, float]] = []
    other: list[float] = []
    for _ in range(repeat):  # alternated: a busy moment of the machine hits all three alike
        proc.append(time_process(path))
        if against is not None:
            other.append(time_process(path, checkout=against)[1])
        if python_search:
            pure.append(time_process(path, grep=False))
        inproc.append(time_in_process(path))
        g = time_grep(path, pats)
        if g is not None:
            greps.append(g)
    wall, cpu = [p[0] for p in proc], [p[1] for p in proc]
    print(f"{name} ({size:.0f} MB):")
    print(f"  lgpatch classify (process): wall {spread(wall)}; CPU {spread(cpu)} = "
          f"{size / statistics.median(cpu):.0f} MB/s of CPU")
    if pure:
        pcpu = [p[1] for p in pure]
        print(f"  same, LGPATCH_CLASSIFY_GREP=0:  wall {spread([p[0] for p in pure])}; CPU {spread(pcpu)} = "
              f"{size / statistics.median(pcpu):.0f} MB/s of CPU")
    print(f"  classifier in-process:      wall {spread(inproc)} = {size / statistics.median(inproc):.0f} MB/s")
    if greps:
        gwall, gcpu = [g[0] for g in greps], [g[1] for g in greps]
        ratios = [p / max(g, 1e-3) for p, g in zip(cpu, gcpu)]
        print(f"  grep -cE ({len(pats)} literals):     wall {spread(gwall)}; CPU {spread(gcpu)}")
        print(f"  process/grep, CPU: {statistics.median(ratios):.2f}x median of {len(ratios)} rounds "
              f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
    if other:
        ratios = [p / max(o, 1e-3) for p, o in zip(cpu, other)]
        print(f"  --against {against} (process): CPU {spread(other)}; this/against "
              f"{statistics.median(ratios):.2f}x median of the rounds")
    return statistics.median(cpu), statistics.median(other) if other else None


_RSS_PROBE = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def peak_rss(path: Path) -> float:
    """Peak RSS in MiB of `lgpatch classify LOG --json` as a process, its own alone: a fresh parent runs it (the
    children's ru_maxrss of this process would be the largest child so far, an error-dense run's)."""
    out = subprocess.run([sys.executable, "-c", _RSS_PROBE, sys.executable, "-m", "legacy_gpu_patch", "classify",
                          str(path), "--json"], capture_output=True, text=True, cwd=REPO).stdout
    return int(out.split()[-1]) / 1024.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--big-mb", type=int, default=1024, help="log for the peak-RSS run (0 skips it)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of each contender, alternated")
    ap.add_argument("--no-compile", action="store_true",
                    help="no bytecode: remove the package's __pycache__ and compile sources at every start")
    ap.add_argument("--against", type=Path, default=None, metavar="CHECKOUT",
                    help="also time another checkout's CLI (e.g. an export of main) in the same rounds")
    ap.add_argument("--python-search", action="store_true",
                    help="also time the process with the trigger search in Python only (LGPATCH_CLASSIFY_GREP=0)")
    ap.add_argument("--equal-against", type=Path, default=None, metavar="CHECKOUT",
                    help="no timing: compare `classify --json` with CHECKOUT's on the log fixtures and generated "
                         "logs of --size-mb (default 10 here); exit 1 if any differs")
    args = ap.parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="lgpatch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.equal_against is not None:
        try:
            size_mb = args.size_mb if "--size-mb" in (argv if argv is not None else sys.argv) else 10
            return 1 if equal_against(args.equal_against.resolve(), work, size_mb) else 0
        finally:
            if args.dir is None:
                shutil.rmtree(work, ignore_errors=True)
    size = args.size_mb << 20
    from legacy_gpu_patch.classify.grepscan import gnu_grep

    bytecode = compile_bytecode(not args.no_compile)
    if args.against is not None and not args.no_compile:
        import compileall

        compileall.compile_dir(str(args.against / "legacy_gpu_patch"), quiet=1)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}; "
          f"trigger search: {'GNU grep ' + str(gnu_grep()) if gnu_grep() else 'Python'}; bytecode: {bytecode}")
    try:
        print(startup(work))
        pats = triggers()
        logs = {"quiet": work / "quiet.log", "error-dense": work / "dense.log", "cmake-tail": work / "cmake-tail.log",
                "error-dense-words": work / "dense-words.log", "error-dense-names": work / "dense-names.log",
                "error-dense-paths": work / "dense-paths.log"}
        generate(logs["quiet"], size)
        generate_dense(logs["error-dense"], size)
        generate_cmake_tail(logs["cmake-tail"], size)
        generate_dense_words(logs["error-dense-words"], size)
        generate_dense_split(logs["error-dense-names"], size, "names")
        generate_dense_split(logs["error-dense-paths"], size, "paths")
        medians = {name: bench_log(name, path, args.repeat, pats, args.python_search, args.against)
                   for name, path in logs.items()}
        dense, quiet = medians["error-dense"], medians["quiet"]
        print(f"error-dense / quiet (process CPU, medians): {dense[0] / quiet[0]:.2f}x; "
              f"load now {os.getloadavg()[0]:.2f}")
        if dense[1] is not None and quiet[1] is not None:
            print(f"  --against: {dense[1] / quiet[1]:.2f}x")
        # distinct identifiers and paths (the caches learn and never hit), then each kind of newness alone
        for name in ("error-dense-words", "error-dense-names", "error-dense-paths"):
            times = medians[name]
            print(f"{name} / quiet (process CPU, medians): {times[0] / quiet[0]:.2f}x")
            if times[1] is not None and quiet[1] is not None:
                print(f"  --against: {times[1] / quiet[1]:.2f}x")
        if args.big_mb:
            big = work / "big.log"
            generate(big, args.big_mb << 20, seed=2)
            print(f"peak RSS on a {big.stat().st_size / 1e9:.2f} GB quiet log: {peak_rss(big):.1f} MiB")
            big.unlink()
        ll = work / "long-lines.log"
        long_lines(ll)
        print(f"peak RSS on 20 lines of 10 MB each: {peak_rss(ll):.1f} MiB")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
