"""Build variables, MAX_JOBS, and the planning of a recipe's build commands (when:, ${...}, environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from legacy_gpu_patch.build.options import BuildRequest, InstalledToolkit, resolve_options
from legacy_gpu_patch.build.run import base_env, plan_commands
from legacy_gpu_patch.build.vars import (
    GIB,
    BuildVars,
    default_jobs,
    explicit_jobs,
    make_build_vars,
    mem_available,
)
from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.cuda.archflags import flags_for
from legacy_gpu_patch.errors import ConfigError, ToolError

# --------------------------------------------------------------------------------------------- MAX_JOBS


def test_jobs_is_min_of_cores_and_memory() -> None:
    assert default_jobs(cores=16, available=int(20 * GIB)).jobs == 15  # 20 / 1.3 = 15.4 (tools/jobs.py)
    assert default_jobs(cores=2, available=int(100 * GIB)).jobs == 2
    low = default_jobs(cores=8, available=int(1 * GIB))
    assert low.jobs == 1 and "limited by memory" in low.reason
    assert "8 cores" in str(low) and "1.0 GiB available" in str(low) and str(low).startswith("MAX_JOBS=1 ")
    unknown = default_jobs(cores=4, available=None)
    assert unknown.jobs == 4 and "unknown" in unknown.reason


def test_explicit_jobs() -> None:
    assert explicit_jobs(3).jobs == 3
    with pytest.raises(ConfigError):
        explicit_jobs(0)


def test_mem_available_reads_meminfo_and_cgroup(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemFree:  1000 kB\nMemAvailable:   20971520 kB\n")
    cg = tmp_path / "cg"
    cg.mkdir()
    assert mem_available(meminfo, cg) == 20 * GIB  # no cgroup files: MemAvailable
    (cg / "memory.max").write_text("max\n")
    assert mem_available(meminfo, cg) == 20 * GIB
    (cg / "memory.max").write_text(str(8 * GIB) + "\n")
    (cg / "memory.current").write_text(str(3 * GIB) + "\n")
    assert mem_available(meminfo, cg) == 5 * GIB  # a container's limit is lower than the host's MemAvailable
    assert mem_available(tmp_path / "nope", tmp_path / "nope") is None


def test_real_meminfo_is_readable() -> None:
    avail = mem_available()
    assert avail is None or avail > 0


# --------------------------------------------------------------------------------------------- rendering


def make_vars(**kw: object) -> BuildVars:
    args: dict[str, object] = dict(
        python="/usr/bin/python3", site_packages="/sp", jobs=4, workdir=Path("/tree"),
        cuda_home=Path("/usr/local/cuda"), arch_flags=flags_for(["sm_86", "sm_90+ptx"]), targets=("c10", "c10_cuda"),
        launcher=None,
    )
    args.update(kw)
    return make_build_vars({"cuda": "13.0", "arch": "sm_86", "cudnn": True}, **args)  # type: ignore[arg-type]


def test_render_argv_splices_lists_and_substitutes() -> None:
    v = make_vars()
    argv = v.render_argv(["nvcc", "${nvcc_gencode}", "-DARCH=${torch_cuda_arch_list}", "-j${jobs}", "$${HOME}",
                          "${cudnn}", "--target", "${targets}"], env={})
    assert argv == ["nvcc", "-gencode=arch=compute_86,code=sm_86", "-gencode=arch=compute_90,code=sm_90",
                    "-gencode=arch=compute_90,code=compute_90", "-DARCH=8.6;9.0+PTX", "-j4", "${HOME}", "true",
                    "--target", "c10", "c10_cuda"]


def test_empty_list_drops_the_option_before_it() -> None:
    v = make_vars(targets=())
    assert v.render_argv(["cmake", "--build", "b", "--target", "${targets}", "--parallel", "${jobs}"], env={}) == \
        ["cmake", "--build", "b", "--parallel", "4"]
    assert v.render_argv(["ninja", "${targets}"], env={}) == ["ninja"]


def test_env_values_join_lists_and_read_env() -> None:
    v = make_vars()
    env = v.render_env({"PATH": "${cuda_home}/bin:${env:PATH}", "FLAGS": "${nvcc_gencode}", "X": "${env:PATH}-2",
                        "UNSET": "[${env:NOPE_NOT_SET}]"}, base={"PATH": "/usr/bin"})
    assert env["PATH"] == "/usr/local/cuda/bin:/usr/bin"
    assert env["FLAGS"].count("-gencode=") == 3 and " " in env["FLAGS"]
    assert env["X"] == "/usr/local/cuda/bin:/usr/bin-2"  # later values see earlier ones
    assert env["UNSET"] == "[]"


def test_unknown_variable_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"unknown build variable \$\{cuda_hom\} \(did you mean 'cuda_home'\?\)"):
        make_vars().render("${cuda_hom}/bin", env={}, where="build.env.PATH")


def test_missing_values_say_why() -> None:
    v = make_vars(cuda_home=None, arch_flags=None)
    with pytest.raises(ConfigError, match="no CUDA toolkit was found"):
        v.render("${cuda_home}", env={})
    with pytest.raises(ConfigError, match="pass --arch"):
        v.render_argv(["${nvcc_gencode}"], env={})


# --------------------------------------------------------------------------------------------- planning

RECIPE = """\
name: demo
description: A demo recipe for build planning.
source:
  sdist: {url: "https://example.invalid/demo-1.0.tar.gz", sha256: "%s"}
