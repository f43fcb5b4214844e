"""Given a CUDA toolkit and a target GPU: what code to emit, with which flags, and whether the driver will run it.

The answer, in order of preference:

1. native         nvcc knows sm_<gpu>: emit that cubin. No JIT, no surprises.
2. sass-compatible nvcc knows an older sm_<major><lower minor> of the same major: that cubin runs on the GPU
                   (binary compatibility: CUDA 11.0 + RTX 3090 → sm_80 runs on 8.6). Emitted together with its PTX.
3. ptx            nvcc knows no cubin the GPU can run: emit PTX for the newest virtual architecture the toolkit
                   knows that is <= the GPU (skipping Tegra-only 3.2/5.3/6.2/7.2/8.7/10.1/11.0 and the undocumented
                   8.8 for a discrete GPU); the driver JIT-compiles it at load time — seed 2's fix (CUDA 8 + Turing
                   → compute_61). The first start pays the JIT; `lgpatch jit-cache env` makes every later one fast.
4. impossible     every target the toolkit knows is newer than the GPU (CUDA 13 + Pascal): explained, with the
                   newest toolkit that still targets the GPU.

Then the driver: a toolkit newer than the driver runs only through minor-version compatibility (CUDA >= 11, same
major, SASS only — PTX from a newer toolkit than the driver cannot be JIT-compiled), else not at all
(driver 450 + CUDA 12 → refuse). A GPU family past its last driver branch (Pascal on R590) is refused too.

When a real nvcc of the same version is at hand, its `--list-gpu-arch` / `--list-gpu-code` replace the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda.archflags import ArchFlags, flags_for, parse_arch
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo

NATIVE = "native"
SASS_COMPATIBLE = "sass-compatible"
PTX = "ptx"
IMPOSSIBLE = "impossible"

DRIVER_OK = "ok"
DRIVER_MINOR_COMPAT = "minor-compat"
DRIVER_REFUSE = "refuse"
DRIVER_UNKNOWN = "unknown"


@dataclass(frozen=True)
class DriverCheck:
    status: str  # ok | minor-compat | refuse | unknown
    message: str
    driver: str | None = None
    driver_cuda: str | None = None  # newest CUDA the driver fully supports

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "driver": self.driver,
                "driver_cuda": self.driver_cuda}


@dataclass(frozen=True)
class Plan:
    toolkit: str  # "11.0"
    gpu: int  # 86
    status: str  # native | sass-compatible | ptx | impossible
    sass: str | None  # the cubin target that runs on the GPU ("sm_86", "sm_80")
    ptx: str | None  # the PTX target ("compute_80")
    targets: tuple[str, ...]  # what to build: ("sm_86",) / ("sm_80+ptx",) / ("compute_61",)
    flags: ArchFlags | None
    reasons: tuple[str, ...]
    source: str  # "nvcc" (asked the real compiler) | "table"
    driver: DriverCheck | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu_name(self) -> str:
        return f"sm_{self.gpu}"

    @property
    def needs_jit(self) -> bool:
        """The GPU runs this only through the driver's PTX JIT (start-up cost; see jit_cache)."""
        return self.status == PTX

    @property
    def buildable(self) -> bool:
        return self.status != IMPOSSIBLE

    @property
    def runnable(self) -> bool:
        return self.buildable and (self.driver is None or self.driver.status != DRIVER_REFUSE)

    def explain(self) -> str:
        lines = list(self.reasons)
        if self.driver is not None:
            lines.append(f"driver: {self.driver.message}")
        lines += self.notes
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "toolkit": self.toolkit,
            "gpu": self.gpu_name,
            "status": self.status,
            "sass": self.sass,
            "ptx": self.ptx,
            "targets": list(self.targets),
            "flags": None if self.flags is None else {
                "torch_cuda_arch_list": self.flags.torch_cuda_arch_list,
                "cmake_cuda_architectures": self.flags.cmake_cuda_architectures,
                "nvcc_gencode": list(self.flags.nvcc_gencode),
            },
            "needs_jit": self.needs_jit,
            "runnable": self.runnable,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "source": self.source,
            "driver": None if self.driver is None else self.driver.to_json(),
        }


def gpu_number(gpu: str | int) -> int:
    """sm_86 / 8.6 / 86 / compute_86 → 86."""
    if isinstance(gpu, int):
        return gpu
    return parse_arch(str(gpu)).number


def _plain_numbers(names: set[str] | frozenset[str], prefix: str) -> list[int]:
    """{'sm_80', 'sm_90a', 'sm_100f'} → [80] (arch- and family-specific targets are never fallbacks)."""
    out = []
    for n in names:
        tail = n[len(prefix) + 1:]
        if n.startswith(prefix + "_") and tail.isdigit():
            out.append(int(tail))
    return sorted(out)


def _usable_fallback(number: int, gpu: int, gpu_is_tegra: bool) -> bool:
    if number == gpu:
        return True
    info = ck.arch_info(number)
    if info is None:
        return True
    if info.tegra and not gpu_is_tegra:
        return False
    return info.documented


