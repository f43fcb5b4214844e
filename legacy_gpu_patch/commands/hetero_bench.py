"""lgpatch hetero-bench: CPU only vs accelerator only vs a CPU+GPU split of the conv layers (docs/hetero.md)."""

from __future__ import annotations

from typing import Any, Optional

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.errors import DoctorError, ToolError

MODELS = ("seed", "resnet18-like")


def _torch() -> Any:
    # torch is optional: imported here, never at lgpatch start-up, so every other command works without it.
    try:
        import torch
    except ImportError:
        raise ToolError("hetero-bench needs PyTorch, which is not installed",
                        hint="pip install 'legacy-gpu-patch[hetero]'") from None
    return torch


def _check_device(torch: Any, device: str) -> None:
    if not device.startswith("cuda"):
        return
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise DoctorError(f"no CUDA device for --device {device}: torch {torch.__version__} ({build}) sees no GPU",
                          hint="`lgpatch hetero-bench --device cpu` runs the same split code with both shares on "
                               "this CPU (a dry run: no speed-up is expected)")
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise DoctorError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")


@click.command("hetero-bench")
@click.option("--model", "models", multiple=True, type=click.Choice(MODELS),
              help="Network to run (repeatable; default: both).")
@click.option("--batch", "batches", multiple=True, type=click.IntRange(min=1), help="Batch size (repeatable; "
              "default: 1, 16, 256).")
@click.option("--mode", "modes", multiple=True, type=click.Choice(("inference", "train")),
              help="Inference, a training step, or both (the default).")
@click.option("--device", default="cuda:0", show_default=True, help="The accelerator; `cpu` for a dry run.")
@click.option("--steps", default=10, show_default=True, type=click.IntRange(min=1), help="Timed steps per case.")
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(min=0), help="Untimed steps first.")
@click.option("--cpu-threads", type=click.IntRange(min=1), help="Threads of the host share (default: cores − 1).")
@click.option("--no-naive", is_flag=True, help="Skip the seed's two-process version (spawn).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable results on stdout.")
def command(models: tuple[str, ...], batches: tuple[int, ...], modes: tuple[str, ...], device: str, steps: int,
            warmup: int, cpu_threads: Optional[int], no_naive: bool, as_json: bool) -> None:
    """Time CPU only, GPU only and the auto-tuned split, for inference and a training step.

    Prints the ratio chosen, the speed-up over the best single device, the ideal 1 + Rc/Rg and the fraction of
    it reached, and the seed's naive two-process version. Without a GPU, `--device cpu` runs the same code path.
    """
    torch = _torch()
    _check_device(torch, device)
    from legacy_gpu_patch.hetero.bench import BenchOptions, run

    opts = BenchOptions(models=models or MODELS, batches=batches or (1, 16, 256),
                        modes=modes or ("inference", "train"), accel=device, steps=steps, warmup=warmup,
                        naive=not no_naive, cpu_threads=cpu_threads)
    results = run(opts, lambda msg: click.echo(f"hetero-bench: {msg}", err=True))
    if as_json:
        console.emit_json(results)
    else:
        click.echo(format_results(results))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f}"


def format_results(results: dict[str, Any]) -> str:
    lines = [f"accel {results['accel']} ({results['accel_name']}), host {results['host']} "
             f"({results['host_cores']} cores), torch {results['torch']}"]
    if results["dry_run"]:
        lines.append("DRY RUN: --device cpu puts both shares on this CPU; the numbers test the code path, not a "
                     "speed-up")
    if "spawn" in results:
        sp = results["spawn"]
        lines.append(f"spawn start-up {sp['spawn_s'] * 1e3:.0f} ms, with import torch "
                     f"{sp['spawn_import_torch_s'] * 1e3:.0f} ms")
    startups = [c["naive"]["startup_s"] for c in results["cases"] if "naive" in c]
    if startups:
        lines.append(f"naive: two processes (spawn), half the batch each, gradients merged in shared memory; their "
                     f"start-up ({min(startups):.1f}–{max(startups):.1f} s) is not in its step time")
    lines.append(f"{'model':14} {'mode':9} {'batch':>5} {'cpu ms':>9} {'accel ms':>9} {'split ms':>9} "
                 f"{'speedup':>7} {'ideal':>6} {'reached':>7} {'naive ms':>9} {'auto':>5}  ratio chosen")
    for c in results["cases"]:
        naive = _ms(c["naive"]["step_s"]) if "naive" in c else f"{'-':>9}"
        lines.append(f"{c['model']:14} {c['mode']:9} {c['batch']:5d} {_ms(c['cpu_s'])} {_ms(c['accel_s'])} "
                     f"{_ms(c['split_s'])} {c['speedup']:6.3f}x {c['ideal_speedup']:5.3f}x "
                     f"{c['fraction_of_ideal']:6.1%} {naive} {c['auto']['placement']:>5}  {c['ratio_chosen']}")
    worst = max((c["check"].get("grad_max_abs_diff", c["check"]["output_max_abs_diff"]) for c in results["cases"]),
                default=0.0)
    lines.append(f"split vs unsplit on the accelerator, same weights: largest difference {worst:.2e} (outputs and "
                 "gradients; --json has each case)")
    lines.append("speedup and reached: the per-layer split against the best single device; auto: what auto keeps at "
                 "the model level (the split, or the whole model on cpu or accel when no split beats it)")
    lines += _shared_layers(results["cases"])
    return "\n".join(lines)


def _shared_layers(cases: list[dict[str, Any]]) -> list[str]:
    """The tuner's predicted vs measured step for every layer that gave the host a share (the rest are all
    accelerator; --json lists every layer and every candidate)."""
    lines = []
    for c in cases:
        for layer in c["layers"]:
            if layer["host_units"] and layer["measured_s"] is not None:
                lines.append(f"  {c['model']} {c['mode']} batch {c['batch']} {layer['name']}: "
                             f"{layer['host_units']}/{layer['units']} on the host, predicted "
                             f"{layer['predicted_s'] * 1e6:.0f} µs, measured {layer['measured_s'] * 1e6:.0f} µs, "
                             f"{layer['speedup']:.2f}x vs best single device — {layer['verdict']}")
    return ["layers given a host share:", *lines] if lines else []
