#!/usr/bin/env python3
"""Classifier throughput and memory on a quiet, an error-dense and a CMake-tailed log, against grep, as a user runs it.

    python bench/classify_bench.py                      # 200 MB logs, 1 GB for peak RSS
    python bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 3

1. Generates three logs of --size-mb: *quiet* (a build that passes: ninja/CMake/gcc/nvcc/setuptools/pytest lines,
   CI timestamp and BuildKit prefixes, innocent mentions of "error", a few real errors at the end), *error-dense*
   (a failing build: one line in five a distinct compiler/linker/nvcc error) and *cmake-tail* (the quiet log whose
   tail has ~3,000 CMake `-- Looking for X - not found` lines).
2. For each log, alternately (A/B/C, --repeat rounds, so a busy moment of the shared machine hits all alike):
   `lgpatch classify LOG --json` as a process (start-up included: what a user gets), the classifier in-process,
   and `grep -cE` with the same literal prefilters (the classifier's triggers), all from the page cache. Prints
   min/median/max seconds and MB/s of each, the process/grep ratio (median of the rounds' ratios), and the
   error-dense/quiet ratio of the process times.
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
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

_PARTS = [
    "Activation",
    "BatchLinearAlgebra",
    "Binary",
    "Copy",
    "Distribution",
    "Embedding",
    "Indexing",
    "Loss",
    "Normalization",
    "Pooling",
    "Reduce",
    "Sorting",
    "Spectral",
    "TensorCompare",
    "Unary",
    "Unique",
    "UpSample",
    "Scatter",
    "Gather",
    "Segment",
    "WeightNorm",
    "RNN",
    "Dropout",
    "Conv",
    "Linear",
    "Pad",
    "Cumsum",
    "Histogram",
    "Lerp",
    "Im2Col",
    "Fill",
    "Range",
    "Resize",
    "Shape",
    "Softmax",
    "Sum",
]
_KINDS = ["Ops", "Kernel", "Impl", "Utils", "", "Cuda", "Backward", "Functions"]
# about 150 translation-unit names; one in ~150 has "Error" in it, as in a real tree (ErrorHandling, error_report)
NAMES = [*sorted({p + k for p in _PARTS for k in _KINDS})[:148], "ErrorHandling", "SparseCUDABlas"]
DIRS = [
    "aten/src/ATen/native",
    "aten/src/ATen/native/cuda",
    "caffe2/operators",
    "c10/cuda",
    "c10/util",
    "torch/csrc/jit/runtime",
    "torch/csrc/autograd",
    "aten/src/ATen/native/sparse/cuda",
]
WARNINGS = [
    "'{n}' is deprecated [-Wdeprecated-declarations]",
    "unused variable 'tmp{i}' [-Wunused-variable]",
    "comparison of integer expressions of different signedness: 'int' and 'size_t' [-Wsign-compare]",
    "'{n}::run' overrides a member function but is not marked 'override' [-Winconsistent-missing-override]",
    "ignoring return value of 'int posix_memalign(void**, size_t, size_t)' [-Wunused-result]",
]
ERRORS = [
    '/src/pytorch/aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu(104): error: identifier "cusparseScsrmm2" '
    "is undefined",
    "/src/pytorch/caffe2/utils/GpuDefs.cuh:14:2: error: #error Unknown __CUDA_ARCH__; please define parameters for "
    "compute capability",
    "/src/pytorch/c10/util/Half.h:462:5: error: 'uint8_t' was not declared in this scope",
    "c++: fatal error: Killed signal terminated program cc1plus",
    "make[2]: *** [caffe2/CMakeFiles/torch_cuda.dir/build.make:1234: x.cu.o] Error 1",
]


def generate(path: Path, size: int, seed: int = 1) -> int:
    """Write a realistic log of about `size` bytes; returns the number of lines."""
    rnd = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        return _write(out, size, rnd)


def _write(out: Any, size: int, rnd: random.Random) -> int:
    written = lines = 0
    step = 0
    total = 4821
    while written < size:
        block: list[str] = []
        for _ in range(200):
            step += 1
            r = rnd.random()
            d, n = rnd.choice(DIRS), rnd.choice(NAMES)
            if r < 0.50:
                block.append(
                    f"[{step % total}/{total}] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/{d}/{n}.cpp.o"
                )
            elif r < 0.60:
                block.append(
                    f"[{step % total}/{total}] Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/__/{d}/{n}.cu.o"
                )
            elif r < 0.72:
                w = rnd.choice(WARNINGS).format(n=n, i=step)
                line = rnd.randint(10, 900)
                block += [
                    f"In file included from /src/pytorch/{d}/{n}.cpp:{line}:",
                    f"/src/pytorch/{d}/{n}.h:{line}:{rnd.randint(1, 60)}: warning: {w}",
                    f"  {line} |     auto tmp{step} = at::empty({{n, m}}, options);",
                    "      |          ^~~~",
                ]
            elif r < 0.78:
                block += [
                    f'/src/pytorch/{d}/{n}.cu({rnd.randint(10, 900)}): warning #177-D: variable "v{step}" '
                    "was declared but never referenced",
                    f"      float v{step} = 0.0f;",
                    "            ^",
                    "",
                    'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"',
                ]
            elif r < 0.82:
                block.append(f"-- Looking for {n.lower()}_{step % 97} - found")
            elif r < 0.88:
                block.append(
                    f"copying build/lib.linux-x86_64-cpython-311/torch/{d.split('/')[-1]}/{n}.py -> "
                    "build/bdist.linux-x86_64/wheel/torch"
                )
            elif r < 0.92:
                block.append(
                    f"tests/test_{n.lower()}.py::test_{n.lower()}_{step % 50} PASSED{' ' * 20}[{step % 100:3d}%]"
                )
            elif r < 0.95:
                block.append(
                    f"2024-05-01T12:{step % 60:02d}:{step % 60:02d}.1234567Z [{step % total}/{total}] "
                    f"Linking CXX shared library lib/libtorch_{n.lower()}.so"
                )
            elif r < 0.985:
                block.append(f"#16 {step / 100:.2f} Processing /src/pytorch/{d}/{n}.cpp")
            elif r < 0.995 or written < size * 0.995:
                block.append(
                    f"/usr/bin/c++ -DUSE_CUDA -I/src/pytorch/aten/src -O2 -Wall -Werror=return-type "
                    f"-Wno-error=deprecated-declarations -c /src/pytorch/{d}/{n}.cpp -o {n}.cpp.o"
                )
            else:
                # a failing build fails at its end: the errors are in the last half percent of the log
                block.append(rnd.choice(ERRORS))
        text = "\n".join(block) + "\n"
        out.write(text)
        written += len(text.encode())
        lines += len(block)
    return lines


DENSE_ERRORS = [
    "{p}:{l}:{c}: error: 'sym{i}' was not declared in this scope",
    '{p}({l}): error: identifier "cusparseScsrmm{i}" is undefined',
    "{p}:{l}:{c}: error: no member named 'fn{i}' in namespace 'at'",
    "{p}:{l}:{c}: error: no matching function for call to 'launch{i}(double*, float)'",
    "/usr/bin/ld: {n}.o: in function `f{i}': undefined reference to `sym{i}'",
    "nvcc fatal   : Unsupported gpu architecture 'compute_{i}'",
]


def generate_dense(path: Path, size: int, seed: int = 3) -> int:
    """A failing build: one line in five a distinct error (compiler, linker, nvcc), the rest progress lines."""
    rnd = random.Random(seed)
    written = lines = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        while written < size:
            block = []
            for _ in range(100):
                lines += 1
                d, n = rnd.choice(DIRS), rnd.choice(NAMES)
                if lines % 5 == 0:
                    block.append(rnd.choice(DENSE_ERRORS).format(
                        p=f"/src/pytorch/{d}/{n}.cpp", l=rnd.randint(1, 900), c=rnd.randint(1, 60), i=lines, n=n))
                else:
                    block.append(f"[{lines}/99999] Building CXX object torch_cpu.dir/__/{d}/{n}.cpp.o")
            text = "\n".join(block) + "\n"
            out.write(text)
            written += len(text.encode())
    return lines


def generate_cmake_tail(path: Path, size: int, tail_lines: int = 3000) -> int:
    """The quiet log of `size`, its last ~3,000 lines CMake's `-- Looking for X - not found` status lines."""
    tail = "".join(f"-- Looking for {rnd_name(i)} - not found\n" for i in range(tail_lines))
    lines = generate(path, size - len(tail))
    with open(path, "a", encoding="utf-8") as out:
        out.write(tail)
    return lines + tail_lines


