"""The CLI conventions of git and pip, through real pipes and real processes: results on stdout (`lgpatch list |
grep` works), progress and errors on stderr, quiet exit 0 when the reader closes the pipe early, full names when
stdout is not a terminal, shell completion, and `classify` on a FIFO and on a process substitution."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli_subprocess

pytestmark = pytest.mark.integration

LGPATCH = f"{shlex.quote(sys.executable)} -m legacy_gpu_patch"
BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash not found (process substitution, pipefail)")


def shell(script: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A pipeline as a user's shell runs it: real pipes between real processes; pipefail keeps lgpatch's status."""
    return subprocess.run([BASH or "sh", "-c", "set -o pipefail; " + script], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300)


def many_recipes(folder: Path, count: int, description_words: int) -> Path:
    """`count` valid recipes whose one-sentence descriptions are long: `list` writes far more than a pipe holds."""
    folder.mkdir(parents=True, exist_ok=True)
    words = " ".join(f"word{i}" for i in range(description_words))
    for i in range(count):
        (folder / f"bulk-{i:04d}.yaml").write_text(f"""\
name: bulk-{i:04d}
description: Recipe number {i} {words}
source:
  git: {{url: "file:///nowhere", ref: v1.0, commit: 0123456789abcdef0123456789abcdef01234567}}
steps:
  - id: note
    insert: {{file: NOTES, text: "bulk\\n", at: end}}
""", encoding="utf-8")
    return folder


@needs_bash
def test_list_results_reach_grep_through_a_real_pipe(tmp_path: Path) -> None:
    proc = shell(f"{LGPATCH} list 2>{tmp_path / 'err'} | grep chainer")
    assert proc.returncode == 0, proc.stderr
    name, aliases, defaults, description = proc.stdout.rstrip("\n").split("\t")
    assert (name, aliases) == ("chainer-1.24", "chainer, chainer-ptx")
    assert "cuda=13.0" in defaults and description.startswith("Chainer 1.24.0")
    assert (tmp_path / "err").read_text() == ""  # nothing of the result went to stderr
    # Not a terminal: the full name, never `pytorch-1.5.0-lms…` cut at 80 columns.
    names = shell(f"{LGPATCH} list | cut -f1")
    assert names.returncode == 0 and "pytorch-1.5.0-lms+cuda11" in names.stdout.split("\n")
    assert "…" not in names.stdout


@needs_bash
@pytest.mark.parametrize("reader", ["head -1", "head -c 10", "true"])
def test_closed_pipe_ends_quietly_with_0(tmp_path: Path, reader: str) -> None:
    recipes = many_recipes(tmp_path / "recipes", 60, 1200)  # ~600 KB of rows; a pipe buffer holds 64 KB
    full = run_cli_subprocess("--recipe-path", recipes, "list")
    assert full.returncode == 0 and len(full.stdout) > 4 * 65536, len(full.stdout)
    proc = shell(f"{LGPATCH} --recipe-path {shlex.quote(str(recipes))} list | {reader}")
    assert proc.returncode == 0, proc.stderr  # pipefail: this is lgpatch's own status
    assert proc.stderr == ""  # no "internal error", no "Exception ignored ... BrokenPipeError"


@needs_bash
def test_closed_pipe_during_json_and_classify_output(tmp_path: Path) -> None:
    recipes = many_recipes(tmp_path / "recipes", 60, 1200)
    proc = shell(f"{LGPATCH} --recipe-path {shlex.quote(str(recipes))} list --json | head -2")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    log = tmp_path / "big.log"
    log.write_text("".join(f'/src/f{i}.cu({i}): error: identifier "sym_{i}" is undefined\n' for i in range(3000)))
    full = run_cli_subprocess("classify", log, "--limit", "1000")  # the text summary: one finding per few lines
    assert full.returncode == 11 and len(full.stdout) > 2 * 65536, len(full.stdout)  # more than a pipe holds
    proc = shell(f"{LGPATCH} classify {shlex.quote(str(log))} --limit 1000 | head -1")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("lgpatch: 500 error finding(s)")


