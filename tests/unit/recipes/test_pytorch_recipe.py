"""The pytorch-1.5.0-lms+cuda11 recipe as data, and the pure parts of `lgpatch verify` (configure_file emulation,
probe schema, the pristine-outcome rule). No git, no nvcc: see tests/integration for those."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from legacy_gpu_patch.build import verify
from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.config.schema import Ctx
from legacy_gpu_patch.config.verify_schema import VERIFY_SCHEMA
from legacy_gpu_patch.errors import ConfigError
from legacy_gpu_patch.ledger.plan import make_plan, resolve_params

REPO = Path(__file__).resolve().parents[3]
LMS_URL = ("https://raw.githubusercontent.com/IBM/pytorch-large-model-support/"
           "cf971a3ddbfe5643556d88be4d4723370d88c3fd/patches/pytorch_v1.5.0_large_model_support.patch")
LMS_SHA = "cef6859b0f9d7367240f097b89259759cca4ccf1e92c0a04e51cb1d31a868812"
PATCHSETS = ["cudnn8-version-header", "cusparse-spmm", "cudnn8-get-algorithm", "cudnn9-rnn",
             "gpudefs-arch-bound", "kernel-launch-check",
             "gcc13-includes", "caffe2-api-rename", "cmake4-arch-list", "cuda12-removals",
             "cuda12-nvtx3", "py312-distutils", "cuda13-removals", "cuda13-cxx17",
             "py312-frame-api", "pybind11-py312", "numpy2-descr", "setup-configured-build", "torch-wheel-rpath",
             "cudnn-tf32", "cudnn-tf32-on", "typeindex-nvcc", "caffe2-cccl3",
             "torch-wheel-requires", "cudnn9-version", "sparse-addmm-beta", "engine-exit-finalized",
             "cudnn-deterministic-fallback"]


@pytest.fixture(scope="module")
def recipe():
    return find_recipe("pytorch-lms", SearchPath.from_options())


def _selected(recipe, **given: str) -> list[str]:
    params = resolve_params(recipe, given)
    return [p.step.key for p in make_plan(recipe, params) if p.selected]


def test_alias_source_pin_and_parameters(recipe) -> None:
    assert recipe.name == "pytorch-1.5.0-lms+cuda11"
    assert "pytorch-lms" in recipe.aliases
    source = dataclasses.asdict(recipe.source)
    submodules = source.pop("submodules")
    assert source == {"url": "https://github.com/pytorch/pytorch", "ref": "v1.5.0",
                      "commit": "4ff3872a2099993bf7e8c588f7182f3df777205b"}
    # what a CUDA build needs, not all 31; never the 2019 CUB, which would shadow the CUB that CUDA >= 11 bundles
    assert len(submodules) == 11 and "third_party/protobuf" in submodules and "third_party/cub" not in submodules
    assert recipe.params["cuda"].default == "11.1"
    assert recipe.params["arch"].default == "sm_86"
    assert {"sm_80", "sm_86", "sm_89", "sm_90"} <= {str(c) for c in recipe.params["arch"].choices}
    for bad in ("10.2", "14.0"):
        with pytest.raises(ConfigError, match="outside the allowed range"):
            resolve_params(recipe, {"cuda": bad})


def test_lms_is_the_first_step_pinned_by_sha256(recipe) -> None:
    first = recipe.entries[0].step
    assert first is not None and first.id == "ibm-lms" and first.kind == "url-patch"
    assert first.body.url == LMS_URL
    assert first.body.sha256 == LMS_SHA


def test_patchsets_in_order(recipe) -> None:
    assert [e.patchset.name for e in recipe.entries[1:]] == PATCHSETS


def test_cuda_11_and_13_get_what_they_need(recipe) -> None:
    cu11 = _selected(recipe, cuda="11.1", arch="sm_86")
    cu13 = _selected(recipe, cuda="13.0", arch="sm_90")
    assert cu11[0] == cu13[0] == "recipe/ibm-lms"
    assert "cusparse-spmm/spmm-generic-api" in cu11
    assert not [k for k in cu11 if k.startswith(("cuda12-removals/", "cuda12-nvtx3/", "cuda13-cxx17/"))]
    assert "cuda12-nvtx3/nvtx3-header" in cu13 and "py312-distutils/site-packages-sysconfig" in cu11
    assert "cuda12-removals/device-prop-attributes" in cu13
    assert "cuda13-cxx17/nvcc-cxx17" in cu13
    assert set(cu11) < set(cu13)
    # CUDA 12.x: the removals yes, C++17 for CCCL 3 not yet.
    cu12 = _selected(recipe, cuda="12.4", arch="sm_90")
    assert "cuda12-removals/profiler-initialize" in cu12 and "cuda13-cxx17/nvcc-cxx17" not in cu12


def test_tf32_parameter_defaults_off(recipe) -> None:
    assert recipe.params["tf32"].default is False
    off = _selected(recipe, cuda="13.0", arch="sm_90")
    on = _selected(recipe, cuda="13.0", arch="sm_90", tf32="true")
    assert "cudnn-tf32/fp32-math-type" in off and "cudnn-tf32-on/default-on" not in off
    assert set(on) - set(off) == {"cudnn-tf32-on/default-on"}
    assert "caffe2-cccl3/cub-functors" in off and "caffe2-cccl3/cub-functors" not in _selected(recipe, cuda="12.4")


def test_build_makes_a_wheel_with_portable_run_paths(recipe) -> None:
    commands = {c.name: list(c.argv) for c in recipe.build.commands}  # typed: BuildCommand, argv a tuple
    configure = commands["configure"]
    assert configure[:5] == ["cmake", "-S", ".", "-B", "build"]  # setup.py's build folder: bdist_wheel reuses it
    assert "-DCMAKE_INSTALL_PREFIX=${workdir}/torch" in configure
    assert "-DLGPATCH_WHEEL_RPATH=$$ORIGIN/../../nvidia/cu13/lib;$$ORIGIN/../../nvidia/cudnn/lib" in configure
    assert "-DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON" in configure
    names = list(commands)
    assert names.index("pybind11-py312") < names.index("configure") < names.index("build") < names.index("wheel")
    assert "setup.py bdist_wheel -d dist" in commands["wheel"][2]
    assert "1.5.0+lgpatch.cu${cuda//./}.$label" in commands["wheel"][2] and "${arch_label}" in commands["wheel"]
    assert "--forbid-runpath-under" in commands["check-wheel"][2]


def test_configure_turns_off_use_rocm_whose_default_is_not_idempotent(recipe) -> None:
    # USE_ROCM defaults to ON in v1.5.0's CMakeLists.txt; left so, the first configure adds the ROCm include folders
    # to every target after cmake/Dependencies.cmake:1062 and the second does not: ninja rebuilt 1225 of 2096 edges
    # on the H200 (tests/integration/recipes/test_pytorch_reconfigure.py configures the real tree twice)
    configure = next(list(c.argv) for c in recipe.build.commands if c.name == "configure")
    assert "-DUSE_ROCM=OFF" in configure and "-DUSE_CUDA=ON" in configure


def test_the_cuda13_wheel_requires_the_library_wheels_it_loads(recipe) -> None:
    """torch-wheel-requires: one list, in the build's env, which the wheel command's setup.py declares and
    check-wheel-requires expects of the built wheel (CUDA >= 13)."""
    from legacy_gpu_patch.tools.wheel_check import requirement_name

    commands = {c.name: c for c in recipe.build.commands}
    declared = recipe.build.env["LGPATCH_INSTALL_REQUIRES"].split()
    assert "LGPATCH_INSTALL_REQUIRES" not in commands["wheel"].env  # no second copy to drift
    assert commands["check-wheel-requires"].argv[2].split("--expect-requires", 1)[1].split() == [
        "$LGPATCH_INSTALL_REQUIRES"]
    names = [requirement_name(d) for d in declared]
    assert "nvidia-cudnn-cu13" in names and "nvidia-cublas" in names
    assert all(("<" in d and ">=" in d) for d in declared)  # a major range each: no unbounded pin
    assert "torch-wheel-requires/install-requires-env" in _selected(recipe, cuda="13.0", arch="sm_90")
    assert "torch-wheel-requires/install-requires-env" not in _selected(recipe, cuda="11.1", arch="sm_86")


def test_every_patchset_has_readme_mirrors_and_our_own_patches(recipe) -> None:
    for entry in recipe.entries[1:]:
        ps = entry.patchset
        readme = (ps.path / "README.md").read_text(encoding="utf-8")
        assert any(h in readme for h in ("**Problem", "**What", "**Decision")), ps.name
        assert "**Proof" in readme, ps.name
        assert ps.mirrors, ps.name
        for step in ps.steps:
            # No backports: the issue allows either, and ours are the smaller, proven ones.
            assert step.kind in ("patch", "insert", "regex"), step.key


def test_caffe2_api_decision_is_aliases_not_a_rename(recipe) -> None:
    ps = next(e.patchset for e in recipe.entries[1:] if e.patchset.name == "caffe2-api-rename")
    assert [s.kind for s in ps.steps] == ["insert"]
    body = ps.steps[0].body
    assert body.file == "c10/macros/Export.h"  # the seed's "Exports.h" does not exist
    text = body.text
    assert "#define TORCH_API CAFFE2_API" in text
    assert "#define TORCH_CUDA_CU_API TORCH_CUDA_API" in text
    assert "CAFFE2_USED" not in text  # the seed's rename target is __attribute__((__used__)), not an export


def test_gpudefs_patch_has_no_upper_bound() -> None:
    patch = (REPO / "patchsets/gpudefs-arch-bound/warp-size-all-archs.patch").read_text(encoding="utf-8")
    added = [ln for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    code = [ln for ln in added if not ln[1:].lstrip().startswith("//")]
    assert not [ln for ln in code if "__CUDA_ARCH__ <=" in ln or "#error" in ln]
    assert "-#if __CUDA_ARCH__ <= 750" in patch


def test_verify_probes_cover_the_seed_errors(recipe) -> None:
    probes = {p.name: p for p in recipe.verify}
    assert probes["gpudefs-warp-size"].unpatched == "fail"
    assert "Unknown __CUDA_ARCH__" in (probes["gpudefs-warp-size"].expect_error or "")
    assert probes["sparse-cuda-blas"].expect_error == 'identifier "cusparseScsrmm2" is undefined'
    assert "cusparse.h" in probes["sparse-cuda-blas"].requires
    # CMake scripts are listed with a reason, not silently left out.
    assert all(p.skip for p in recipe.verify if p.file.endswith(".cmake"))


# ------------------------------------------------------------------------------------------ configure_file


def test_configure_file_emulates_cmake() -> None:
    template = (
        "#cmakedefine ON_FLAG\n#cmakedefine OFF_FLAG\n#cmakedefine UNSET\n#cmakedefine WITH_VALUE @V@\n"
        "#cmakedefine01 YES01\n#cmakedefine01 NO01\n#define A @A@\n#define B \"${B}\"\n#define C @MISSING@x\n"
        "  #  cmakedefine INDENTED\n#cmakedefine NOTFOUND_LIB\n"
    )
    out = verify.configure_file(template, {"ON_FLAG": True, "OFF_FLAG": "OFF", "WITH_VALUE": "yes", "V": 7,
                                           "YES01": 1, "NO01": "", "A": 0, "B": "text", "INDENTED": "ON",
                                           "NOTFOUND_LIB": "cudnn-NOTFOUND"})
    assert out.splitlines() == [
        "#define ON_FLAG", "/* #undef OFF_FLAG */", "/* #undef UNSET */", "#define WITH_VALUE 7",
        "#define YES01 1", "#define NO01 0", "#define A 0", '#define B "text"', "#define C x",
        "  #  define INDENTED", "/* #undef NOTFOUND_LIB */",
    ]


def test_configure_file_keeps_line_endings() -> None:
    assert verify.configure_file("#cmakedefine X\r\nint y;\r\n", {"X": 1}) == "#define X\r\nint y;\r\n"


# ------------------------------------------------------------------------------------------ probe schema


def _validate(probes):
    return VERIFY_SCHEMA.validate(probes, Ctx("recipe.yaml", "verify", 1))


def test_probe_schema_defaults_and_setup_kinds() -> None:
    (p,) = _validate([{"name": "a", "file": "x.cu", "include": [".", "${gen}", "${gen}/aten"],
                       "setup": [{"configure": {"in": "a.h.in", "out": "a.h"}}, {"run": ["${python}", "g.py"]}]}])
    assert p["lang"] == "cuda" and p["unpatched"] == "any" and p["requires"] == []
    assert p["setup"][0]["configure"]["define"] == {}


@pytest.mark.parametrize("probe, message", [
    ({"name": "a", "file": "x.cu", "include": ["/usr/include"]}, "relative"),
    ({"name": "a", "file": "x.cu", "include": ["${gen}/../x"]}, "'..'"),
    ({"name": "a", "file": "x.cu", "setup": [{"shell": "make"}]}, "setup step"),
    ({"name": "a", "file": "x.cu", "unpatched": "maybe"}, "unpatched"),
    ({"name": "a", "file": "x.cu", "snipet": "int x;"}, "snippet"),
])
def test_probe_schema_rejects(probe, message) -> None:
    with pytest.raises(ConfigError, match=message):
        _validate([probe])


# ------------------------------------------------------------------------------------------ outcome rule


def _compiled(ok: bool, output: str = "") -> verify.Compiled:
    return verify.Compiled(ok, 0 if ok else 1, ("cc",), output, None if ok else output.splitlines()[0])


def test_pristine_must_fail_with_the_declared_error() -> None:
    probe = ("fail", r'identifier "cusparseScsrmm2" is undefined')  # unpatched, expect_error
    assert verify._check_pristine(*probe, _compiled(False, 'x.cu(112): error: identifier "cusparseScsrmm2" '
                                                           "is undefined")) is None
    assert "not with" in verify._check_pristine(*probe, _compiled(False, "fatal error: cusparse.h: No such file"))
    assert "compiles" in verify._check_pristine(*probe, _compiled(True))


def test_pristine_pass_and_any() -> None:
    assert verify._check_pristine("pass", None, _compiled(True)) is None
    assert "expected to compile" in verify._check_pristine("pass", None, _compiled(False, "error: x"))
    assert verify._check_pristine("any", None, _compiled(False, "error: x")) is None


def test_wheel_include_dirs(tmp_path: Path) -> None:
    for sub in ("cu13/include", "cudnn/include", "cudnn/lib"):
        (tmp_path / "nvidia" / sub).mkdir(parents=True)
    found = verify.wheel_include_dirs([tmp_path, tmp_path / "absent"])
    assert found == [tmp_path / "nvidia/cu13/include", tmp_path / "nvidia/cudnn/include"]
