"""The `lgpatch` command: a click group whose commands live one per module in legacy_gpu_patch/commands/.

Commands are imported lazily so that `lgpatch status` does not pay for rich, GitPython or the classifier it does not
use; start-up time matters because CI jobs and the fault-injection tests call lgpatch many times.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

import click

from legacy_gpu_patch import __version__
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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lgpatch")
@click.option("--debug", is_flag=True, envvar="LGPATCH_DEBUG", help="Show tracebacks for errors.")
@click.option(
    "--recipe-path",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Extra folder of recipes (repeatable; also LGPATCH_RECIPE_PATH). Its patchsets/ folder is searched too.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, recipe_path: tuple[str, ...]) -> None:
    """lgpatch: bring legacy GPU framework source trees back to life on new machines."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["recipe_path"] = recipe_path


def main(argv: list[str] | None = None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv) or bool(os.environ.get("LGPATCH_DEBUG"))
    try:
        # standalone_mode=False returns what ctx.exit(code) asked for instead of exiting: pass it on.
        rv = cli.main(args=argv, prog_name="lgpatch", standalone_mode=False)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
    except LgpatchError as exc:
        if debug:
            traceback.print_exc()
        click.echo(exc.render(), err=True)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Abort:
        click.echo("lgpatch: aborted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.ClickException as exc:
        exc.show()
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("lgpatch: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception:  # a bug: say so plainly, keep the traceback for --debug
        if debug:
            traceback.print_exc()
        else:
            etype, value, _ = sys.exc_info()
            click.echo(
                f"lgpatch: internal error: {etype.__name__ if etype else 'Exception'}: {value}\n"
                "  hint: this is a bug in lgpatch; re-run with --debug and report the traceback",
                err=True,
            )
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(0)
