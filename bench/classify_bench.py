#!/usr/bin/env python3
"""Classifier throughput and memory, against grep on the same input.

    python bench/classify_bench.py                 # 200 MB log; 1 GB log and 10 MB lines for peak RSS
    python bench/classify_bench.py --size-mb 50 --big-mb 0

1. Generates a realistic build log of --size-mb: ninja/CMake/gcc/nvcc/setuptools/pytest lines, CI timestamp and
   BuildKit prefixes, innocent mentions of "error" (ErrorHandling.cpp, -Werror=...), and real errors in the last
   half percent (a failing build fails at its end); about 85 bytes a line.
2. Times lgpatch's classifier on it (MB/s), and `grep -cE` with the same literal prefilters (the classifier's
   triggers), both reading the file from the page cache; prints both and the ratio. The runs alternate (classifier,
   grep, classifier, ...) and the best of each counts, so a busy moment of a shared machine hits both alike; the
   median ratio of the back-to-back pairs and the CPU-time ratio (user + system time of each) are printed too.
3. Runs the classifier in a fresh process on a --big-mb log and on a log of 10 MB single lines and reports the
   peak RSS of each (the classifier reads in 1 MiB chunks, so memory must not grow with the log).

Stands alone: stdlib plus the legacy_gpu_patch package of this checkout. Goal: >= 100 MB/s, <= 3x grep.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
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


def triggers() -> list[str]:
    from legacy_gpu_patch.classify.classifier import load_rules

    rules = load_rules()
    return [t.decode() for t in rules.triggers]


def warm(path: Path) -> None:
    with open(path, "rb") as fh:  # the page cache, for both contenders
        while fh.read(1 << 24):
            pass


def time_classifier(path: Path) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, findings, lines) of classifying `path` the way `lgpatch classify` reads it."""
    from legacy_gpu_patch.classify.classifier import Classifier, classify_stream, load_rules

    load_rules()
    warm(path)
    c0, t0 = time.process_time(), time.perf_counter()
    with open(path, "rb") as fh:
        c = classify_stream(fh, Classifier())
    return time.perf_counter() - t0, time.process_time() - c0, len(c.findings()), c.lines


def time_grep(path: Path, pats: list[str]) -> tuple[float, float, int] | None:
    """(wall seconds, CPU seconds, matching lines) of `grep -cE` with the same literal prefilters."""
    grep = shutil.which("grep")
    if grep is None:
        return None
    pattern = "|".join(re.escape(p) for p in pats)
    env = {**os.environ, "LC_ALL": "C"}
    warm(path)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([grep, "-cE", pattern, str(path)], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return elapsed, cpu, int(proc.stdout.strip() or 0)


_RSS_CHILD = """
import sys, resource
sys.path.insert(0, {repo!r})
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
with open({path!r}, 'rb') as fh:
    c = classify_stream(fh, Classifier())
print(len(c.findings()), c.lines, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss(path: Path) -> tuple[int, int, float]:
    """(findings, lines, peak RSS in MiB) of classifying `path` in a fresh interpreter."""
    code = _RSS_CHILD.format(repo=str(REPO), path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1]), int(out[2]) / 1024.0


def baseline_rss() -> float:
    code = (
        f"import sys, resource; sys.path.insert(0, {str(REPO)!r}); import legacy_gpu_patch.classify.classifier as c; "
        "c.load_rules(); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout) / 1024.0


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
    ap.add_argument("--repeat", type=int, default=7, help="timing runs of each, alternated (best is reported)")
    args = ap.parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="lgpatch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        log = work / "build.log"
        lines = generate(log, args.size_mb << 20)
        size = log.stat().st_size
        print(f"log: {size / 1e6:.1f} MB, {lines} lines, {size / lines:.0f} bytes/line ({log})")
        pats = triggers()
        runs, greps = [], []
        for _ in range(args.repeat):  # alternated: a busy moment of the machine hits both alike
            runs.append(time_classifier(log))
            greps.append(time_grep(log, pats))
        best, cbest = min(r[0] for r in runs), min(r[1] for r in runs)
        nfind, nlines = runs[0][2], runs[0][3]
        print(
            f"lgpatch classifier: {best:.3f} s  = {size / 1e6 / best:.1f} MB/s  ({nfind} findings, {nlines} lines; "
            f"best of {args.repeat})"
        )
        if greps[0] is None:
            print("grep: not found")
        else:
            g = [x for x in greps if x is not None]
            gbest, gcpu = min(x[0] for x in g), min(x[1] for x in g)
            pairs = sorted(r[0] / x[0] for r, x in zip(runs, g))
            print(
                f"grep -cE ({len(pats)} literal prefilters, LC_ALL=C): {gbest:.3f} s = {size / 1e6 / gbest:.1f} MB/s "
                f"({g[0][2]} matching lines; best of {len(g)})"
            )
            print(
                f"ratio lgpatch/grep: {best / gbest:.2f}x best to best, {pairs[len(pairs) // 2]:.2f}x median of "
                f"{len(pairs)} back-to-back pairs, CPU time {cbest / max(gcpu, 1e-9):.2f}x (goal <= 3x)"
            )
        print(f"peak RSS of an interpreter with the rules loaded: {baseline_rss():.1f} MiB")
        f, n, rss = peak_rss(log)
        print(f"peak RSS on the {size / 1e6:.0f} MB log: {rss:.1f} MiB")
        if args.big_mb:
            big = work / "big.log"
            generate(big, args.big_mb << 20, seed=2)
            f, n, rss = peak_rss(big)
            print(f"peak RSS on a {big.stat().st_size / 1e9:.2f} GB log: {rss:.1f} MiB ({n} lines, {f} findings)")
            big.unlink()
        ll = work / "long-lines.log"
        long_lines(ll)
        f, n, rss = peak_rss(ll)
        print(f"peak RSS on 20 lines of 10 MB each: {rss:.1f} MiB ({f} findings; expected 1)")
        bad = work / "invalid-utf8.log"
        bad.write_bytes(
            b"\xff\xfe\x80 broken \xc3\x28 utf8\n" * 1000 + b"x.cpp:1:1: error: \xff\xfe 'uint8_t' was not "
            b"declared in this scope\n"
        )
        f, n, rss = peak_rss(bad)
        print(f"invalid UTF-8: {n} lines classified, {f} finding(s), no crash")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
