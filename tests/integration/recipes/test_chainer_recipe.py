"""The chainer-1.24 recipe end to end on the real Chainer 1.24.0 sdist from PyPI, on a machine without a GPU.

`lgpatch apply chainer-1.24` + `lgpatch build` (CUDA 13 toolkit, its math libraries from the pinned pip wheels,
Python of the test run) must give a wheel that holds every CuPy extension module, whose run paths are relative and
never point at the build tree; installed into a fresh virtual environment it imports with nothing but a driver
stub on LD_LIBRARY_PATH (this machine has no NVIDIA driver), finds the CUDA libraries itself (also from a
`pip install --target` folder, through the sys.path preload), and Chainer's MNIST-style MLP trains on the CPU.
A build whose probe cannot find a required module fails with a message naming it.

And, without building: every combination of the recipe's parameters applies exactly (what --strict demands),
checked with git on the real sdist for every distinct step sequence the conditions select.

Slow (a full build is ~3-7 minutes on 2 cores) and it downloads ~1.2 GB of CUDA wheels on the first run (pip's
cache keeps them). LGPATCH_CHAINER_BUILD_PYTHON names an existing build interpreter to reuse instead of a new venv;
LGPATCH_CHAINER_BUILT_TREE names a work tree already applied and built that way, to check its wheel again without
rebuilding (the apply and build themselves are then not exercised).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import runpy
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO, git, remove_venv, requires_nvcc, run_cli_subprocess

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.patchset import PatchBody
from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.tools.wheel_check import extensions

pytestmark = [pytest.mark.integration, pytest.mark.network, pytest.mark.slow]

RECIPE = "chainer-1.24"
# Every extension module of CuPy 1.24 (chainer_setup_build.py MODULES) except cupy.cuda.nccl (NCCL 1.x, optional).
EXPECTED = {
    "cupy.core.core", "cupy.core.flags", "cupy.core.internal", "cupy.cuda.cublas", "cupy.cuda.curand",
    "cupy.cuda.device", "cupy.cuda.driver", "cupy.cuda.memory", "cupy.cuda.pinned_memory", "cupy.cuda.profiler",
    "cupy.cuda.nvtx", "cupy.cuda.function", "cupy.cuda.runtime", "cupy.util", "cupy.cuda.cudnn", "cupy.cuda.cusolver",
}
RUNPATH = "$ORIGIN/../../nvidia/cu13/lib"


def _recipe():
    return find_recipe(RECIPE, SearchPath.from_options())


def _pins() -> list[str]:
    """The CUDA wheels the recipe's build pins (name==version), so the run venv reuses the same downloads."""
    pins = []
    build = _recipe().build
    for cmd in build.commands if build is not None else ():
        pins += [a for a in cmd.argv if re.fullmatch(r"nvidia-[a-z0-9-]+==[0-9.]+", a)]
    assert pins, "the recipe's build section pins no nvidia wheels"
    return pins


