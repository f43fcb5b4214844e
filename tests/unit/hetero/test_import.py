"""Without torch: importing the package says which extra to install, and the lgpatch CLI still works."""

from __future__ import annotations

import subprocess
import sys

HIDE_TORCH = "import sys; sys.modules['torch'] = None; "
EXTRA = "pip install 'legacy-gpu-patch[hetero]'"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_without_torch_is_one_line_naming_the_extra() -> None:
    proc = _python(HIDE_TORCH + "import legacy_gpu_patch.hetero")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"ImportError: legacy_gpu_patch.hetero needs PyTorch, which is not installed: {EXTRA}"
    assert "During handling" not in proc.stderr  # the chained ModuleNotFoundError is suppressed


def test_cli_works_without_torch_and_hetero_bench_names_the_extra() -> None:
    run = HIDE_TORCH + "from legacy_gpu_patch.cli import main; main({args!r})"
    help_proc = _python(run.format(args=["--help"]))
    assert help_proc.returncode == 0 and "hetero-bench" in help_proc.stdout
    bench = _python(run.format(args=["hetero-bench", "--device", "cpu"]))
    assert bench.returncode == 14, bench.stderr
    assert bench.stderr.splitlines() == ["lgpatch: required tool missing: hetero-bench needs PyTorch, which is not "
                                         "installed", f"  hint: {EXTRA}"]
    assert bench.stdout == ""


def test_lgpatch_start_up_does_not_import_torch() -> None:
    proc = _python("import sys, atexit; atexit.register(lambda: print('torch loaded:', 'torch' in sys.modules)); "
                   "from legacy_gpu_patch.cli import main; main(['hetero-bench', '--help'])")
    assert proc.returncode == 0, proc.stderr
    assert "--device" in proc.stdout and proc.stdout.strip().endswith("torch loaded: False")
