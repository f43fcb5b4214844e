"""doctor: detection from recorded nvidia-smi / NVML answers, the verdict, recipe checks, and this real machine."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import Runner

from legacy_gpu_patch.cuda import doctor
from legacy_gpu_patch.cuda import targets as planner
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo
from legacy_gpu_patch.errors import ExitCode

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "doctor"
REAL_NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc")
                                     else None)
needs_nvcc = pytest.mark.skipif(REAL_NVCC is None, reason="nvcc not installed on this machine")

TINY_RECIPE = """\
name: tiny-cuda
description: a recipe for doctor's tests
source:
  sdist: {name: tiny, version: "1.0", sha256: "%s"}
parameters:
  cuda: {type: version, default: "13.0", allowed: ">=8.0,<14"}
  arch: {type: arch, default: sm_90}
steps:
  - id: note
    insert: {file: README, at: end, text: "patched\\n"}
""" % ("0" * 64)


# --------------------------------------------------------------------------------------------- recorded tools


def fake_nvidia_smi(tmp_path: Path, fixture: str) -> Path:
    """A bin folder whose nvidia-smi answers as the recorded machine did (a real process, recorded output)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"rec = json.load(open({str(FIXTURES / fixture)!r}))['queries']\n"
        "q = next((a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--query-gpu=')), '')\n"
        "r = rec.get(q) or rec.get('*') or {'returncode': 2, 'output': 'bad query'}\n"
        "sys.stdout.write(r['output'])\n"
        "sys.exit(r['returncode'])\n"
    )
    script.chmod(0o755)
    return bindir


