"""legacy_gpu_patch.tools: the driver stub, the nvidia-wheel link folder, the ELF reader and the wheel check.

Everything is built for real with gcc in temporary folders: a cuda.h with the real header's shapes (versioned
names behind #defines, per-thread-stream variants) written here, shared objects with sonames and run paths, and a
wheel made of them. The real toolkit's cuda.h is used too where it exists.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from legacy_gpu_patch.tools import cuda_stub, nvidia_wheels, wheel_check
from legacy_gpu_patch.tools.elf import ElfError, read_dynamic

GCC = shutil.which("gcc")
requires_gcc = pytest.mark.skipif(GCC is None, reason="gcc not found on PATH")
REAL_CUDA = cuda_stub.find_cuda_home() if Path("/usr/local/cuda/include/cuda.h").is_file() else None

# The shapes of the real cuda.h: CUDAAPI, versioned names behind #defines unless __CUDA_API_VERSION_INTERNAL,
# per-thread default stream variants, and a few declarations that are not driver functions.
FAKE_CUDA_H = """\
#ifndef __cuda_cuda_h__
#define __cuda_cuda_h__
#define CUDA_VERSION 12040
#define CUDAAPI
typedef enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 } CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
#if !defined(__CUDA_API_VERSION_INTERNAL)
#define cuCtxCreate cuCtxCreate_v2
#endif
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define cuStreamQuery cuStreamQuery_ptsz
#endif
CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr);
CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr);
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal);
CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuStreamQuery(CUstream hStream);
typedef CUresult (CUDAAPI *PFN_cuInit)(unsigned int Flags);
int cudaHelperNotADriverFunction(void);
#endif
"""


def _gcc(*args: str | Path) -> None:
    assert GCC is not None
    proc = subprocess.run([GCC, *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _shared_object(path: Path, source: str, *flags: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / f"{path.name}.c"
    src.write_text(source)
    _gcc("-shared", "-fPIC", "-o", path, src, *flags)
    return path


# ------------------------------------------------------------------------------------------------ cuda_stub


@requires_gcc
def test_stub_from_a_cuda_h_shape(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda.h").write_text(FAKE_CUDA_H)
    symbols = cuda_stub.driver_symbols(home / "include" / "cuda.h")
    # Both spellings of versioned names and the per-thread variant; no typedefs or non-driver functions.
    assert symbols == sorted(["cuCtxCreate", "cuCtxCreate_v2", "cuDeviceGet", "cuGetErrorName", "cuGetErrorString",
                              "cuInit", "cuStreamQuery", "cuStreamQuery_ptsz"])
    path, count, rebuilt = cuda_stub.build_stub(tmp_path / "stub", home)
    assert (path.name, count, rebuilt) == ("libcuda.so.1", len(symbols), True)
    assert read_dynamic(path.read_bytes()).soname == "libcuda.so.1"
    assert (tmp_path / "stub" / "libcuda.so").resolve() == path.resolve()
    lib = ctypes.CDLL(str(path))
    assert lib.cuInit(0) == 100 and lib.cuCtxCreate_v2(None, 0, 0) == 100  # CUDA_ERROR_NO_DEVICE
    text = ctypes.c_char_p()
    assert lib.cuGetErrorString(100, ctypes.byref(text)) == 0
    assert b"lgpatch driver stub" in text.value
    assert lib.cuGetErrorName(100, ctypes.byref(text)) == 0 and text.value == b"CUDA_ERROR_NO_DEVICE"
    # Same header, same compiler: reused, not rebuilt; a changed header rebuilds.
    assert cuda_stub.build_stub(tmp_path / "stub", home)[2] is False
    (home / "include" / "cuda.h").write_text(FAKE_CUDA_H.replace("cuInit(", "cuInitX(").replace("PFN_cuInitX", "x"))
    assert cuda_stub.build_stub(tmp_path / "stub", home)[2] is True


@requires_gcc
def test_prefer_driver_links_to_the_installed_driver_and_drops_a_stub(tmp_path: Path) -> None:
    """On a GPU machine the folder must hold no libcuda.so.1: a build tree's run path could pick it over the driver."""
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda.h").write_text(FAKE_CUDA_H)
    out = tmp_path / "stub"
    cuda_stub.build_stub(out, home)  # a stub left from a build on a machine without a driver
    driver = _shared_object(tmp_path / "driver" / "libcuda.so.1", "int cuInit(int f) { return 0; }\n",
                            "-Wl,-soname,libcuda.so.1")  # as the real driver has
    link = cuda_stub.link_driver(out, driver)
    assert link.resolve() == driver.resolve()
    assert sorted(p.name for p in out.iterdir()) == ["libcuda.so"]
    user = _shared_object(tmp_path / "libuser.so", "int cuInit(int);\nint go(void) { return cuInit(0); }\n",
                          f"-L{out}", "-lcuda")
    assert "libcuda.so.1" in read_dynamic(user.read_bytes()).needed  # the driver's soname, as with the stub


