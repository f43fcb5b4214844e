"""One exit path: every error class becomes its own exit code in cli.run (and only there), through the console
script and through click's standalone mode alike; results on stdout, notes on stderr, -q and -v."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from helpers import Runner

from legacy_gpu_patch import console
from legacy_gpu_patch.cli import run
from legacy_gpu_patch.console import ClosedOutput
from legacy_gpu_patch.errors import ExitCode, LgpatchError

ERROR_CLASSES = sorted(LgpatchError.__subclasses__(), key=lambda c: int(c.exit_code))


def raising(exc: BaseException) -> click.Command:
    @click.command("boom")
    def boom() -> None:
        raise exc

    return boom


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_each_error_class_becomes_its_exit_code(cls: type[LgpatchError], capsys: pytest.CaptureFixture[str]) -> None:
    code = run(raising(cls("what happened", hint="what to do")), [])
    captured = capsys.readouterr()
    assert code == int(cls.exit_code)
    assert captured.out == ""
    assert captured.err == f"lgpatch: {cls.title}: what happened\n  hint: what to do\n"


def test_every_code_from_9_to_12_has_a_class_that_is_raised() -> None:
    """The codes that once came from sys.exit/ctx.exit in build, classify and doctor now have classes, raised there."""
    by_code = {int(c.exit_code): c.__name__ for c in ERROR_CLASSES}
    assert {code: by_code.get(code) for code in (9, 10, 11, 12)} == {
        9: "BuildError", 10: "InterruptedBuild", 11: "FindingsError", 12: "DoctorError"}
    commands = Path(__file__).resolve().parents[3] / "legacy_gpu_patch" / "commands"
    sources = {p.name: p.read_text() for p in commands.glob("*.py")}
    assert "raise BuildError(" in sources["build.py"] and "raise InterruptedBuild(" in sources["build.py"]
    assert "raise FindingsError(" in sources["classify.py"] and "raise DoctorError(" in sources["doctor.py"]
    assert not [name for name, text in sources.items() if "sys.exit(" in text]


def test_standalone_mode_maps_errors_the_same_way() -> None:
    """click's CliRunner (standalone mode) goes through cli.run too: the same code and the same message."""
    from legacy_gpu_patch.cli import LazyGroup

    group = LazyGroup("lgpatch")
    result = CliRunner().invoke(group, ["status", "-C", "/"])
    assert result.exit_code == ExitCode.STATE
    assert "lgpatch: work tree state: / is not inside an lgpatch work tree" in result.stderr


def test_unexpected_exception_is_an_internal_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(raising(ZeroDivisionError("oops")), []) == ExitCode.INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("lgpatch: internal error: ZeroDivisionError: oops") and "this is a bug" in err


def test_broken_pipe_of_something_else_is_not_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    """A BrokenPipeError while our stdout is fine (a child's stdin died) is a bug, not a reader that left."""
    from legacy_gpu_patch.cli import LazyGroup

    boom = raising(BrokenPipeError(32, "Broken pipe"))

    class OneCommandGroup(LazyGroup):  # the real group's pipe handling, with a command that raises
        def list_commands(self, ctx: click.Context) -> list[str]:
            return ["boom"]

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            return boom if name == "boom" else None

        def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
            return click.Group.resolve_command(self, ctx, args)

    assert run(OneCommandGroup("lgpatch"), ["boom"]) == ExitCode.INTERNAL
    assert "internal error: BrokenPipeError" in capsys.readouterr().err


def test_closed_output_ends_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(raising(ClosedOutput()), []) == 0
    assert capsys.readouterr() == ("", "")


def test_exit_status_asked_for_and_interrupts(capsys: pytest.CaptureFixture[str]) -> None:
    @click.command()
    @click.pass_context
    def passes_on(ctx: click.Context) -> None:
        ctx.exit(42)  # `jit-cache warm` passes on its command's status this way

    assert run(passes_on, []) == 42
    assert run(raising(KeyboardInterrupt()), []) == ExitCode.INTERRUPTED
    assert "lgpatch: aborted" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- stdout and stderr