parameters:
  cuda: {type: version, default: "13.0"}
  arch: {type: arch, default: sm_90}
  cudnn: {type: bool, default: true}
steps:
  - id: arch-guard
    when: {arch: ">=sm_80"}
    insert: {file: a.h, text: "// guard\\n", at: end}
build:
  env:
    PATH: "${cuda_home}/bin:${env:PATH}"
    CPATH: "${site_packages}/nvidia/cu13/include"
  commands:
    - name: configure
      phase: configure
      argv: [cmake, -S, ., -B, build, "-DCMAKE_CUDA_ARCHITECTURES=${cmake_cuda_architectures}"]
    - name: compile
      argv: [cmake, --build, build, --target, "${targets}", --parallel, "${jobs}"]
      env: {EXTRA: "${arch}-${cuda}"}
    - name: without-cudnn
      phase: wheel
      when: {cudnn: false}
      argv: ["${python}", -c, "pass"]
  wheel_dir: dist
""" % ("0" * 64)


@pytest.fixture()
def recipe(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "demo.yaml"
    path.write_text(RECIPE, encoding="utf-8")
    return load_recipe(path, SearchPath((tmp_path,), (tmp_path,)))


TOOLKIT = InstalledToolkit(Path("/opt/cuda-13.0"), "13.0")
PARAMS = {"cuda": "13.0", "arch": "sm_90", "cudnn": True}


def test_plan_evaluates_when_and_renders(tmp_path: Path, recipe) -> None:  # type: ignore[no-untyped-def]
    opts = resolve_options(tmp_path, recipe, PARAMS, BuildRequest(jobs=3, targets=("c10",), toolkit=TOOLKIT,
                                                                  env={"PATH": "/usr/bin"}))
    plan = plan_commands(opts, env={"PATH": "/usr/bin", "HOME": "/home/u"})
    assert [c.name for c in plan] == ["configure", "compile", "without-cudnn"]
    configure, compile_, wheel = plan
    assert configure.argv[-1] == "-DCMAKE_CUDA_ARCHITECTURES=90-real" and configure.phase == "configure"
    assert compile_.argv == ("cmake", "--build", "build", "--target", "c10", "--parallel", "3")
    assert compile_.env["EXTRA"] == "sm_90-13.0" and compile_.env["HOME"] == "/home/u"
    assert compile_.env["PATH"].startswith("/opt/cuda-13.0/bin:")
    assert compile_.env["CPATH"].endswith("/nvidia/cu13/include")
    assert compile_.env["MAX_JOBS"] == "3" and compile_.env["CUDA_HOME"] == "/opt/cuda-13.0"
    assert compile_.env["TORCH_CUDA_ARCH_LIST"] == "9.0" and compile_.env["CUDAARCHS"] == "90-real"
    assert compile_.env["CUDACXX"] == "/opt/cuda-13.0/bin/nvcc"
    assert compile_.cwd == tmp_path.resolve()
    assert not wheel.selected and "cudnn=True does not match False" in wheel.reason


def test_arch_option_overrides_and_host_compiler_and_launcher(tmp_path: Path, recipe) -> None:  # type: ignore[no-untyped-def]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("ccache", "g++-12", "gcc-12"):
        exe = bindir / tool
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    env = {"PATH": str(bindir)}
    opts = resolve_options(tmp_path, recipe, PARAMS, BuildRequest(
        archs=("sm_86,sm_90+ptx",), launcher="ccache", cc="gcc-12", cxx="g++-12", toolkit=TOOLKIT, env=env, jobs=2))
    e = base_env(opts, env)
    assert e["TORCH_CUDA_ARCH_LIST"] == "8.6;9.0+PTX" and e["CUDAARCHS"] == "86-real;90"
    assert e["CMAKE_CUDA_COMPILER_LAUNCHER"] == str(bindir / "ccache")
    assert e["CMAKE_CXX_COMPILER_LAUNCHER"] == e["CMAKE_C_COMPILER_LAUNCHER"]
    assert (e["CC"], e["CXX"], e["CUDAHOSTCXX"], e["NVCC_CCBIN"]) == ("gcc-12", "g++-12", "g++-12", "g++-12")
    assert any(n.startswith("MAX_JOBS=2") for n in opts.notes)
    with pytest.raises(ToolError, match="sccache is not on PATH"):
        resolve_options(tmp_path, recipe, PARAMS, BuildRequest(launcher="sccache", toolkit=TOOLKIT, env=env))


def test_building_for_params_that_patch_differently_is_refused(tmp_path: Path, recipe) -> None:  # type: ignore[no-untyped-def]
    # sm_86 selects the same steps as the applied sm_90: fine. sm_75 would not get arch-guard.
    resolve_options(tmp_path, recipe, PARAMS, BuildRequest(archs=("sm_86",), toolkit=TOOLKIT))
    with pytest.raises(ConfigError, match=r"patched for arch=sm_90; arch=sm_75 .*must not have recipe/arch-guard"):
        resolve_options(tmp_path, recipe, PARAMS, BuildRequest(archs=("sm_75",), toolkit=TOOLKIT))


def test_report_dir_defaults_inside_git(tmp_path: Path, recipe) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".git").mkdir()
    opts = resolve_options(tmp_path, recipe, PARAMS, BuildRequest(toolkit=TOOLKIT))
    assert opts.report_dir == (tmp_path / ".git" / "lgpatch" / "build").resolve()
    assert opts.log_path == opts.report_dir / "build.log"