def _run(argv: list[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


def _venv(path: Path) -> Path:
    proc = _run([sys.executable, "-m", "venv", path])
    assert proc.returncode == 0, proc.stderr
    return path / "bin" / "python"


@dataclass(frozen=True)
class Built:
    tree: Path
    wheel: Path
    build_python: Path
    stub_dir: Path
    log: str


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp("chainer")
    reuse = os.environ.get("LGPATCH_CHAINER_BUILT_TREE")
    if reuse:
        tree, python = Path(reuse), Path(os.environ.get("LGPATCH_CHAINER_BUILD_PYTHON") or sys.executable)
        wheels = sorted((tree / "dist").glob("chainer-1.24.0-*.whl"))
        assert len(wheels) == 1, wheels
        yield Built(tree, wheels[0], python, tree / "build" / "lgpatch" / "driver-stub", "(reused)")
        return
    tree = root / "tree"
    env = {"LGPATCH_CACHE": str(root / "cache"), "MAX_JOBS": "2"}  # 2 cores shared: never more than -j2
    applied = run_cli_subprocess("apply", RECIPE, "--workdir", tree, "--strict", env=env, timeout=900)
    assert applied.returncode == 0, applied.stderr
    probe = run_cli_subprocess("build", "--help", env=env)
    if probe.returncode != 0 and "No module named 'legacy_gpu_patch.commands.build'" in probe.stderr:
        pytest.skip("`lgpatch build` is not available in this checkout yet")
    python = Path(os.environ.get("LGPATCH_CHAINER_BUILD_PYTHON") or _venv(root / "build-venv"))
    build = run_cli_subprocess("build", "-C", tree, "--python", python, env=env, timeout=3600)
    log = build.stdout + build.stderr
    assert build.returncode == 0, f"lgpatch build failed:\n{log[-6000:]}"
    wheels = sorted((tree / "dist").glob("chainer-1.24.0-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {tree / 'dist'}, found {wheels}"
    yield Built(tree, wheels[0], python, tree / "build" / "lgpatch" / "driver-stub", log)
    remove_venv(root / "build-venv")


@pytest.fixture(scope="module")
def run_python(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the built wheel installed the normal way (its requirements pull the CUDA wheels)."""
    root = tmp_path_factory.mktemp("run")
    python = _venv(root / "venv")
    constraints = root / "constraints.txt"
    constraints.write_text("\n".join(_pins()) + "\n")
    proc = _run([python, "-m", "pip", "install", "--disable-pip-version-check", "-c", constraints, built.wheel])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    yield python
    remove_venv(root / "venv")


requires_cuda_toolkit = requires_nvcc


@requires_cuda_toolkit
def test_wheel_holds_every_cupy_extension(built: Built) -> None:
    found = {e.module for e in extensions(built.wheel)}
    missing = sorted(EXPECTED - found)
    assert not missing, f"the build skipped CuPy extension modules: {missing}"
    assert found - EXPECTED <= {"cupy.cuda.nccl"}, found - EXPECTED


@requires_cuda_toolkit
def test_run_paths_are_relative_and_never_the_build_tree(built: Built) -> None:
    for ext in extensions(built.wheel):
        path = ext.dynamic.search_path
        assert RUNPATH in path, (ext.member, path)
        for entry in path:
            assert str(built.tree) not in entry and "driver-stub" not in entry, (ext.member, entry)
            # nothing of the build machine (its Python's lib, its toolkit's lib64): auditwheel's rule
            assert entry.startswith("$ORIGIN"), (ext.member, path)
    needed = {e.module: e.dynamic.needed for e in extensions(built.wheel)}
    assert "libcublas.so.13" in needed["cupy.cuda.cublas"]  # linked through the unversioned link folder
    assert "libcudnn.so.9" in needed["cupy.cuda.cudnn"]
    assert "libcuda.so.1" in needed["cupy.cuda.driver"]  # the driver's soname, recorded from the stub


# The MLP and its training loop are shared with the GPU proofs (bench/gpu: scripts, not a package, so by path).
_MLP = runpy.run_path(str(REPO / "bench" / "gpu" / "_chainer_mlp.py"))
WORKLOAD = textwrap.dedent(r"""
    import json, re, sys
    import numpy
    import cupy, chainer
    import chainer.functions as F, chainer.links as L
    from chainer import cuda, optimizers
    import importlib
    modules = sorted(sys.argv[1].split(","))
    for name in modules:
        importlib.import_module(name)
    try:
        cupy.cuda.runtime.getDeviceCount()
        no_driver = None
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        no_driver = str(exc)
""") + _MLP["MLP_CLASS"] + _MLP["TRAINING"] + textwrap.dedent(r"""
    rng = numpy.random.RandomState(0)
    x, t = synthetic_digits(rng, 1000)
    model = L.Classifier(MLP(100))
    opt = optimizers.Adam()
    opt.setup(model)
    losses, loss = train_epochs(model, opt, x, t, batch=100)
    conv = L.Convolution2D(3, 4, 3)
    y = F.max_pooling_2d(conv(rng.rand(2, 3, 8, 8).astype("f")), 2)  # collections.abc in pooling_2d
    F.sum(y).backward()
    maps = open("/proc/self/maps").read()
    libs = sorted(set(re.findall(r"/\S+/lib(?:cuda|cudart|cublas|curand|cusolver|cudnn)\.so[.\d]*", maps)))
    print(json.dumps({"cupy": cupy.__file__, "cuda_available": cuda.available, "cudnn": cuda.cudnn_enabled,
                      "no_driver": no_driver, "losses": losses, "loss_dtype": str(loss.data.dtype),
                      "conv_grad": conv.W.grad is not None, "libraries": libs, "numpy": numpy.__version__}))
""")


def _workload(python: Path, stub_dir: Path | None, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    if stub_dir is not None:
        env["LD_LIBRARY_PATH"] = str(stub_dir)  # no driver here: the stub, and nothing else, on the loader path
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return _run([python, "-c", WORKLOAD, ",".join(sorted(EXPECTED))], env=env, cwd=python.parent, timeout=600)


@requires_cuda_toolkit
def test_installed_wheel_imports_with_only_a_driver_stub_and_trains_on_cpu(built: Built, run_python: Path) -> None:
    # Without the stub the import fails for the one missing library: the driver's. Everything else is found.
    bare = _workload(run_python, None)
    assert bare.returncode != 0 and "libcuda.so.1" in bare.stderr, bare.stderr[-2000:]
    proc = _workload(run_python, built.stub_dir)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    site = str(run_python.parent.parent)
    assert out["cupy"].startswith(site) and out["cuda_available"] and out["cudnn"]
    assert out["no_driver"], "getDeviceCount() succeeded: this test expects the driver stub, not a GPU"
    losses = out["losses"]
    assert losses[-1] < 0.5 * losses[0], losses
    assert out["loss_dtype"] == "float32" and out["conv_grad"]
    libs = out["libraries"]
    for name in ("libcublas.so.13", "libcurand.so.10", "libcusolver.so.12", "libcudnn.so.9"):
        hits = [p for p in libs if p.endswith(name)]
        assert hits and hits[0].startswith(os.path.join(site, "lib")), (name, libs)  # run path -> venv's nvidia/
    assert any(p.startswith(str(built.stub_dir)) for p in libs if "libcuda.so" in p), libs


@requires_cuda_toolkit
def test_target_install_finds_the_libraries_through_sys_path(built: Built, run_python: Path, tmp_path: Path) -> None:
    """pip install --target DIR: DIR/nvidia does not exist, the sys.path preload finds the venv's wheels."""
    target = tmp_path / "target"
    proc = _run([run_python, "-m", "pip", "install", "--no-deps", "--target", target, built.wheel])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (target / "nvidia").exists()
    run = _workload(run_python, built.stub_dir, pythonpath=target)
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["cupy"].startswith(str(target))
    cublas = [p for p in out["libraries"] if p.endswith("libcublas.so.13")]
    assert cublas and cublas[0].startswith(str(run_python.parent.parent)), out["libraries"]


@requires_cuda_toolkit
def test_a_module_that_cannot_be_built_fails_the_build(built: Built) -> None:
    sp = _run([built.build_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    lgp = built.tree / "build" / "lgpatch"
    env = {**os.environ, "PATH": f"/usr/local/cuda/bin:{os.environ['PATH']}",
           "CPATH": f"{sp}/nvidia/cu13/include",  # cuDNN's headers left out on purpose
           "LIBRARY_PATH": f"{lgp / 'driver-stub'}:{lgp / 'wheel-libs'}"}
    proc = _run([built.build_python, "setup.py", "--name"], env=env, cwd=built.tree, timeout=600)
    assert proc.returncode != 0
    assert "CuPy modules that cannot be built: cudnn" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    skipped = _run([built.build_python, "setup.py", "--name"], env={**env, "CUPY_SKIP_MODULES": "cudnn"},
                   cwd=built.tree, timeout=600)
    assert skipped.returncode == 0 and skipped.stdout.strip().endswith("chainer"), skipped.stderr[-3000:]


# ------------------------------------------------------------------------------------------------ every combination


def _selected_steps(params: dict[str, object]) -> list[tuple[str, str, Path | None]]:
    """(patchset, step, patch file or None for declarative steps) the recipe runs for these parameters."""
    recipe = _recipe()
    kinds = recipe.param_kinds()
    steps = []
    for entry in recipe.entries:
        ps = entry.patchset
        assert ps is not None, "the chainer recipe has no inline steps"
        if not (conditions.evaluate(entry.when, params, kinds).selected
                and conditions.evaluate(ps.when, params, kinds).selected):
            continue
        for step in ps.steps:
            if conditions.evaluate(step.when, params, kinds).selected:
                steps.append((ps.name, step.id, ps.path / step.body.path if isinstance(step.body, PatchBody) else None))
    return steps


def test_every_parameter_combination_applies_exactly(tmp_path: Path, lgpatch) -> None:
    """Patchsets gated by different parameters touch some files in common (chainer_setup_build.py, setup.py,
    cupy/__init__.py, core.pyx): each selection must apply with no offset, whatever else was selected."""
    tree = tmp_path / "tree"
    r = lgpatch("apply", RECIPE, "--workdir", tree, "--cuda", "8.0", "--python", "3.6")  # just the pristine tree
    assert r.code == 0, r.err
    baseline = git(tree, "rev-list", "--max-parents=0", "HEAD")
    grid = itertools.product(["8.0", "9.0", "10.2", "11.0", "12.0", "13.0"], ["3.6", "3.7", "3.8", "3.9", "3.10",
                             "3.12"], [True, False], ["1.19", "1.24", "2.0"])
    sequences = {}
    for cuda, python, cudnn, numpy in grid:
        params = {"cuda": cuda, "python": python, "cudnn": cudnn, "numpy": numpy, "ptx_arch": "auto"}
        sequences.setdefault(tuple(_selected_steps(params)), params)
    assert len(sequences) > 50  # the conditions really do select different step lists
    index = tmp_path / "index"
    genv = {**os.environ, "GIT_INDEX_FILE": str(index)}
    trees: dict[tuple, str] = {(): git(tree, "rev-parse", f"{baseline}^{{tree}}")}
    for sequence, params in sequences.items():
        for n in range(1, len(sequence) + 1):
            prefix = sequence[:n]
            if prefix in trees:
                continue
            ps, step, patch = prefix[-1]
            if patch is None:  # cupy-ptx-fallback's insert of ptx_arch into its own new file: no patch to check
                trees[prefix] = trees[prefix[:-1]]
                continue
            _run(["git", "read-tree", trees[prefix[:-1]]], env=genv, cwd=tree).check_returncode()
            applied = _run(["git", "apply", "--cached", "-v", patch], env=genv, cwd=tree)
            assert applied.returncode == 0, f"{ps}/{step} fails for {params}:\n{applied.stderr[-3000:]}"
            assert "offset" not in applied.stderr, f"{ps}/{step} applies only with an offset for {params}:\n" \
                                                   f"{applied.stderr}"
            trees[prefix] = _run(["git", "write-tree"], env=genv, cwd=tree).stdout.strip()