def test_results_on_stdout_notes_on_stderr_and_quiet_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        for level, shown in ((console.QUIET, ("result", "warning")),
                             (console.NORMAL, ("result", "info", "note", "warning")),
                             (console.VERBOSE, ("result", "info", "note", "detail", "warning"))):
            console.set_verbosity(level)
            console.result("result")
            console.info("info")
            console.note("note")
            console.detail("detail")
            console.warn("warning")
            out, err = capsys.readouterr()
            assert out == "result\n"
            assert [w for w in ("info", "note", "detail", "warning") if w in err] == [s for s in shown if s != "result"]
    finally:
        console.set_verbosity(console.NORMAL)


def test_list_not_a_terminal_is_tab_separated_and_never_cut(lgpatch: Runner, tmp_path: Path) -> None:
    name = "a-recipe-with-a-name-much-longer-than-any-terminal-column-would-ever-show-in-full-" + "x" * 60
    (tmp_path / f"{name}.yaml").write_text(f"""\
name: {name}
description: A long one.
source:
  git: {{url: "file:///nowhere", ref: v1.0, commit: 0123456789abcdef0123456789abcdef01234567}}
steps:
  - id: note
    insert: {{file: NOTES, text: "x\\n", at: end}}
""")
    r = lgpatch("--recipe-path", tmp_path, "list")
    assert r.code == 0, r.err
    assert f"{name}\t\t\tA long one." in r.out.splitlines()
    assert r.err == ""
    quiet = lgpatch("-q", "--recipe-path", tmp_path, "list")
    assert quiet.out == r.out


def test_rich_results_get_unlimited_width_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.table import Table

    table = Table()
    table.add_column("name")
    table.add_row("pytorch-1.5.0-lms+cuda11-" + "y" * 200)
    console.result(table)
    assert "pytorch-1.5.0-lms+cuda11-" + "y" * 200 in capsys.readouterr().out


# --------------------------------------------------------------------------------------------- classify inputs

LOG = 'x\n/src/a.cu(12): error: identifier "cusparseScsrmm2" is undefined\n'


def test_classify_reads_a_fifo_written_by_a_thread(lgpatch: Runner, tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as fh:  # blocks until classify opens the FIFO for reading
            for _ in range(200):
                fh.write(LOG)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    r = lgpatch("classify", fifo, "--json")
    writer.join(timeout=30)
    assert r.code == ExitCode.FINDINGS, r.err
    report = json.loads(r.out)
    assert report["summary"]["lines"] == 400 and report["findings"][0]["category"] == "removed-cusparse-api"
    assert report["findings"][0]["count"] == 200
    assert "lgpatch: error findings: 1 error finding(s)" in r.err


def test_classify_directory_is_said_so(lgpatch: Runner, tmp_path: Path) -> None:
    r = lgpatch("classify", tmp_path)
    assert r.code == ExitCode.USAGE
    assert f"{tmp_path}: is a directory, not a log file" in r.err and "no such" not in r.err


def test_classify_text_summary_is_the_result(lgpatch: Runner, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(LOG)
    r = lgpatch("classify", log)
    assert r.code == ExitCode.FINDINGS
    assert "removed-cusparse-api" in r.out and "removed-cusparse-api" not in r.err
    assert r.err.startswith("lgpatch: error findings: 1 error finding(s) in")


def test_doctor_unfit_recipe_exits_12_from_doctor_error(lgpatch: Runner, tmp_path: Path) -> None:
    # No machine of today has the CUDA 8.0 nvcc this recipe asks for.
    (tmp_path / "old-cuda.yaml").write_text("""\
name: old-cuda
description: Wants a toolkit nobody has.
source:
  git: {url: "file:///nowhere", ref: v1.0, commit: 0123456789abcdef0123456789abcdef01234567}
parameters:
  cuda: {type: version, default: "8.0"}
steps:
  - id: note
    insert: {file: NOTES, text: "x\\n", at: end}
""")
    r = lgpatch("--recipe-path", tmp_path, "doctor", "--recipe", "old-cuda")
    assert r.code == ExitCode.DOCTOR, r.err
    assert "this machine" in r.out and "cannot build or run it" in r.out  # the report: stdout
    assert r.err.startswith("lgpatch: machine not suitable: this machine cannot build or run old-cuda: ")
    assert "wants CUDA 8.0" in r.err


def test_github_warning_annotation_keeps_stdout_clean(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    console.emit_json({"ok": True})
    console.warn("50% done\nnext")
    out, err = capsys.readouterr()
    assert json.loads(out) == {"ok": True}
    assert "::warning::50%25 done%0Anext\n" in err