def test_genuine_errors_still_reach_stderr_with_their_code(tmp_path: Path) -> None:
    proc = run_cli_subprocess("show", "no-such-recipe")
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.startswith("lgpatch: invalid configuration: no recipe named 'no-such-recipe'")


def test_show_and_cache_list_write_results_to_stdout() -> None:
    show = run_cli_subprocess("show", "chainer-1.24")
    assert show.returncode == 0 and show.stdout.startswith("chainer-1.24  (") and show.stderr == ""
    listed = run_cli_subprocess("cache", "list")
    assert listed.returncode == 0 and listed.stderr == ""
    first = listed.stdout.splitlines()[0].split()
    assert first[0] in ("cached", "missing") and len(first[1]) == 64  # the whole sha256 in a pipe


def test_quiet_and_verbose(tmp_path: Path) -> None:
    quiet = run_cli_subprocess("-q", "list")
    assert quiet.returncode == 0 and "chainer-1.24\t" in quiet.stdout and quiet.stderr == ""
    verbose = run_cli_subprocess("-v", "list")
    assert verbose.returncode == 0 and "chainer-1.24\t" in verbose.stdout
    assert "lgpatch: list took" in verbose.stderr
    both = run_cli_subprocess("-q", "-v", "list")
    assert both.returncode == 2 and "--quiet and --verbose" in both.stderr


def test_shell_completion_as_the_readme_says() -> None:
    script = subprocess.run([sys.executable, "-m", "legacy_gpu_patch"], capture_output=True, text=True,
                            env={**os.environ, "_LGPATCH_COMPLETE": "bash_source"}, timeout=60)
    assert script.returncode == 0 and "complete -o nosort -F _lgpatch_completion lgpatch" in script.stdout
    words = subprocess.run([sys.executable, "-m", "legacy_gpu_patch"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "_LGPATCH_COMPLETE": "bash_complete", "COMP_WORDS": "lgpatch cla",
                                "COMP_CWORD": "1"})
    assert words.returncode == 0 and words.stdout.split() == ["plain,classify"]


# --------------------------------------------------------------------------------------------- classify inputs

ERROR_LOG = 'x\n/src/a.cu(12): error: identifier "cusparseScsrmm2" is undefined\n'


def test_classify_reads_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "build.fifo"
    os.mkfifo(fifo)
    # The writer is a real process that opens the FIFO after lgpatch; a FIFO can be read only once.
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'w').write({ERROR_LOG * 500!r})"])
    try:
        proc = run_cli_subprocess("classify", fifo, "--json")
    finally:
        writer.wait(timeout=60)
    assert proc.returncode == 11, proc.stderr
    assert '"category": "removed-cusparse-api"' in proc.stdout and '"lines": 1000' in proc.stdout


def test_classify_reads_a_gzipped_fifo(tmp_path: Path) -> None:
    import gzip

    fifo = tmp_path / "ci.log.gz"
    os.mkfifo(fifo)
    data = gzip.compress(ERROR_LOG.encode())
    writer = subprocess.Popen([sys.executable, "-c", f"import os, time\nf = open({str(fifo)!r}, 'wb', 0)\n"
                               f"for b in {data!r}:\n    f.write(bytes([b]))\n"])  # one byte at a time
    try:
        proc = run_cli_subprocess("classify", fifo, "--json")
    finally:
        writer.wait(timeout=60)
    assert proc.returncode == 11 and '"removed-cusparse-api"' in proc.stdout, proc.stderr


@needs_bash
def test_classify_reads_a_process_substitution(tmp_path: Path) -> None:
    proc = shell(f"{LGPATCH} classify <(printf %s {shlex.quote(ERROR_LOG)}) --format github")
    assert proc.returncode == 11, proc.stderr
    assert proc.stdout.startswith("::error file=/src/a.cu,line=12,")
    assert "error findings: 1 error finding(s) in /dev/fd/" in proc.stderr


def test_classify_on_a_directory_or_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    folder = run_cli_subprocess("classify", tmp_path)
    assert folder.returncode == 2 and f"{tmp_path}: is a directory" in folder.stderr
    missing = run_cli_subprocess("classify", tmp_path / "nope.log")
    assert missing.returncode == 2 and "nope.log: no such file" in missing.stderr