@requires_gcc
@pytest.mark.skipif(cuda_stub.installed_driver() is not None, reason="this machine has an NVIDIA driver")
def test_prefer_driver_without_a_driver_makes_the_stub(tmp_path: Path) -> None:
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda.h").write_text(FAKE_CUDA_H)
    assert cuda_stub.main(["--prefer-driver", "--out", str(tmp_path / "stub"), "--cuda-home", str(home)]) == 0
    assert (tmp_path / "stub" / "libcuda.so.1").is_file()


@requires_gcc
def test_stub_links_like_the_driver(tmp_path: Path) -> None:
    """A library linked with -lcuda against the stub records libcuda.so.1, the driver's soname."""
    home = tmp_path / "cuda"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda.h").write_text(FAKE_CUDA_H)
    cuda_stub.build_stub(tmp_path / "stub", home)
    user = _shared_object(tmp_path / "libuser.so", '#include "cuda.h"\nint go(void) { return cuInit(0); }\n',
                          f"-I{home / 'include'}", f"-L{tmp_path / 'stub'}", "-lcuda")
    info = read_dynamic(user.read_bytes())
    assert "libcuda.so.1" in info.needed and not info.search_path


@requires_gcc
@pytest.mark.skipif(REAL_CUDA is None, reason="no CUDA toolkit with include/cuda.h")
def test_stub_from_the_real_cuda_h(tmp_path: Path) -> None:
    assert REAL_CUDA is not None
    path, count, _ = cuda_stub.build_stub(tmp_path / "stub", REAL_CUDA)
    assert count > 300
    lib = ctypes.CDLL(str(path))
    for name in ("cuInit", "cuModuleLoadData", "cuLaunchKernel", "cuCtxCreate_v2", "cuMemAlloc_v2"):
        assert getattr(lib, name)() == 100, name


def test_stub_cli_reports_a_missing_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An explicit --cuda-home without cuda.h is an error, not a silent fall-back to another toolkit.
    assert cuda_stub.main(["--out", str(tmp_path / "o"), "--cuda-home", str(tmp_path)]) == cuda_stub.EXIT_TOOL
    assert f"cuda.h not found in {tmp_path}/include" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------ nvidia_wheels