def rnd_name(i: int) -> str:
    return f"{NAMES[i % len(NAMES)].lower()}_{i}_h"


def triggers() -> list[str]:
    from legacy_gpu_patch.classify.classifier import load_rules

    return [t.decode() for t in load_rules().triggers]


def warm(path: Path) -> None:
    with open(path, "rb") as fh:  # the page cache, for every contender
        while fh.read(1 << 24):
            pass


def _child(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of a child process; CPU (user + system) is what a busy shared machine distorts least."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # stdout to a pipe, not /dev/null: GNU grep stops at the first match when its output is /dev/null
    subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def time_process(path: Path, grep: bool = True) -> tuple[float, float]:
    """`lgpatch classify LOG --json | ...` in a fresh interpreter (start-up included; the CPU time of the grep
    processes that search for triggers included too); `grep=False`: with the search in Python only."""
    env = None if grep else {**os.environ, "LGPATCH_CLASSIFY_GREP": "0"}
    return _child([sys.executable, "-m", "legacy_gpu_patch", "classify", str(path), "--json"], env=env)


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


def bench_log(name: str, path: Path, repeat: int, pats: list[str], python_search: bool = False) -> float:
    """Prints one log's figures; returns the median process CPU time."""
    from legacy_gpu_patch.classify.classifier import load_rules

    load_rules()
    warm(path)
    time_process(path)  # untimed: the rule cache filled (a user's first run fills it)
    size = path.stat().st_size / 1e6
    proc: list[tuple[float, float]] = []
    inproc: list[float] = []
    greps: list[tuple[float, float]] = []
    pure: list[tuple[float, float]] = []
    for _ in range(repeat):  # alternated: a busy moment of the machine hits all three alike
        proc.append(time_process(path))
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
    return statistics.median(cpu)


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


def long_lines(path: Path, count: int = 20, length: int = 10 << 20) -> None:
    rnd = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 -=/._"
    chunk = "".join(rnd.choice(alphabet) for _ in range(1 << 16))
    with open(path, "w", encoding="ascii") as fh:
        for i in range(count):
            body = (chunk * (length // len(chunk) + 1))[:length]
            if i % 4 == 0:
                body = "/src/x.cpp:1:1: error: 'uint8_t' was not declared in this scope " + body
            fh.write(body + "\n")
            fh.write("[1/2] Building CXX object x.o\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--big-mb", type=int, default=1024, help="log for the peak-RSS run (0 skips it)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of each contender, alternated")
    ap.add_argument("--no-compile", action="store_true",
                    help="no bytecode: remove the package's __pycache__ and compile sources at every start")
    ap.add_argument("--python-search", action="store_true",
                    help="also time the process with the trigger search in Python only (LGPATCH_CLASSIFY_GREP=0)")
    args = ap.parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="lgpatch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    size = args.size_mb << 20
    from legacy_gpu_patch.classify.grepscan import gnu_grep

    bytecode = compile_bytecode(not args.no_compile)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}; "
          f"trigger search: {'GNU grep ' + str(gnu_grep()) if gnu_grep() else 'Python'}; bytecode: {bytecode}")
    try:
        print(startup(work))
        pats = triggers()
        logs = {"quiet": work / "quiet.log", "error-dense": work / "dense.log", "cmake-tail": work / "cmake-tail.log"}
        generate(logs["quiet"], size)
        generate_dense(logs["error-dense"], size)
        generate_cmake_tail(logs["cmake-tail"], size)
        medians = {name: bench_log(name, path, args.repeat, pats, args.python_search) for name, path in logs.items()}
        print(f"error-dense / quiet (process CPU, medians): {medians['error-dense'] / medians['quiet']:.2f}x; "
              f"load now {os.getloadavg()[0]:.2f}")
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
