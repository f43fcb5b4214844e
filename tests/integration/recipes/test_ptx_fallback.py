"""The cupy-ptx-fallback patchset on the real Chainer 1.24.0 sdist, with the real nvcc; no GPU needed.

nvcc 13.0 knows sm_75 ... sm_121 and rejects everything older, so "a GPU newer than nvcc" is played by a device of
compute capability 13.0 (sm_130) and "a GPU older than nvcc" by a Pascal sm_61. The CUDA 8 case of the seed is
checked on the shape of CUDA 8's `nvcc --help` (written here) and on the release table.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import NVCC, git, requires_nvcc
from helpers.ptx_support import FP16_PATCHSET, FP16_REASON, apply, load_arch_select, patchset_available

pytestmark = [pytest.mark.integration, pytest.mark.nvcc, requires_nvcc]

STEPS = [
    "cupy-ptx-fallback/arch-select-module",
    "cupy-ptx-fallback/compiler-target-and-cache-key",
    "cupy-ptx-fallback/bake-ptx-arch",
]
JIT_CACHE_SIZE = "4294967296"

# A kernel of the shape CuPy's ElementwiseKernel generates, without the carray.cuh header (that header needs the
# cupy-fp16-header patchset to compile with nvcc >= 9).
PLAIN_KERNEL = textwrap.dedent("""\
    extern "C" __global__ void cupy_scale(const float* x, float* y, float a, int n) {
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = a * x[i];
      }
    }
    """)
# The same with CuPy's header, as cupy/core/carray.pxi prepends it, and a float16 operation.
HEADER_KERNEL = textwrap.dedent("""\
    typedef float16 T;
    extern "C" __global__ void cupy_add_half(CArray<T, 1> x, CArray<T, 1> y, CArray<T, 1> z, CIndexer<1> _ind) {
      CUPY_FOR(i, _ind.size()) {
        _ind.set(i);
        z[_ind.get()] = T(float(x[_ind.get()]) + float(y[_ind.get()]));
      }
    }
    """)

# The shape of CUDA 8.0's `nvcc --help` around --gpu-architecture (written for this test; the allowed values are
# those CUDA 8.0 lists). Examples in the text are indented; option headings start in column 0.
CUDA8_HELP = textwrap.dedent("""\
    --output-file <file>                       (-o)
            Specify name and location of the output file.

    --gpu-architecture <arch>                  (-arch)
            Specify the name of the class of NVIDIA 'virtual' GPU architecture for which
            the CUDA input files must be compiled.
            --gpu-architecture=sm_35 is equivalent to --gpu-architecture=compute_35
            --gpu-code=sm_35,compute_35.
            Allowed values for this option:  'compute_20','compute_30','compute_32',
            'compute_35','compute_37','compute_50','compute_52','compute_53','compute_60',
            'compute_61','compute_62','sm_20','sm_21','sm_30','sm_32','sm_35','sm_37',
            'sm_50','sm_52','sm_53','sm_60','sm_61','sm_62'.

    --gpu-code <code>,...                      (-code)
            Specify the name of the NVIDIA GPU to assemble and optimize PTX for.
            Allowed values for this option:  'compute_20','sm_20','sm_99'.
    """)


def nvcc_release() -> tuple[int, int] | None:
    out = subprocess.run([NVCC, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """The sdist with this patchset (and the fp16 header one when it exists), ptx_arch=auto."""
    with_fp16 = patchset_available(FP16_PATCHSET)
    names = ["cupy-ptx-fallback"] + ([FP16_PATCHSET] if with_fp16 else [])
    path, summary = apply(tmp_path_factory.mktemp("ptx-auto"), None, names)
    assert [a["step"] for a in summary["applied"]][:3] == STEPS
    return path, with_fp16


@pytest.fixture(scope="module")
def nvcc_dir() -> str:
    assert NVCC is not None
    return str(Path(NVCC).resolve().parent)


# ------------------------------------------------------------------------------------------------ the patch itself


def test_applies_strict_to_the_pristine_sdist_and_touches_only_its_files(tree: tuple[Path, bool]) -> None:
    path, _ = tree
    pristine = git(path, "rev-list", "--max-parents=0", "HEAD")
    first_three = git(path, "rev-list", "--reverse", "HEAD").splitlines()[1:4]
    changed = git(path, "diff", "--name-only", pristine, first_three[-1]).splitlines()
    assert sorted(changed) == ["cupy/cuda/_arch_select.py", "cupy/cuda/compiler.py"]
    compiler = (path / "cupy/cuda/compiler.py").read_text()
    assert "'--' + kind" in compiler and "_arch_select.cache_env(" in compiler
    assert "_BAKED_PTX_ARCH = 'auto'" in (path / "cupy/cuda/_arch_select.py").read_text()


def test_ptx_arch_parameter_is_baked_in_and_the_environment_wins(tmp_path: Path) -> None:
    path, summary = apply(tmp_path, None, ["cupy-ptx-fallback"], {"ptx_arch": "compute_75"})
    assert summary["parameters"]["ptx_arch"] == "compute_75"
    sel = load_arch_select(path, "arch_select_baked")
    assert sel._BAKED_PTX_ARCH == "compute_75"
    assert sel.requested_ptx_arch({}) == "compute_75"
    assert sel.requested_ptx_arch({"CUPY_PTX_ARCH": "auto"}) is None
    assert sel.requested_ptx_arch({"CUPY_PTX_ARCH": "sm_80"}) == "compute_80"
    # An explicit arch needs no probe and forces PTX even where a cubin would do.
    assert sel.target_for_device("90", environ={}, nvcc="/nonexistent/nvcc") == "compute_75"
    with pytest.raises(sel.ArchSelectionError, match="sm_61: PTX runs only"):
        sel.target_for_device("61", environ={}, nvcc="/nonexistent/nvcc")


# ------------------------------------------------------------------------------------------------ asking nvcc


def test_real_nvcc_lists_its_archs_and_its_help_agrees(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_probe")
    archs = sel.nvcc_supported_archs(NVCC)
    assert archs is not None and archs.source == "nvcc --list-gpu-arch --list-gpu-code"
    helped = subprocess.run([NVCC, "--help"], capture_output=True, text=True, check=True).stdout
    assert sel.parse_help(helped) == (archs.real, archs.virtual)
    assert {75, 90} <= archs.real and 61 not in archs.real
    if nvcc_release() == (13, 0):
        assert max(archs.virtual) == 121 and min(archs.virtual) == 75


def test_without_nvcc_listing_the_release_table_answers(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_table")
    # A path that does not exist makes every probe command fail for real; the version text is CUDA 8's.
    archs = sel.nvcc_supported_archs("/nonexistent/nvcc", b"Cuda compilation tools, release 8.0, V8.0.61\n")
    assert archs.source == "table (CUDA 8.0)"
    assert sel.select_target(75, archs) == ("ptx", "compute_61")
    assert sel.nvcc_supported_archs("/nonexistent/nvcc", "release 7.5, V7.5.17") is None
    assert sel.select_target(75, None) == ("cubin", "sm_75")  # unknown nvcc: CuPy's old behaviour


def test_cuda8_help_gives_the_seeds_compute_61_for_sm_75(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_cuda8")
    real, virtual = sel.parse_help(CUDA8_HELP)
    assert 21 in real and 21 not in virtual and 99 not in real  # only --gpu-architecture's list counts
    assert (real, virtual) == tuple(frozenset(v) for v in sel._KNOWN_RELEASES[(8, 0)])
    archs = sel.NvccArchs(real, virtual, "nvcc --help")
    assert sel.select_target(75, archs) == ("ptx", "compute_61")  # 6.2 is Tegra-only: skipped
    assert sel.select_target(61, archs) == ("cubin", "sm_61")
    assert sel.select_target(62, archs) == ("cubin", "sm_62")


# ------------------------------------------------------------------------------------------------ choosing


@pytest.mark.parametrize(
    ("device", "force", "expected"),
    [
        (130, False, ("ptx", "compute_121")),  # newer than nvcc: newest virtual arch <= device
        (90, False, ("cubin", "sm_90")),  # known: a cubin, as before
        (90, True, ("ptx", "compute_90")),  # CUPY_FORCE_PTX
        (75, False, ("cubin", "sm_75")),
        (87, True, ("ptx", "compute_87")),  # a Tegra arch is fine for that very device
        (88, True, ("ptx", "compute_88")),
    ],
)
def test_select_target_with_real_nvcc_13(tree: tuple[Path, bool], device: int, force: bool,
                                         expected: tuple[str, str]) -> None:
    if nvcc_release() != (13, 0):
        pytest.skip("the expected values are those of nvcc 13.0")
    sel = load_arch_select(tree[0], "arch_select_13")
    assert sel.select_target(device, sel.nvcc_supported_archs(NVCC), force_ptx=force) == expected


def test_same_major_cubin_before_ptx(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_sass")
    cuda9 = sel.nvcc_supported_archs("/nonexistent/nvcc", "Cuda compilation tools, release 9.0, V9.0.176")
    assert sel.select_target(75, cuda9) == ("cubin", "sm_70")  # SASS runs on the same major, equal or higher minor
    assert sel.select_target(75, cuda9, force_ptx=True) == ("ptx", "compute_70")
    cuda11_0 = sel.NvccArchs(frozenset([70, 72, 75, 80]), frozenset([70, 72, 75, 80]), "test")
    assert sel.select_target(86, cuda11_0) == ("cubin", "sm_80")


def test_tegra_and_undocumented_archs_are_no_fallback_for_other_gpus(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_tegra")
    archs = sel.NvccArchs(frozenset([75, 87, 88]), frozenset([75, 80, 87, 88]), "test")
    assert sel.select_target(89, archs) == ("ptx", "compute_80")  # not Tegra's 8.7, not the unpublished 8.8
    assert sel.select_target(87, archs) == ("cubin", "sm_87")
    cuda8 = sel.nvcc_supported_archs("/nonexistent/nvcc", "release 8.0, V8.0.61")
    assert sel.select_target(72, cuda8) == ("ptx", "compute_62")  # a Tegra GPU may use Tegra PTX


def test_selection_agrees_with_lgpatch_planner(tree: tuple[Path, bool]) -> None:
    """The patched CuPy cannot import lgpatch, so it carries its own small rules: they must agree with the planner."""
    planner = pytest.importorskip("legacy_gpu_patch.cuda.targets")
    ck = pytest.importorskip("legacy_gpu_patch.cuda.knowledge")
    sel = load_arch_select(tree[0], "arch_select_planner")
    assert set(ck.TEGRA_ONLY) == set(sel.TEGRA_ONLY)
    devices = sorted({a.number for a in ck.ARCHES} | {130})
    sources = {f"{major}.{minor}": archs for (major, minor), archs in sel._KNOWN_RELEASES.items()}
    checked = 0
    for version, (real, virtual) in sources.items():
        row = ck.toolkit(version)
        assert {f"sm_{n}" for n in real} <= set(row.sass) and {f"compute_{n}" for n in virtual} <= set(row.ptx)
        archs = sel.NvccArchs(frozenset(real), frozenset(virtual), version)
        for cc in devices:
            p = planner.plan(version, cc)
            if p.status == "impossible":
                with pytest.raises(sel.ArchSelectionError):
                    sel.select_target(cc, archs)
            else:
                expected = ("ptx", p.ptx) if p.status == "ptx" else ("cubin", p.sass)
                assert sel.select_target(cc, archs) == expected, (version, cc, p.status)
            checked += 1
    real13 = sel.nvcc_supported_archs(NVCC)
    release = nvcc_release()
    for cc in devices:
        p = planner.plan(f"{release[0]}.{release[1]}", cc)
        if p.status != "impossible":
            expected = ("ptx", p.ptx) if p.status == "ptx" else ("cubin", p.sass)
            assert sel.select_target(cc, real13) == expected, ("real nvcc", cc, p.status)
    assert checked > 100


def test_gpu_older_than_nvcc_is_a_clear_error(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_old")
    with pytest.raises(sel.ArchSelectionError) as info:
        sel.select_target(61, sel.nvcc_supported_archs(NVCC))
    text = str(info.value)
    assert "this GPU (sm_61)" in text and "compute_75" in text and "CUDA 12.x or older" in text


def test_overrides_are_validated(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_env")
    assert sel.requested_ptx_arch({"CUPY_PTX_ARCH": "7.5"}) == "compute_75"
    assert sel.requested_ptx_arch({"CUPY_PTX_ARCH": ""}) is None
    with pytest.raises(sel.ArchSelectionError, match="CUPY_PTX_ARCH: 'volta' is not a GPU architecture"):
        sel.requested_ptx_arch({"CUPY_PTX_ARCH": "volta"})
    assert sel.target_for_device("90", environ={"CUPY_FORCE_PTX": "1"}, nvcc=NVCC) == "compute_90"
    assert sel.target_for_device("90", environ={}, nvcc=NVCC) == "sm_90"


# ------------------------------------------------------------------------------------------------ cache key, image


def test_cache_key_differs_by_mode_and_arch(tree: tuple[Path, bool], tmp_path: Path) -> None:
    sel = load_arch_select(tree[0], "arch_select_key")
    (tmp_path / "kern.cu").write_text(PLAIN_KERNEL)
    pp = subprocess.run([NVCC, "--preprocess", "kern.cu"], cwd=tmp_path, capture_output=True, text=True,
                        check=True).stdout
    version = subprocess.run([NVCC, "--version"], capture_output=True, check=True).stdout
    names = {}
    for arch in ("sm_90", "compute_90", "compute_121", "compute_75"):
        env = sel.cache_env(arch, (), version)
        names[arch] = sel.cache_file_name(f"{env} {pp}".encode(), arch)  # as compile_with_cache builds it
    assert len(set(names.values())) == 4
    assert names["sm_90"].endswith(".cubin") and all(names[a].endswith(".ptx") for a in names if a != "sm_90")
    # A cubin keeps CuPy's original key, so caches made before the patch stay valid.
    assert sel.cache_env("sm_90", (), version) == ("sm_90", (), version)
    upstream_env = ("sm_90", (), version)  # cupy/cuda/compiler.py before the patch: (arch, options, nvcc --version)
    original = hashlib.md5(f"{upstream_env} {pp}".encode()).hexdigest() + ".cubin"
    assert names["sm_90"] == original


def test_ptx_image_is_nul_terminated_once(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_image")
    assert sel.module_image(b".version 9.0\n", "compute_75") == b".version 9.0\n\0"
    assert sel.module_image(b".version 9.0\n\0", "compute_75") == b".version 9.0\n\0"
    assert sel.module_image(b"\x7fELF..", "sm_90") == b"\x7fELF.."


# ------------------------------------------------------------------------------------------------ JIT cache


def test_jit_cache_is_sized_before_cuda_starts(tree: tuple[Path, bool]) -> None:
    sel = load_arch_select(tree[0], "arch_select_jit")
    env: dict[str, str] = {}
    state = sel.configure_jit_cache(env, driver_initialised=lambda: False)
    assert env["CUDA_CACHE_MAXSIZE"] == JIT_CACHE_SIZE and state["set"] == JIT_CACHE_SIZE and not state["late"]
    kept = {"CUDA_CACHE_MAXSIZE": "2147483648"}
    assert sel.configure_jit_cache(kept)["set"] is None and kept["CUDA_CACHE_MAXSIZE"] == "2147483648"
    small = {"CUDA_CACHE_MAXSIZE": "1000000"}
    with pytest.warns(RuntimeWarning, match="too small"):
        sel.configure_jit_cache(small, driver_initialised=lambda: False)
    assert small["CUDA_CACHE_MAXSIZE"] == JIT_CACHE_SIZE
    disabled = {"CUDA_CACHE_DISABLE": "1"}
    state = sel.configure_jit_cache(disabled)
    assert "CUDA_CACHE_MAXSIZE" not in disabled
    assert any("unset CUDA_CACHE_DISABLE" in a for a in sel.jit_cache_advice(disabled, state))
    opt_out = {"CUPY_JIT_CACHE_AUTO": "0", "CUDA_CACHE_MAXSIZE": "1000000"}
    state = sel.configure_jit_cache(opt_out)
    assert opt_out["CUDA_CACHE_MAXSIZE"] == "1000000"
    assert any(f"export CUDA_CACHE_MAXSIZE={JIT_CACHE_SIZE}" in a for a in sel.jit_cache_advice(opt_out, state))


def test_jit_cache_advice_when_cuda_started_first_or_path_unwritable(tree: tuple[Path, bool], tmp_path: Path) -> None:
    sel = load_arch_select(tree[0], "arch_select_late")
    env = {"CUDA_CACHE_PATH": str(tmp_path / "jit")}
    state = sel.configure_jit_cache(env, driver_initialised=lambda: True)
    assert state["late"]
    assert any("before starting Python" in a for a in sel.jit_cache_advice(env, state))
    fine = {"CUDA_CACHE_PATH": str(tmp_path / "jit2")}
    assert sel.jit_cache_advice(fine, sel.configure_jit_cache(fine, driver_initialised=lambda: False)) == []
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        env = {"CUDA_CACHE_PATH": str(ro / "jit")}
        assert any("not writable" in a for a in sel.jit_cache_advice(env, sel.configure_jit_cache(env)))


# ------------------------------------------------------------------------------------------------ compile_with_cache

# Stand-ins for the two CuPy extension modules compiler.py imports (the GPU device and the driver module loader);
# everything else is the patched tree's own code and the real nvcc.
STANDIN_CUDA_INIT = """\
import os
__path__.append(os.path.join(os.environ["PTX_TEST_TREE"], "cupy", "cuda"))
"""
STANDIN_DEVICE = """\
import os