class RecordedNvml:
    """pynvml's functions answering from a recorded fixture."""

    def __init__(self, fixture: str) -> None:
        self.rec = json.loads((FIXTURES / fixture).read_text())
        self.shut = False

    def _s(self, text: str) -> Any:
        return text.encode() if self.rec.get("bytes_strings") else text

    def nvmlInit(self) -> None:
        if "init_error" in self.rec:
            raise RuntimeError(self.rec["init_error"])

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> Any:
        return self._s(self.rec["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self.rec["cuda_driver_version"])

    def nvmlDeviceGetCount(self) -> int:
        return len(self.rec["devices"])

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        return self.rec["devices"][i]

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> Any:
        return self._s(h["name"])

    def nvmlDeviceGetCudaComputeCapability(self, h: dict[str, Any]) -> tuple[int, int]:
        return tuple(h["cc"])  # type: ignore[return-value]

    def nvmlDeviceGetMemoryInfo(self, h: dict[str, Any]) -> Any:
        return type("Mem", (), {"total": h["memory_total"]})()

    def nvmlDeviceGetUUID(self, h: dict[str, Any]) -> Any:
        return self._s(h["uuid"])


def env_with(bindir: Path | None, tmp_path: Path) -> dict[str, str]:
    path = os.environ.get("PATH", "")
    if REAL_NVCC:
        path = os.pathsep.join([path, os.path.dirname(REAL_NVCC)])
    return {"PATH": (str(bindir) + os.pathsep + path) if bindir else path, "HOME": str(tmp_path / "home")}


# --------------------------------------------------------------------------------------------- detection


def test_nvidia_smi_h200(tmp_path: Path) -> None:
    scan = doctor.scan_nvidia_smi(env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-h200-580.json"), tmp_path))
    assert scan.source == "nvidia-smi" and scan.error is None
    assert scan.driver == "580.95.05" and scan.driver_cuda == "13.0"
    (gpu,) = scan.gpus
    assert (gpu.name, gpu.cc, gpu.number, gpu.memory_mib, gpu.cc_source) == ("NVIDIA H200", "9.0", 90, 143771,
                                                                             "reported")


def test_nvidia_smi_without_compute_cap_field(tmp_path: Path) -> None:
    scan = doctor.scan_nvidia_smi(env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-rtx3090-470.json"), tmp_path))
    (gpu,) = scan.gpus
    assert (gpu.name, gpu.cc, gpu.cc_source) == ("NVIDIA GeForce RTX 3090", "8.6", "from name")
    assert scan.driver == "470.182.03" and scan.driver_cuda == "11.4"


def test_nvidia_smi_no_driver(tmp_path: Path) -> None:
    scan = doctor.scan_nvidia_smi(env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-no-gpu.json"), tmp_path))
    assert scan.gpus == ()
    assert "couldn't communicate with the NVIDIA driver" in scan.error


def test_no_nvidia_smi_at_all(tmp_path: Path) -> None:
    scan = doctor.scan_nvidia_smi({"PATH": str(tmp_path)})
    assert scan.source == "none" and "nvidia-smi not found" in scan.error


def test_nvml_h200() -> None:
    nvml = RecordedNvml("nvml-h200-580.json")
    scan = doctor.scan_nvml(nvml)
    assert nvml.shut
    assert (scan.source, scan.driver, scan.driver_cuda) == ("nvml", "580.95.05", "13.0")
    assert scan.gpus[0].cc == "9.0" and scan.gpus[0].memory_mib == 143771


def test_nvml_old_bindings_return_bytes() -> None:
    scan = doctor.scan_nvml(RecordedNvml("nvml-rtx3090-470.json"))
    assert scan.gpus[0].name == "NVIDIA GeForce RTX 3090"
    assert scan.driver == "470.182.03" and scan.driver_cuda == "11.4"


def test_nvml_without_driver_falls_back_to_nvidia_smi(tmp_path: Path) -> None:
    assert "Driver Not Loaded" in doctor.scan_nvml(RecordedNvml("nvml-no-driver.json")).error
    env = env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-no-gpu.json"), tmp_path)
    scan = doctor.scan_gpus(env, RecordedNvml("nvml-no-driver.json"))
    assert scan.gpus == ()
    assert "Driver Not Loaded" in scan.error and "nvidia-smi" in scan.error


@pytest.mark.parametrize(
    ("name", "cc"),
    [("NVIDIA GeForce RTX 3090", "8.6"), ("Quadro RTX 6000", "7.5"), ("Quadro P6000", "6.1"),
     ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("NVIDIA H200", "9.0"), ("Tesla V100-SXM2-32GB", "7.0"),
     ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA GeForce RTX 5090", "12.0"), ("Tesla T4", "7.5"),
     ("Some Future GPU", None)],
)
def test_cc_from_name(name: str, cc: str | None) -> None:
    assert doctor.cc_from_name(name) == cc


def test_cudnn_headers(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    (new / "cudnn_version.h").write_text("#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n")
    (new / "cudnn.h").write_text('#include "cudnn_version.h"\n')  # cuDNN 8: no macros in cudnn.h
    (old / "cudnn.h").write_text("#define CUDNN_MAJOR      7\n#define CUDNN_MINOR      6\n#define CUDNN_PATCHLEVEL 5\n")
    found = doctor.scan_cudnn([new, old])
    assert [(f["version"], Path(f["header"]).name) for f in found] == [("8.9.7", "cudnn_version.h"),
                                                                      ("7.6.5", "cudnn.h")]
    findings = doctor.cudnn_findings(found)
    assert "cudnn8-version-header" in findings[0].message and findings[1].severity == doctor.OK


# --------------------------------------------------------------------------------------------- verdicts


def nvcc_info(version: str = "11.8", path: str = "/opt/cuda-11.8/bin/nvcc") -> NvccInfo:
    return NvccInfo(path, path, ("PATH",), version=version, full_version=version + ".89")


def test_compiler_rejected_with_fixes() -> None:
    host = doctor.Compiler("g++", "/usr/bin/g++", "12.2.0", "gcc")
    alt = doctor.Compiler("g++-11", "/usr/bin/g++-11", "11.4.0", "gcc")
    (f,) = doctor.compiler_findings(nvcc_info("11.8"), {"gcc_max": "11", "source": "table"}, host, [host, alt])
    assert f.severity == doctor.ERROR
    assert "rejects host g++ 12.2.0" in f.message
    assert "-ccbin /usr/bin/g++-11" in f.fix and "-allow-unsupported-compiler" in f.fix
    (f,) = doctor.compiler_findings(nvcc_info("10.2"), {"gcc_max": "8"}, host, [host])
    assert "install g++-8" in f.fix and "allow-unsupported" not in f.fix  # nvcc 10.2 has no such flag
    (f,) = doctor.compiler_findings(nvcc_info("11.8"), {"gcc_max": "11"}, alt, [alt])
    assert f.severity == doctor.OK


def test_cmake4_finding() -> None:
    (f,) = doctor.cmake_findings({"version": "4.0.2"})
    assert f.severity == doctor.WARN and "CMAKE_POLICY_VERSION_MINIMUM=3.5" in f.fix
    assert doctor.cmake_findings({"version": "3.25.1"})[0].severity == doctor.OK


def test_host_config_limits_parsing() -> None:
    from legacy_gpu_patch.cuda.nvcc_probe import parse_host_config

    text = ("#if __GNUC__ > 11\n#error -- unsupported GNU version! gcc versions later than 11 are not supported! "
            "The nvcc flag '-allow-unsupported-compiler' can be used\n#endif\n"
            "#error -- unsupported clang version! clang version must be less than 15 and greater than 3.2 .\n")
    assert parse_host_config(text) == {"gcc_max": "11", "clang_max": "14"}
    assert parse_host_config("#error -- unsupported GNU version! gcc versions later than 5.3 are not supported!") \
        == {"gcc_max": "5.3"}


@needs_nvcc
def test_h200_machine_verdict(tmp_path: Path) -> None:
    env = env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-h200-580.json"), tmp_path)
    report = doctor.diagnose(env=env, nvml=False, with_recipes=False)
    assert report.gpus.gpus[0].number == 90
    plans = {p.toolkit: p for _n, _g, p in report.plans}
    p = plans["13.0"]
    assert p.status == planner.NATIVE and p.source == "nvcc"
    assert p.driver.status == planner.DRIVER_OK
    data = json.loads(json.dumps(report.to_json()))
    assert data["plans"][0]["flags"]["nvcc_gencode"] == ["-gencode=arch=compute_90,code=sm_90"]
    assert data["ok"] is True


@needs_nvcc
def test_old_driver_cannot_run_cuda13(tmp_path: Path) -> None:
    env = env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-rtx3090-470.json"), tmp_path)
    report = doctor.diagnose(env=env, nvml=False, with_recipes=False)
    p = next(p for _n, _g, p in report.plans if p.toolkit == "13.0")
    assert p.status == planner.NATIVE  # nvcc 13 knows sm_86 ...
    assert p.driver.status == planner.DRIVER_REFUSE  # ... but driver 470 (CUDA 11.4) cannot run CUDA 13
    errors = [f for f in report.findings if f.severity == doctor.ERROR and f.topic == "driver"]
    assert errors and "580" in errors[0].message
    assert report.to_json()["ok"] is False


@needs_nvcc
def test_no_gpu_still_checks_the_toolchain(tmp_path: Path) -> None:
    env = env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-no-gpu.json"), tmp_path)
    report = doctor.diagnose(env=env, nvml=False, with_recipes=False)
    assert report.gpus.gpus == () and report.plans == []
    assert any(f.topic == "gpu" and "checking the toolchain only" in f.message for f in report.findings)
    assert any(f.topic == "nvcc" and f.severity == doctor.OK for f in report.findings)
    assert any(f.topic == "compiler" for f in report.findings)


@needs_nvcc
def test_recipe_check(tmp_path: Path) -> None:
    from legacy_gpu_patch.config.recipe import SearchPath, load_recipe

    (tmp_path / "tiny-cuda.yaml").write_text(TINY_RECIPE)
    recipe = load_recipe(tmp_path / "tiny-cuda.yaml", SearchPath.from_options([tmp_path]))
    env = env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-h200-580.json"), tmp_path)
    ok = doctor.diagnose(env=env, nvml=False, recipe=recipe, recipe_params={"cuda": "13.0", "arch": "sm_90"},
                         with_recipes=False)
    assert ok.recipe_check["ok"], ok.recipe_check
    wrong_arch = doctor.diagnose(env=env, nvml=False, recipe=recipe,
                                 recipe_params={"cuda": "13.0", "arch": "sm_86"}, with_recipes=False)
    assert not wrong_arch.recipe_check["ok"]
    assert any("does not run on GPU 0" in p and "arch=sm_90" in p for p in wrong_arch.recipe_check["problems"])
    ptx_arch = doctor.diagnose(env=env, nvml=False, recipe=recipe,
                               recipe_params={"cuda": "13.0", "arch": "sm_80+ptx"}, with_recipes=False)
    assert ptx_arch.recipe_check["ok"]
    assert any("PTX JIT" in w for w in ptx_arch.recipe_check["warnings"])
    missing = doctor.diagnose(env=env, nvml=False, recipe=recipe, recipe_params={"cuda": "11.8"},
                              with_recipes=False)
    assert any("no nvcc 11.8" in p for p in missing.recipe_check["problems"])


@needs_nvcc
def test_recipes_fit(tmp_path: Path) -> None:
    from legacy_gpu_patch.config.recipe import SearchPath

    (tmp_path / "tiny-cuda.yaml").write_text(TINY_RECIPE)
    (tmp_path / "broken.yaml").write_text("name: broken\n")
    env = env_with(fake_nvidia_smi(tmp_path, "nvidia-smi-h200-580.json"), tmp_path)
    report = doctor.diagnose(env=env, nvml=False, search=SearchPath((tmp_path,), ()))
    by_name = {r["name"]: r for r in report.recipes}
    assert by_name["tiny-cuda"]["fits"] is True
    assert by_name["tiny-cuda"]["cuda_versions"] == ["13.0"]
    assert by_name["broken"]["fits"] is False and "invalid recipe" in by_name["broken"]["reasons"][0]
    # the same recipe on an RTX 3090 whose R470 driver cannot run CUDA 13
    old = tmp_path / "old"
    old.mkdir()
    env = env_with(fake_nvidia_smi(old, "nvidia-smi-rtx3090-470.json"), tmp_path)
    report = doctor.diagnose(env=env, nvml=False, search=SearchPath((tmp_path,), ()))
    tiny = next(r for r in report.recipes if r["name"] == "tiny-cuda")
    assert tiny["fits"] is False
    assert any("driver 470.182.03" in why for why in tiny["reasons"])


@needs_nvcc
def test_cli_recipe_exit_codes(lgpatch: Runner, tmp_path: Path) -> None:
    (tmp_path / "tiny-cuda.yaml").write_text(TINY_RECIPE)
    env = {"HOME": str(tmp_path), "PATH": env_with(None, tmp_path)["PATH"]}
    res = lgpatch("--recipe-path", str(tmp_path), "doctor", "--json", "--recipe", "tiny-cuda", "--cuda", "11.8",
                  env=env)
    assert res.code == ExitCode.DOCTOR, res.out + res.err
    data = json.loads(res.out)
    assert data["recipe_check"]["ok"] is False
    res = lgpatch("--recipe-path", str(tmp_path), "doctor", "--recipe", "tiny-cuda", env=env)
    if not doctor.scan_gpus(env).gpus:  # CUDA 13.0 / sm_90 builds here; without a GPU there is nothing to refuse
        assert res.code == 0, res.out + res.err
        assert "can build it" in res.out + res.err
    else:
        assert res.code in (0, ExitCode.DOCTOR), res.out + res.err
    res = lgpatch("doctor", "--cuda", "11.8", env=env)
    assert res.code == 2  # --cuda needs --recipe


# --------------------------------------------------------------------------------------------- the real machine


@needs_nvcc
def test_real_machine() -> None:
    report = doctor.diagnose(with_recipes=False)
    assert any(n.version and n.lists_supported for n in report.nvccs)
    assert any(c.version for c in report.compilers)
    data = json.loads(json.dumps(report.to_json()))
    assert data["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    for n in data["nvcc"]:
        assert n["host_compiler_limits"].get("gcc_max")


def test_stdlib_entry_point_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main(["--json", "--no-recipes"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"gpus", "nvcc", "compilers", "cmake", "plans", "findings", "jit_cache"} <= set(data)
