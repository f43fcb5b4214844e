"""The smoke test of a built wheel: installed the normal way into a fresh virtual environment, imported, and a tiny
operation run on the CPU — and on the GPU where one is present (cibuildwheel's test-command idea).

What "a tiny operation" is depends on the framework, so the known recipes have theirs here; any other wheel gets its
top-level packages imported, and `--smoke-code` replaces the CPU check with the user's own Python code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SmokeSpec:
    imports: tuple[str, ...]  # empty: the wheel's top-level packages
    cpu: str = ""  # Python code run after the imports
    gpu: str = ""
    # Set when the machine has no NVIDIA driver ({work} is the work tree): Chainer's CuPy links libcuda.so.1.
    env_without_gpu: tuple[tuple[str, str], ...] = ()


_CHAINER_CPU = """
import numpy, chainer, chainer.functions as F
x = chainer.Variable(numpy.arange(-2, 4, dtype=numpy.float32).reshape(2, 3))
y = F.sum(F.relu(x) * 2)
y.backward()
assert float(y.data) == 12.0, y.data
assert x.grad is not None and x.grad.tolist() == [[0, 0, 0], [2, 2, 2]], x.grad
print("cpu ok: relu/sum forward and backward")
"""
_CHAINER_GPU = """
import cupy
a = cupy.arange(6, dtype=cupy.float32)
assert float((a * 2).sum()) == 30.0
print("gpu ok:", cupy.cuda.runtime.getDeviceCount(), "device(s)")
"""
_TORCH_CPU = """
import torch
assert float(torch.ones(2, 3).sum()) == 6.0
print("cpu ok")
"""
_TORCH_GPU = """
import torch
assert torch.cuda.is_available()
assert float(torch.ones(2, 3, device="cuda").sum()) == 6.0
print("gpu ok:", torch.cuda.get_device_name(0))
"""

BUILTIN: dict[str, SmokeSpec] = {
    "chainer-1.24": SmokeSpec(("chainer", "cupy"), _CHAINER_CPU, _CHAINER_GPU,
                              (("LD_LIBRARY_PATH", "{work}/build/lgpatch/driver-stub"),)),
    "pytorch-1.5.0-lms+cuda11": SmokeSpec(("torch",), _TORCH_CPU, _TORCH_GPU),
}


@dataclass
class SmokeCase:
    name: str  # install | cpu | gpu
    status: str  # passed | failed | skipped
    duration: float = 0.0
    detail: str = ""  # the reason it was skipped, or the output's tail
    code: str = ""  # the Python code it ran (to reproduce a failure)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "duration_s": round(self.duration, 3),
                "detail": self.detail, "code": self.code}


@dataclass
class SmokeResult:
    venv: str
    gpu: str  # what nvidia-smi said, or why there is no GPU
    cases: list[SmokeCase] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != "failed" for c in self.cases)

    @property
    def failed(self) -> SmokeCase | None:
        return next((c for c in self.cases if c.status == "failed"), None)

    def to_dict(self) -> dict[str, Any]:
        return {"venv": self.venv, "gpu": self.gpu, "ok": self.ok, "cases": [c.to_dict() for c in self.cases]}


def gpu_present() -> tuple[bool, str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False, "no GPU: nvidia-smi not found"
    proc = subprocess.run([smi, "-L"], capture_output=True, text=True)
    gpus = [line for line in proc.stdout.splitlines() if line.startswith("GPU ")]
    if proc.returncode != 0 or not gpus:
        return False, f"no GPU: nvidia-smi -L: {(proc.stdout + proc.stderr).strip()[:200]}"
    return True, "; ".join(gpus)


def top_level_modules(wheel: Path) -> tuple[str, ...]:
    """top_level.txt when the wheel has one, else its top-level packages and modules."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        top = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        if top:
            return tuple(x.strip() for x in zf.read(top[0]).decode().splitlines() if x.strip())
    found = set()
    for n in names:
        first, _, rest = n.partition("/")
        if first.endswith((".dist-info", ".data")):
            continue
        if rest == "__init__.py" or (not rest and first.endswith(".py")):
            found.add(first[:-3] if first.endswith(".py") else first)
    return tuple(sorted(found))


def _tail(text: str, limit: int = 3000) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _run(case: str, argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> SmokeCase:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        return SmokeCase(case, "failed", time.monotonic() - t0, f"timed out after {timeout:.0f} s")
    status = "passed" if proc.returncode == 0 else "failed"
    detail = _tail((proc.stdout + proc.stderr).strip())
    if status == "failed":
        detail = f"exit {proc.returncode}: {detail}"
    return SmokeCase(case, status, time.monotonic() - t0, detail)


def run_smoke(wheel: Path, venv: Path, spec: SmokeSpec, *, work: Path, constraints: list[str],
              cpu_code: str | None = None, timeout: float = 1800) -> SmokeResult:
    """Fresh venv, pip install the wheel (with the build's pins as constraints), then the CPU and GPU checks."""
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    has_gpu, gpu_text = gpu_present()
    result = SmokeResult(str(venv), gpu_text)
    made = _run("venv", [sys.executable, "-m", "venv", str(venv)], dict(os.environ), venv.parent, 300)
    if made.status == "failed":
        result.cases.append(made)
        return result
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    argv = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if constraints:
        cfile = venv / "lgpatch-constraints.txt"
        cfile.write_text("\n".join(constraints) + "\n", encoding="utf-8")
        argv += ["-c", str(cfile)]
    install = _run("install", [*argv, str(wheel)], env, venv, timeout)
    result.cases.append(install)
    if install.status == "failed":
        return result
    imports = spec.imports or top_level_modules(wheel)
    code = "".join(f"import {m}\n" for m in imports) + (cpu_code if cpu_code is not None else spec.cpu)
    cpu_env = dict(env)
    if not has_gpu:
        for key, value in spec.env_without_gpu:
            cpu_env[key] = value.format(work=work)
    cpu = _run("cpu", [python, "-c", code], cpu_env, venv, timeout)
    cpu.code = code
    result.cases.append(cpu)
    if not spec.gpu:
        result.cases.append(SmokeCase("gpu", "skipped", detail="no GPU check for this recipe"))
    elif not has_gpu:
        result.cases.append(SmokeCase("gpu", "skipped", detail=gpu_text))
    else:
        gpu = _run("gpu", [python, "-c", spec.gpu], env, venv, timeout)
        gpu.code = spec.gpu
        result.cases.append(gpu)
    return result