def target_sets(toolkit_version: str, nvcc: NvccInfo | None = None) -> tuple[set[str], set[str], str, list[str]]:
    """(sm targets, compute targets, source, notes) for a toolkit: from nvcc when it answers, else the table."""
    mm = ck.major_minor(toolkit_version)
    if nvcc is not None and nvcc.lists_supported and nvcc.version and ck.major_minor(nvcc.version) == mm:
        return set(nvcc.gpu_codes), set(nvcc.gpu_archs), "nvcc", []
    notes: list[str] = []
    row = ck.toolkit(mm)  # raises UnknownToolkit for < 8.0
    if row.version != mm:
        notes.append(f"CUDA {mm} is newer than lgpatch's tables; assuming it accepts what CUDA {row.version} does "
                     "(give lgpatch that nvcc to ask it instead)")
    return set(row.sass), set(row.ptx), "table", notes


def plan(toolkit_version: str, gpu: str | int, *, driver: str | None = None, driver_cuda: str | None = None,
         nvcc: NvccInfo | None = None) -> Plan:
    """Plan code generation for `gpu` (sm_86 / 8.6 / 86) with CUDA `toolkit_version`, and check the driver."""
    mm = ck.major_minor(toolkit_version)
    number = gpu_number(gpu)
    info = ck.arch_info(number)
    gpu_desc = f"sm_{number} ({info.family}, {info.examples})" if info else f"sm_{number}"
    is_tegra = bool(info and info.tegra)
    sass_set, ptx_set, source, notes = target_sets(mm, nvcc)
    by = "nvcc --list-gpu-code/--list-gpu-arch" if source == "nvcc" else "lgpatch's tables"

    sass_nums = _plain_numbers(sass_set, "sm")
    ptx_nums = _plain_numbers(ptx_set, "compute")
    if number in sass_nums:
        p = Plan(mm, number, NATIVE, f"sm_{number}", None, (f"sm_{number}",), flags_for([f"sm_{number}"]),
                 (f"CUDA {mm} emits a native cubin for {gpu_desc} (per {by}).",), source, notes=tuple(notes))
        return _with_driver(p, driver, driver_cuda)

    compatible = [n for n in sass_nums if ck.sass_runs_on(n, number) and _usable_fallback(n, number, is_tegra)]
    if compatible:
        best = compatible[-1]
        ptx_target = f"compute_{best}" if best in ptx_nums else None
        targets = (f"sm_{best}+ptx",) if ptx_target else (f"sm_{best}",)
        compat_reasons = (
            f"CUDA {mm} does not know sm_{number}, but it emits sm_{best}, and a cubin runs on any GPU of the same "
            f"major version with an equal or higher minor version: sm_{best} code runs natively on {gpu_desc}.",
            f"PTX for compute_{best} is embedded as well, so newer GPUs can JIT-compile it." if ptx_target else
            "",
        )
        p = Plan(mm, number, SASS_COMPATIBLE, f"sm_{best}", ptx_target, targets, flags_for(list(targets)),
                 tuple(r for r in compat_reasons if r), source, notes=tuple(notes))
        return _with_driver(p, driver, driver_cuda)

    ptx_ok = [n for n in ptx_nums if ck.ptx_runs_on(n, number) and _usable_fallback(n, number, is_tegra)]
    if ptx_ok:
        best = ptx_ok[-1]
        skipped = [n for n in ptx_nums if best < n <= number and not _usable_fallback(n, number, is_tegra)]
        reasons = [
            f"CUDA {mm} has no cubin target that runs on {gpu_desc} (its newest is sm_{sass_nums[-1]})."
            if sass_nums else f"CUDA {mm} has no cubin target for {gpu_desc}.",
            f"Emit PTX for compute_{best}, the newest virtual architecture CUDA {mm} knows that is <= "
            f"{number // 10}.{number % 10}; the driver JIT-compiles it for the GPU when the program loads it.",
        ]
        if skipped:
            reasons.append("Skipped " + ", ".join(f"compute_{n}" for n in skipped)
                           + ": Tegra-only or undocumented architectures are no basis for a discrete GPU.")
        reasons.append("The first start pays the JIT compile; `lgpatch jit-cache env` keeps the result so every later "
                       "start is fast.")
        p = Plan(mm, number, PTX, None, f"compute_{best}", (f"compute_{best}",), flags_for([f"compute_{best}"]),
                 tuple(reasons), source, notes=tuple(notes))
        return _with_driver(p, driver, driver_cuda)

    return _with_driver(_impossible(mm, number, gpu_desc, sass_nums, ptx_nums, source, notes), driver, driver_cuda)


