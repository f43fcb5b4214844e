"""What a build for a set of targets runs on one GPU, the way the driver chooses (the multi-architecture wheel on
each GPU): its own cubin, else the newest cubin of the same major with a lower minor, else the newest PTX that is
not newer than the GPU (JIT-compiled at load), else nothing. `lgpatch doctor`'s recipe check asks it for every GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda.archflags import ArchFlags
from legacy_gpu_patch.cuda.targets import IMPOSSIBLE, NATIVE, PTX, SASS_COMPATIBLE, gpu_number


@dataclass(frozen=True)
class Coverage:
    """How code built for a set of targets runs on one GPU (the multi-architecture wheel on each GPU)."""

    gpu: int
    status: str  # native | sass-compatible | ptx | impossible
    target: str | None  # the cubin the driver loads ("sm_86") or the PTX it JIT-compiles ("compute_90")

    @property
    def needs_jit(self) -> bool:
        return self.status == PTX


def coverage(flags: ArchFlags, gpu: str | int) -> Coverage:
    """Which of `flags`' code the driver uses on `gpu`: a cubin it can run (its own, else the newest of the same
    major with a lower minor), else the newest PTX not newer than the GPU, JIT-compiled at load; else nothing.
    sm_80,sm_86,sm_89,sm_90+ptx: sm_86 → its cubin; sm_87 → the sm_86 cubin; sm_100 → compute_90 PTX; sm_75 → none.
    """
    number = gpu_number(gpu)
    cubins = [a for a in flags.archs if a.sass and ck.sass_runs_on(a.number, number, a.suffix)]
    if cubins:
        best = max(cubins, key=lambda a: (a.number, a.suffix))
        return Coverage(number, NATIVE if best.number == number else SASS_COMPATIBLE, best.sm)
    ptx = [a for a in flags.archs if a.ptx and ck.ptx_runs_on(a.number, number, a.suffix)]
    if ptx:
        return Coverage(number, PTX, max(ptx, key=lambda a: (a.number, a.suffix)).compute)
    return Coverage(number, IMPOSSIBLE, None)
