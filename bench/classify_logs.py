"""The logs bench/classify_bench.py times: a passing build (quiet), a failing one (error-dense), a quiet one with a
long CMake tail, and one of 10 MB lines. Deterministic (seeded), so that every run times the same bytes."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
            block += _quiet_lines(rnd, step, total, early=written < size * 0.995)
        text = "\n".join(block) + "\n"
        out.write(text)
        written += len(text.encode())
        lines += len(block)
    return lines


def _quiet_lines(rnd: random.Random, step: int, total: int, early: bool) -> list[str]:
    """The line(s) of one step of a passing build; `early`: not yet in the last half percent of the log."""
    block: list[str] = []
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
    elif r < 0.995 or early:
        block.append(
            f"/usr/bin/c++ -DUSE_CUDA -I/src/pytorch/aten/src -O2 -Wall -Werror=return-type "
            f"-Wno-error=deprecated-declarations -c /src/pytorch/{d}/{n}.cpp -o {n}.cpp.o"
        )
    else:
        # a failing build fails at its end: the errors are in the last half percent of the log
        block.append(rnd.choice(ERRORS))
    return block


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

    def line(number: int) -> str:
        d, n = rnd.choice(DIRS), rnd.choice(NAMES)
        if number % 5 == 0:
            return rnd.choice(DENSE_ERRORS).format(
                p=f"/src/pytorch/{d}/{n}.cpp", l=rnd.randint(1, 900), c=rnd.randint(1, 60), i=number, n=n)
        return f"[{number}/99999] Building CXX object torch_cpu.dir/__/{d}/{n}.cpp.o"

    return _write_lines(path, size, line)


def _write_lines(path: Path, size: int, line: Callable[[int], str]) -> int:
    """Write line(1), line(2), ... in blocks of 100 until the file holds `size` bytes; returns the lines written."""
    written = lines = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        while written < size:
            block = []
            for _ in range(100):
                lines += 1
                block.append(line(lines))
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


# a failing build that names what it fails on: the error wordings of gcc, clang, nvcc and ld, their identifiers and
# paths made of letters, so that (unlike DENSE_ERRORS, which vary only digits) nearly every error line is a new raw
# shape, a new folded shape and a new path: the classifier's caches learn and never hit
WORD_ERRORS = [
    "{p}:{l}:{c}: error: '{a}' was not declared in this scope",
    "{p}:{l}:{c}: error: '{k}' has no member named '{a}'",
    "{p}:{l}:{c}: error: use of undeclared identifier '{a}'",
    "{p}:{l}:{c}: error: no member named '{a}' in namespace '{b}'",
    "{p}:{l}:{c}: error: no matching function for call to '{a}({b}*, float)'",
    "{p}:{l}:{c}: fatal error: {a}/{b}.h: No such file or directory",
    '{p}({l}): error: identifier "{a}" is undefined',
    "/usr/bin/ld: {a}.o: in function `{b}': undefined reference to `{k}'",
]
_SUFFIXES = [".cpp", ".cu", ".h", ".cuh", ".cc"]


def _word(rnd: random.Random) -> str:
    return "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz_", k=rnd.randint(4, 12))).strip("_") or "w"


def generate_dense_words(path: Path, size: int, seed: int = 5) -> int:
    """A failing build like generate_dense's, its errors naming distinct lowercase identifiers and paths (WORD_ERRORS):
    one line in five an error, the rest progress lines of the same paths."""
    rnd = random.Random(seed)

    def line(number: int) -> str:
        dirs = "/".join(_word(rnd) for _ in range(rnd.randint(1, 3)))
        p = f"{dirs}/{_word(rnd)}{rnd.choice(_SUFFIXES)}"
        if number % 5 == 0:
            return rnd.choice(WORD_ERRORS).format(
                p=f"/src/{p}", l=rnd.randint(1, 900), c=rnd.randint(1, 60), a=_word(rnd), b=_word(rnd),
                k="class " + _word(rnd).capitalize())
        return f"[{number}/99999] Building CXX object torch_cpu.dir/{p}.o"

    return _write_lines(path, size, line)


def generate_dense_split(path: Path, size: int, distinct: str, seed: int = 6) -> int:
    """The words log's two kinds of newness apart: `distinct="names"`, its errors in 140 files (20 directories, 7
    names) naming distinct identifiers (a failing build's usual shape: every head known, every message new);
    `distinct="paths"`, in distinct paths naming four identifiers (every head new, the messages few)."""
    rnd = random.Random(seed)
    names = [_word(rnd) for _ in range(4)]

    def line(number: int) -> str:
        if distinct == "names":
            p = f"mod{number % 20}/part{number % 7}{_SUFFIXES[number % 5]}"
            a, b = _word(rnd), _word(rnd)
        else:
            dirs = "/".join(_word(rnd) for _ in range(rnd.randint(1, 3)))
            p = f"{dirs}/{_word(rnd)}{rnd.choice(_SUFFIXES)}"
            a, b = names[number % 4], names[number % 3]
        if number % 5 == 0:
            return rnd.choice(WORD_ERRORS).format(p=f"/src/{p}", l=rnd.randint(1, 900), c=rnd.randint(1, 60), a=a,
                                                  b=b, k="class " + b.capitalize())
        return f"[{number}/99999] Building CXX object torch_cpu.dir/{p}.o"

    return _write_lines(path, size, line)
