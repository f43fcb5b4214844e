"""The `lgpatch` command: a click group whose commands live one per module in legacy_gpu_patch/commands/.

Commands are imported lazily so that `lgpatch status` does not pay for rich, GitPython or the classifier it does not
use; start-up time matters because CI jobs and the fault-injection tests call lgpatch many times.

`run` is the one exit path: commands raise the classes of errors.py and `run` prints them (one paragraph on stderr)
and returns their exit code; a reader that closes the pipe early (`lgpatch list | head -1`) ends it quietly with 0.
"""

from __future__ import annotations

import importlib
import os
import select
import sys
import time
import traceback
from typing import Any

import click

from legacy_gpu_patch import __version__, console
from legacy_gpu_patch.console import ClosedOutput
from legacy_gpu_patch.errors import ExitCode, LgpatchError

# command name → (module in legacy_gpu_patch.commands defining `command`, one-line help shown by --help)
COMMANDS = {
    "list": ("list_cmd", "List the known recipes."),
    "show": ("show", "Show the resolved plan of a recipe for given parameters."),
    "apply": ("apply", "Fetch the pinned source into a work tree and apply the recipe's steps."),
    "status": ("status", "Show recipe, parameters and applied/pending steps of a work tree."),
    "revert": ("revert", "Return the work tree to its pristine baseline, exactly."),
    "export": ("export", "Write the applied steps as a git format-patch series plus a quilt series file."),
    "new-recipe": ("new_recipe", "Write a new recipe pinning a git tag or sdist, with an empty patchset."),
    "edit": ("edit", "Put the work tree at the state after a step, for editing by hand."),
    "refresh": ("refresh", "Capture uncommitted edits as a patch step of the recipe (or fold into the edited one)."),
    "check": ("check", "Check whether a recipe's series applies to another upstream version."),
    "cache": ("cache", "Manage the download and mirror cache (e.g. add files for offline use)."),
    "build": ("build", "Build a patched work tree, streaming and classifying errors."),
    "classify": ("classify", "Classify the errors in a build log from anywhere."),
    "doctor": ("doctor", "Check GPU, driver, toolkit and compilers; say what can build and run."),
    "jit-cache": ("jit_cache", "Inspect and configure the CUDA driver's PTX JIT cache."),
    "verify": ("verify", "Run a recipe's compile probes against patched and pristine trees."),
    "matrix": ("matrix", "Expand recipes and parameter values into a CI job matrix, pruned with reasons."),
    "ci": ("ci", "Run one CI job: apply (strict), build, repair and label the wheel, smoke-test it, report."),
    "report": ("report_cmd", "Work with CI reports (merge many jobs' reports into one summary)."),
    "hetero-bench": ("hetero_bench", "Time CPU only, GPU only and a CPU+GPU split of conv layers (needs torch)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        return importlib.import_module(f"legacy_gpu_patch.commands.{entry[0]}").command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing help from the table keeps `lgpatch --help` from importing every command module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_text) for name, (_, help_text) in COMMANDS.items()])

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        # click's own "No such command" has no suggestion; ours names the closest command.
        name = args[0] if args else ""
        if args and not name.startswith("-") and name not in COMMANDS:
            from legacy_gpu_patch.config.schema import did_you_mean

            ctx.fail(f"no such command {name!r}{did_you_mean(name, COMMANDS)}")
        return super().resolve_command(ctx, args)

    # click answers an EPIPE OSError with exit status 1 by itself; a closed reader must reach `run` instead.
    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError as exc:
            raise _closed_or_bug(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _closed_or_bug(exc) from exc

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Standalone (click's CliRunner, `python -m`) goes through `run` too: one mapping of errors to codes."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        sys.exit(run(self, args, prog_name=prog_name or "lgpatch"))


class PipeFailure(Exception):
    """A BrokenPipeError that is not about our own output (a child's stdin, a socket): a bug, reported as such."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def _reader_gone(stream: Any) -> bool:
    """Whether `stream` is a pipe or socket whose reader has closed it (poll reports POLLERR on the write end)."""
    try:
        fd = stream.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # captured in-process (tests) or already closed
        return False


def _closed_or_bug(exc: BrokenPipeError) -> Exception:
    if _reader_gone(sys.stdout) or _reader_gone(sys.stderr):
        return ClosedOutput()
    return PipeFailure(exc)


def _silence_closed_outputs() -> None:
    """Point the closed stream(s) at /dev/null so that Python's own flush at exit does not print
    'Exception ignored ... BrokenPipeError' (the recipe of the signal module's "Note on SIGPIPE")."""
    for stream in (sys.stdout, sys.stderr):
        if _reader_gone(stream):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lgpatch")
@click.option("--debug", is_flag=True, envvar="LGPATCH_DEBUG", help="Show tracebacks for errors.")
@click.option("--quiet", "-q", is_flag=True, help="Only results (stdout), warnings and errors: no progress or notes.")
@click.option("--verbose", "-v", is_flag=True, help="Also say where recipes come from and how long the command took.")
@click.option(
    "--recipe-path",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Extra folder of recipes (repeatable; also LGPATCH_RECIPE_PATH). Its patchsets/ folder is searched too.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, verbose: bool, recipe_path: tuple[str, ...]) -> None:
    """lgpatch: bring legacy GPU framework source trees back to life on new machines.

    Results go to stdout, progress, notes and errors to stderr; exit codes are listed in docs/exit-codes.md.
    """
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose contradict each other")
    console.set_verbosity(console.QUIET if quiet else console.VERBOSE if verbose else console.NORMAL)
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["recipe_path"] = recipe_path


def main(argv: list[str] | None = None) -> None:
    """The `lgpatch` console script."""
    sys.exit(run(cli, argv))


def run(command: click.Command, argv: list[str] | None = None, prog_name: str = "lgpatch") -> int:
    """Run `command` on `argv` and return the process exit code: the one place errors become exit codes."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or bool(os.environ.get("LGPATCH_DEBUG"))
    console.set_verbosity(console.NORMAL)
    started = time.monotonic()
    try:
        # standalone_mode=False returns what ctx.exit(code) asked for instead of exiting: pass it on.
        rv = command.main(args=args, prog_name=prog_name, standalone_mode=False)
        sys.stdout.flush()  # inside the try: the last buffered result can meet a closed pipe too
        console.detail(f"{next((a for a in args if a in COMMANDS), prog_name)} took {time.monotonic() - started:.2f} s")
        return rv if isinstance(rv, int) else 0
    except ClosedOutput:
        _silence_closed_outputs()
        return 0
    except BrokenPipeError as exc:  # raised outside click's invoke (rare): ours only when the reader left
        if isinstance(_closed_or_bug(exc), ClosedOutput):
            _silence_closed_outputs()
            return 0
        return _internal_error(debug, exc)
    except LgpatchError as exc:
        if debug:
            traceback.print_exc()
        click.echo(exc.render(), err=True)
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("lgpatch: aborted", err=True)
        return int(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        return int(ExitCode.USAGE)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("lgpatch: interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # a bug: say so plainly, keep the traceback for --debug
        return _internal_error(debug, exc)


def _internal_error(debug: bool, exc: BaseException) -> int:
    if debug:
        traceback.print_exc()
    else:
        shown = exc.original if isinstance(exc, PipeFailure) else exc
        click.echo(
            f"lgpatch: internal error: {type(shown).__name__}: {shown}\n"
            "  hint: this is a bug in lgpatch; re-run with --debug and report the traceback",
            err=True,
        )
    return int(ExitCode.INTERNAL)