def _impossible(mm: str, number: int, gpu_desc: str, sass_nums: list[int], ptx_nums: list[int], source: str,
                notes: list[str]) -> Plan:
    oldest = min(ptx_nums) if ptx_nums else (min(sass_nums) if sass_nums else None)
    reasons = []
    if oldest is None:
        reasons.append(f"CUDA {mm} reports no GPU targets at all.")
    else:
        reasons.append(
            f"Nothing CUDA {mm} emits can run on {gpu_desc}: its oldest target is compute_{oldest} "
            f"({ck.family_of(oldest)}), PTX runs only on GPUs of equal or newer capability, and a cubin only on "
            f"its own major version."
        )
    target = next((t for t in ck.TARGETS if t.target == str(number)), None)
    if target is not None and target.until is not None and ck.vtuple(mm)[:2] >= ck.vtuple(target.until)[:2]:
        reasons.append(f"CUDA {target.until} removed sm_{number} ({target.source}).")
    newest = ck.newest_toolkit_with(f"sm_{number}")
    if newest is not None:
        reasons.append(f"Use CUDA {newest.version} or older (the newest toolkit that still emits sm_{number}).")
    info = ck.arch_info(number)
    if info and info.last_driver_branch:
        reasons.append(f"Drivers after R{info.last_driver_branch} no longer run {info.family} GPUs: keep the driver "
                       f"on the R{info.last_driver_branch} branch.")
    return Plan(mm, number, IMPOSSIBLE, None, None, (), None, tuple(reasons), source, notes=tuple(notes))


def check_driver(toolkit_version: str, gpu: int | None, driver: str | None, driver_cuda: str | None = None,
                 uses_ptx: bool = False) -> DriverCheck:
    """Will a driver run code built by `toolkit_version` (SASS, or PTX when `uses_ptx`) on `gpu`?"""
    if driver is None and driver_cuda is None:
        return DriverCheck(DRIVER_UNKNOWN, "no driver found: cannot tell whether it would run")
    mm = ck.major_minor(toolkit_version)
    tk = ck.toolkit(mm)
    dcuda = driver_cuda or (ck.driver_cuda_version(driver) if driver else None)
    info = ck.arch_info(gpu) if gpu is not None else None
    if info and info.last_driver_branch and driver and ck.vtuple(driver)[0] > info.last_driver_branch:
        return DriverCheck(
            DRIVER_REFUSE,
            f"driver {driver} no longer supports {info.family} GPUs (the R{info.last_driver_branch} branch is the "
            f"last that does); install an R{info.last_driver_branch} driver",
            driver, dcuda,
        )
    if dcuda is None:
        return DriverCheck(DRIVER_REFUSE, f"driver {driver} is older than any CUDA toolkit lgpatch knows "
                                          f"(CUDA {mm} needs >= {tk.min_driver})", driver, dcuda)
    if ck.vtuple(dcuda)[:2] >= ck.vtuple(mm)[:2]:
        return DriverCheck(DRIVER_OK, f"driver {driver or '?'} supports CUDA {dcuda} >= {mm}", driver, dcuda)
    same_major = ck.vtuple(dcuda)[0] == tk.major and tk.major >= 11
    min_driver = ck.MINOR_COMPAT_MIN_DRIVER.get(tk.major)
    if same_major and (driver is None or min_driver is None or ck.version_at_least(driver, min_driver)):
        if uses_ptx:
            return DriverCheck(
                DRIVER_REFUSE,
                f"driver {driver or '?'} supports CUDA {dcuda} < {mm}: minor-version compatibility runs CUDA {mm} "
                f"cubins, but cannot JIT-compile PTX from a newer toolkit (CUDA_ERROR_UNSUPPORTED_PTX_VERSION); "
                f"upgrade the driver to >= {tk.driver or 'the toolkit release driver'} or build a cubin",
                driver, dcuda,
            )
        return DriverCheck(
            DRIVER_MINOR_COMPAT,
            f"driver {driver or '?'} supports CUDA {dcuda} < {mm}: runs through minor-version compatibility "
            f"(>= {min_driver}); features newer than CUDA {dcuda} are unavailable",
            driver, dcuda,
        )
    need = tk.min_driver or tk.driver or "a newer one"
    return DriverCheck(
        DRIVER_REFUSE,
        f"driver {driver or '?'} supports CUDA <= {dcuda}; CUDA {mm} needs driver >= {need}"
        + (" (minor-version compatibility works only within one major version)" if tk.major >= 11 else "")
        + f". Upgrade the driver, use a CUDA <= {dcuda} toolkit, or on data-center GPUs the cuda-compat "
        "forward-compatibility package",
        driver, dcuda,
    )


def _with_driver(p: Plan, driver: str | None, driver_cuda: str | None) -> Plan:
    if p.status == IMPOSSIBLE or (driver is None and driver_cuda is None):
        return p
    check = check_driver(p.toolkit, p.gpu, driver, driver_cuda, uses_ptx=p.needs_jit)
    return Plan(p.toolkit, p.gpu, p.status, p.sass, p.ptx, p.targets, p.flags, p.reasons, p.source, check, p.notes)


def native_range(gpu: str | int) -> tuple[str, str] | None:
    """(oldest, newest) toolkit that emits a native cubin for `gpu`, from the tables."""
    number = gpu_number(gpu)
    lo, hi = ck.oldest_toolkit_with(f"sm_{number}"), ck.newest_toolkit_with(f"sm_{number}")
    return (lo.version, hi.version) if lo and hi else None