class Device(object):
    def __init__(self, device=None):
        self.compute_capability = os.environ["PTX_TEST_DEVICE_CC"]
"""
STANDIN_FUNCTION = """\
LOADED = []


class Module(object):
    def load(self, image):
        LOADED.append(image)
"""
# filelock and six are CuPy 1.24's own dependencies; a single-process test needs only this much of them where the
# interpreter has neither.
STANDIN_FILELOCK = """\
class FileLock(object):
    def __init__(self, path):
        self.path = path

    def acquire(self):
        pass

    def release(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
"""
STANDIN_SIX = "binary_type = bytes\ntext_type = str\n"

CHILD = """\
import json, os, re, sys, warnings
warnings.simplefilter("always")
out = {"maxsize_before": os.environ.get("CUDA_CACHE_MAXSIZE")}
from cupy.cuda import compiler, function
out["maxsize_after_import"] = os.environ.get("CUDA_CACHE_MAXSIZE")
try:
    out["target"] = list(compiler.get_compile_target())
except Exception as e:
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
    sys.exit(0)
source = open(sys.argv[1]).read()
compiler.compile_with_cache(source)
compiler.compile_with_cache(source)  # the second time from CuPy's kernel cache
first, second = function.LOADED
m = re.search(rb"^\\.target\\s+(\\S+)", first, re.M)
cache_dir = os.environ["CUPY_CACHE_DIR"]
stored = {}
for name in os.listdir(cache_dir):
    with open(os.path.join(cache_dir, name), "rb") as f:
        stored[name] = f.read()
# How the loaded image relates to the cache entry it came from: as stored, or with a NUL added.
as_stored = [n for n, data in stored.items() if data == first]
nul_added = [n for n, data in stored.items() if data + b"\\0" == first]
out.update(same=first == second, as_stored=as_stored, nul_added=nul_added, elf=first.startswith(b"\\x7fELF"),
           ptx_target=m.group(1).decode() if m else None,
           cache=sorted(os.listdir(os.environ["CUPY_CACHE_DIR"])))
print(json.dumps(out))
"""


@pytest.fixture
def run_compiler(tree: tuple[Path, bool], tmp_path: Path, nvcc_dir: str):
    path, _ = tree
    standin = tmp_path / "standin"
    for rel, text in {"cupy/__init__.py": "", "cupy/cuda/__init__.py": STANDIN_CUDA_INIT,
                      "cupy/cuda/device.py": STANDIN_DEVICE, "cupy/cuda/function.py": STANDIN_FUNCTION}.items():
        (standin / rel).parent.mkdir(parents=True, exist_ok=True)
        (standin / rel).write_text(text)
    deps = tmp_path / "standin_deps"
    deps.mkdir()
    (deps / "filelock.py").write_text(STANDIN_FILELOCK)
    (deps / "six.py").write_text(STANDIN_SIX)
    (tmp_path / "child.py").write_text(CHILD)
    cache_dir = tmp_path / "kernel_cache"

    def run(device_cc: str, source: str, python: str = sys.executable, **env: str) -> dict:
        (tmp_path / "kern.src").write_text(source)
        child_env = {k: v for k, v in os.environ.items()
                     if not k.startswith(("CUPY_", "CUDA_CACHE", "PTX_TEST_"))}
        paths = [str(standin), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        if subprocess.run([python, "-c", "import filelock, six"], capture_output=True,
                          env={**child_env, "PYTHONPATH": os.pathsep.join(paths)}).returncode != 0:
            paths.append(str(deps))  # filelock and six are CuPy's own dependencies; stand-ins when missing
        child_env.update(PYTHONPATH=os.pathsep.join(paths),
                         PATH=nvcc_dir + os.pathsep + os.environ.get("PATH", ""), PTX_TEST_TREE=str(path),
                         PTX_TEST_DEVICE_CC=device_cc, CUPY_CACHE_DIR=str(cache_dir),
                         CUDA_CACHE_PATH=str(tmp_path / "jit_cache"), **env)
        proc = subprocess.run([python, str(tmp_path / "child.py"), str(tmp_path / "kern.src")],
                              capture_output=True, text=True, env=child_env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["stderr"] = proc.stderr
        return result

    return run


def test_compile_with_cache_falls_back_to_ptx_and_keys_by_mode_and_arch(run_compiler) -> None:
    if nvcc_release() != (13, 0):
        pytest.skip("the expected archs are those of nvcc 13.0")
    new = run_compiler("130", PLAIN_KERNEL)  # a GPU newer than nvcc
    assert new["maxsize_before"] is None and new["maxsize_after_import"] == JIT_CACHE_SIZE
    assert new["target"] == ["ptx", "compute_121"]
    assert new["ptx_target"] == "sm_121" and not new["elf"] and new["same"]
    assert new["nul_added"] and new["nul_added"][0].endswith(".ptx")  # PTX text, NUL-terminated for the driver
    assert [e.rsplit(".", 1)[1] for e in new["cache"] if e != "lock_file.lock"] == ["ptx"]
    assert "RuntimeWarning" not in new["stderr"]  # cache sized, path writable: nothing to advise

    native = run_compiler("90", PLAIN_KERNEL)
    assert native["target"] == ["cubin", "sm_90"] and native["elf"] and native["same"]
    assert native["as_stored"] and native["as_stored"][0].endswith(".cubin")  # a cubin is loaded as it is
    forced = run_compiler("90", PLAIN_KERNEL, CUPY_FORCE_PTX="1")
    assert forced["target"] == ["ptx", "compute_90"] and forced["ptx_target"] == "sm_90"
    pinned = run_compiler("130", PLAIN_KERNEL, CUPY_PTX_ARCH="compute_75")
    assert pinned["ptx_target"] == "sm_75"
    entries = [e for e in pinned["cache"] if e != "lock_file.lock"]
    assert len(entries) == 4  # one entry per mode and arch, none overwritten
    assert sorted(e.rsplit(".", 1)[1] for e in entries) == ["cubin", "ptx", "ptx", "ptx"]


def test_compile_with_cache_on_a_gpu_older_than_nvcc_says_why(run_compiler) -> None:
    old = run_compiler("61", PLAIN_KERNEL)
    assert old["error"].startswith("ArchSelectionError: CuPy cannot compile kernels for this GPU (sm_61)")


def test_disabled_jit_cache_is_left_alone_and_advised(run_compiler) -> None:
    off = run_compiler("130", PLAIN_KERNEL, CUDA_CACHE_DISABLE="1")
    assert off["maxsize_after_import"] is None
    assert "unset CUDA_CACHE_DISABLE; export CUDA_CACHE_MAXSIZE=4294967296" in off["stderr"]


def test_compile_with_cache_on_the_seeds_python_3_6(run_compiler) -> None:
    """The seed's plant runs Python 3.6: the patched compile path (probe, choice, nvcc --ptx, cache, load) too."""
    py36 = next(iter(sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6.*/bin/python")))), None)
    py36 = py36 or shutil.which("python3.6")
    if py36 is None or "/shims/" in py36:
        pytest.skip("no Python 3.6 interpreter (~/.pyenv/versions/3.6.* or python3.6 on PATH)")
    result = run_compiler("130", PLAIN_KERNEL, python=py36)
    assert result["target"][0] == "ptx" and result["nul_added"] and result["same"]
    assert result["maxsize_after_import"] == JIT_CACHE_SIZE


def test_carray_header_kernel_compiles_to_ptx_for_the_fallback_arch(tree: tuple[Path, bool], run_compiler) -> None:
    path, with_fp16 = tree
    if not with_fp16:
        pytest.skip(FP16_REASON)
    header = (path / "cupy/core/carray.cuh").read_text()
    result = run_compiler("130", header + HEADER_KERNEL)  # what cupy/core/carray.pxi's compile_with_cache passes
    assert result.get("error") is None
    assert result["target"][0] == "ptx" and result["ptx_target"] and result["nul_added"]


# ------------------------------------------------------------------------------------------------ old Pythons

PY_CHILD = """\
import json, sys
path = sys.argv[1]
if sys.version_info[0] == 2:
    import imp
    sel = imp.load_source("arch_select", path)
else:
    import importlib.util
    spec = importlib.util.spec_from_file_location("arch_select", path)
    sel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sel)
import py_compile
py_compile.compile(sys.argv[2], cfile=sys.argv[3], doraise=True)
archs = sel.NvccArchs(*sel.parse_help(sys.stdin.read()), source="help")
out = {}
for cc in (75, 72, 61, 62, 52):
    out[str(cc)] = list(sel.select_target(cc, archs))
out["force"] = list(sel.select_target(61, archs, force_ptx=True))
out["env"] = sel.requested_ptx_arch({"CUPY_PTX_ARCH": "6.1"})
out["name"] = sel.cache_file_name(b"key", "compute_61")
out["nul"] = sel.module_image(b"ptx", "compute_61").endswith(b"\\0")
print(json.dumps(out, sort_keys=True))
"""


def _interpreters() -> list[str]:
    found = []
    for version in ("2.7", "3.6", "3.12"):
        pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")))
        on_path = shutil.which(f"python{version}")
        exe = pyenv[-1] if pyenv else on_path if on_path and "/shims/" not in on_path else None  # shims may refuse
        if exe:
            found.append(exe)
    return found


def test_patched_modules_run_on_python_2_7_and_3_6(tree: tuple[Path, bool], tmp_path: Path) -> None:
    exes = _interpreters()
    if not any(re.search(r"(2\.7|3\.6)", e) for e in exes):
        pytest.skip("no Python 2.7 or 3.6 interpreter (python2.7/python3.6 on PATH or under ~/.pyenv) to run on")
    path, _ = tree
    (tmp_path / "child.py").write_text(PY_CHILD)
    outputs = {}
    for exe in exes:
        proc = subprocess.run([exe, str(tmp_path / "child.py"), str(path / "cupy/cuda/_arch_select.py"),
                               str(path / "cupy/cuda/compiler.py"), str(tmp_path / "compiler.pyc")],
                              input=CUDA8_HELP, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{exe}: {proc.stderr}"
        outputs[exe] = json.loads(proc.stdout)
    first = next(iter(outputs.values()))
    assert first["75"] == ["ptx", "compute_61"] and first["61"] == ["cubin", "sm_61"]
    assert first["72"] == ["ptx", "compute_62"]
    assert first["env"] == "compute_61" and first["name"].endswith(".ptx") and first["nul"]
    assert all(out == first for out in outputs.values()), outputs
