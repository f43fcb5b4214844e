"""Helpers that recipe build commands run as ``${python} -m legacy_gpu_patch.tools.<name> ...``.

They run under the interpreter that builds the framework, which may not be the one running lgpatch, so they use
the standard library only (no click, no rich) and print plain lines. Each exits 0 on success and with
ExitCode.TOOL (a required tool or input is missing) or ExitCode.BUILD (the build output is wrong) otherwise.

- cuda_stub: a stand-in ``libcuda.so.1`` generated from the toolkit's own ``cuda.h``, for linking on machines
  without an NVIDIA driver (and for importing there in tests), never for a run path.
- nvidia_wheels: the CUDA libraries that come as pip wheels (``site-packages/nvidia/...``): include and library
  folders, and a folder of unversioned ``lib*.so`` links the linker needs.
- wheel_check: a built wheel holds every extension module it must, and their run paths point where they should.
- cuda_archs: the SASS and PTX architectures a built CUDA binary embeds (cuobjdump), checked against a list.
- jobs: how many compile jobs this machine runs at once, sized by cores and memory (lgpatch build's MAX_JOBS).
"""