@requires_gcc
def test_link_dir_lets_the_linker_find_versioned_wheel_libraries(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    lib13 = site / "nvidia" / "cu13" / "lib"
    _shared_object(lib13 / "libcublas.so.13", "int cublasCreate_v2(void) { return 0; }\n",
                   "-Wl,-soname,libcublas.so.13")
    (site / "nvidia" / "cu13" / "include").mkdir(parents=True)
    _shared_object(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "int cudnnCreate(void) { return 0; }\n",
                   "-Wl,-soname,libcudnn.so.9")
    # CUDA 12 layout: one folder per library; an older and a newer file of the same library.
    _shared_object(site / "nvidia" / "cusparse" / "lib" / "libcusparse.so.12", "int a(void) { return 0; }\n")
    _shared_object(site / "nvidia" / "cusparse" / "lib" / "libcusparse.so.12.1", "int a(void) { return 0; }\n")
    layout = nvidia_wheels.find_layout([site])
    assert layout.library_dirs[:2] == (lib13, site / "nvidia" / "cudnn" / "lib")
    assert layout.include_dirs == (site / "nvidia" / "cu13" / "include",)
    out = tmp_path / "links"
    out.mkdir()
    (out / "libstale.so").symlink_to(lib13 / "libcublas.so.13")  # an earlier run's link: removed
    (out / "notes.txt").write_text("not ours")  # not a link: kept
    assert nvidia_wheels.main(["link-dir", "--site-packages", str(site), "--out", str(out),
                               "--require", "cublas", "cudnn"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["libcublas.so", "libcudnn.so", "libcusparse.so", "notes.txt"]
    assert (out / "libcusparse.so").resolve().name == "libcusparse.so.12.1"
    user = _shared_object(tmp_path / "libuser.so",
                          "int cublasCreate_v2(void);\nint go(void) { return cublasCreate_v2(); }\n",
                          f"-L{out}", "-lcublas")
    assert read_dynamic(user.read_bytes()).needed[0] == "libcublas.so.13"  # the soname, not the link's name


def test_link_dir_names_the_missing_wheel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site-packages"
    (site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (site / "nvidia" / "cu13" / "lib" / "libcurand.so.10").write_bytes(b"")
    code = nvidia_wheels.main(["link-dir", "--site-packages", str(site), "--out", str(tmp_path / "o"),
                               "--require", "curand", "cudnn"])
    assert code == nvidia_wheels.EXIT_TOOL
    err = capsys.readouterr().err
    assert "libcudnn.so.*" in err and "nvidia-cudnn-cu13" in err and "curand" not in err.split(";")[0]


# ------------------------------------------------------------------------------------------------ elf


@requires_gcc
def test_read_dynamic_soname_needed_runpath(tmp_path: Path) -> None:
    dep = _shared_object(tmp_path / "libdep.so.3", "int dep(void) { return 3; }\n", "-Wl,-soname,libdep.so.3")
    (tmp_path / "libdep.so").symlink_to(dep.name)
    mod = _shared_object(tmp_path / "mod.so", "int dep(void);\nint f(void) { return dep(); }\n",
                         "-Wl,-soname,mod.so", f"-L{tmp_path}", "-ldep", "-Wl,--enable-new-dtags",
                         "-Wl,-rpath,$ORIGIN/../../nvidia/cu13/lib:/opt/x")
    info = read_dynamic(mod.read_bytes())
    assert info.soname == "mod.so" and "libdep.so.3" in info.needed
    assert info.runpath == ("$ORIGIN/../../nvidia/cu13/lib", "/opt/x") and info.rpath == ()
    old = _shared_object(tmp_path / "old.so", "int g(void) { return 1; }\n", "-Wl,--disable-new-dtags",
                         "-Wl,-rpath,/opt/y")
    assert read_dynamic(old.read_bytes()).search_path == ("/opt/y",)
    with pytest.raises(ElfError):
        read_dynamic(b"#!/bin/sh\n")


# ------------------------------------------------------------------------------------------------ wheel_check


@requires_gcc
def test_wheel_check_finds_missing_modules_and_build_tree_run_paths(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    build = tmp_path / "tree" / "build" / "lgpatch" / "driver-stub"
    build.mkdir(parents=True)
    good = _shared_object(tmp_path / "good.so", "int a(void) { return 0; }\n", "-Wl,--enable-new-dtags",
                          "-Wl,-rpath,$ORIGIN/../../nvidia/cu13/lib:/usr/local/cuda/lib64")
    bad = _shared_object(tmp_path / "bad.so", "int b(void) { return 0; }\n", "-Wl,--enable-new-dtags",
                         f"-Wl,-rpath,$ORIGIN/../../nvidia/cu13/lib:{build}")
    wheel = tmp_path / "dist" / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(good, "cupy/core/core.cpython-311-x86_64-linux-gnu.so")
        zf.write(bad, "cupy/cuda/cudnn.cpython-311-x86_64-linux-gnu.so")
        zf.writestr("cupy/__init__.py", "")
        zf.writestr("pkg-1.0.data/data/include/x.so", "not a module")
    exts = wheel_check.extensions(wheel)
    assert [e.module for e in exts] == ["cupy.core.core", "cupy.cuda.cudnn"]
    # Absolute entries are refused by default (test_wheel_check_refuses_absolute_run_paths); allowed here, so that
    # the build-tree rule is what this test sees.
    ok = ["--dist", str(wheel.parent), "--require-runpath", "$ORIGIN/../../nvidia/cu13/lib", "--allow-absolute-runpath",
          "--expect", "cupy.core.core", "cupy.cuda.cudnn"]
    assert wheel_check.main(ok) == 0
    assert wheel_check.main([*ok, "cupy.cuda.cusolver"]) == wheel_check.EXIT_BUILD
    assert "missing extension modules: cupy.cuda.cusolver" in capsys.readouterr().err
    assert wheel_check.main(["--forbid-runpath-under", str(tmp_path / "tree"), *ok]) == wheel_check.EXIT_BUILD
    err = capsys.readouterr().err
    assert "cudnn" in err and "driver-stub" in err and "core.cpython" not in err
    assert wheel_check.main(["--dist", str(tmp_path / "nowhere")]) == wheel_check.EXIT_TOOL


@requires_gcc
def test_wheel_check_refuses_absolute_run_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the Chainer build left in its wheel before: the building Python's lib folder and the toolkit's lib64."""
    python_lib, cuda_lib = tmp_path / "pyenv" / "lib", tmp_path / "cuda" / "lib64"
    relative = _shared_object(tmp_path / "rel.so", "int a(void) { return 0; }\n", "-Wl,--enable-new-dtags",
                              "-Wl,-rpath,$ORIGIN/../../nvidia/cu13/lib:$ORIGIN")
    absolute = _shared_object(tmp_path / "abs.so", "int b(void) { return 0; }\n", "-Wl,--enable-new-dtags",
                              f"-Wl,-rpath,{python_lib}", f"-Wl,-rpath,$ORIGIN/../../nvidia/cu13/lib:{cuda_lib}")
    old_rpath = _shared_object(tmp_path / "old.so", "int c(void) { return 0; }\n", "-Wl,--disable-new-dtags",
                               "-Wl,-rpath,lib")
    dist = tmp_path / "dist"
    dist.mkdir()
    for name, members in (("good", [relative]), ("bad", [relative, absolute]), ("cwd", [old_rpath])):
        with zipfile.ZipFile(dist / f"{name}-1.0-cp311-cp311-linux_x86_64.whl", "w") as zf:
            for i, so in enumerate(members):
                zf.write(so, f"pkg/m{i}.cpython-311-x86_64-linux-gnu.so")
    check = ["--require-runpath", "$ORIGIN/../../nvidia/cu13/lib"]
    assert wheel_check.main(["--wheel", str(dist / "good-1.0-cp311-cp311-linux_x86_64.whl"), *check]) == 0
    capsys.readouterr()
    assert wheel_check.main(["--wheel", str(dist / "bad-1.0-cp311-cp311-linux_x86_64.whl"), *check]) == \
        wheel_check.EXIT_BUILD
    err = capsys.readouterr().err
    assert f"pkg/m1.cpython-311-x86_64-linux-gnu.so: run path entry {python_lib} is not $ORIGIN-relative" in err
    assert f"run path entry {cuda_lib} is not $ORIGIN-relative" in err and "pkg/m0" not in err
    # a relative entry that is not $ORIGIN is relative to the current folder: no better (DT_RPATH too)
    assert wheel_check.main(["--wheel", str(dist / "cwd-1.0-cp311-cp311-linux_x86_64.whl")]) == wheel_check.EXIT_BUILD
    assert "run path entry lib is not $ORIGIN-relative" in capsys.readouterr().err
    assert wheel_check.main(["--wheel", str(dist / "bad-1.0-cp311-cp311-linux_x86_64.whl"),
                             "--allow-absolute-runpath"]) == 0


def _wheel_with_metadata(path: Path, requires: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", "Name: torch", "Version: 1.5.0+lgpatch.cu130.sm90",
             *(f"Requires-Dist: {spec}" for spec in requires)]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("torch/__init__.py", "")
        zf.writestr("torch-1.5.0+lgpatch.cu130.sm90.dist-info/METADATA", "\n".join(lines) + "\n\nlong description\n")
    return path


def test_requirement_names_are_normalised_and_stripped_of_specifiers() -> None:
    assert wheel_check.requirement_name("nvidia-cublas<14,>=13.0") == "nvidia-cublas"
    assert wheel_check.requirement_name('Nvidia_CuDNN.cu13 >=9 ; extra == "gpu"') == "nvidia-cudnn-cu13"
    assert wheel_check.requirement_name("future") == "future"
    assert wheel_check.missing_requirements(["nvidia-cublas<14,>=13.0", "numpy"],
                                            ["nvidia_cublas", "nvidia-cufft"]) == ["nvidia-cufft"]


def test_wheel_check_expect_requires(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A wheel that loads CUDA libraries from pip wheels must require them: the check reads its METADATA."""
    good = _wheel_with_metadata(tmp_path / "good" / "torch-1.5.0-cp312-cp312-linux_x86_64.whl",
                                ["future", "nvidia-cublas<14,>=13.0", "nvidia-cudnn-cu13<10,>=9.0", "numpy"])
    bare = _wheel_with_metadata(tmp_path / "bare" / "torch-1.5.0-cp312-cp312-linux_x86_64.whl", ["future", "numpy"])
    expect = ["--expect-requires", "nvidia-cublas", "nvidia-cudnn-cu13"]
    assert wheel_check.main(["--wheel", str(good), *expect]) == 0
    assert "requires: future, nvidia-cublas<14,>=13.0, nvidia-cudnn-cu13<10,>=9.0, numpy" in capsys.readouterr().out
    assert wheel_check.main(["--wheel", str(bare), *expect]) == wheel_check.EXIT_BUILD
    assert "Requires-Dist lacks nvidia-cublas, nvidia-cudnn-cu13" in capsys.readouterr().err
    assert wheel_check.main(["--wheel", str(bare)]) == 0  # nothing expected: only reported
    no_metadata = tmp_path / "nometa" / "x-1.0-py3-none-any.whl"
    no_metadata.parent.mkdir()
    with zipfile.ZipFile(no_metadata, "w") as zf:
        zf.writestr("x/__init__.py", "")
    assert wheel_check.main(["--wheel", str(no_metadata), *expect]) == wheel_check.EXIT_BUILD
    assert "no *.dist-info/METADATA" in capsys.readouterr().err
