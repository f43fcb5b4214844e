"""Error classes, each with its own process exit code.

One exit code per failure class lets CI jobs branch on *why* lgpatch stopped without parsing text.
The table is documented in docs/exit-codes.md; keep the two in step (tests/unit/test_errors.py checks it).
Commands raise these; `cli.run` is the one place that prints them and turns them into the exit status.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    INTERNAL = 1  # a bug in lgpatch: a traceback was caught at the top level
    USAGE = 2  # bad command-line usage (click's own code)
    CONFIG = 3  # a recipe, patchset or rule file is invalid
    SOURCE = 4  # the source cannot be fetched or does not match its pin (tag moved, sha256 differs, offline)
    PATCH = 5  # a step did not apply; the tree is left as it was before the step
    DIRTY = 6  # the work tree has uncommitted user edits and no --stash was given
    STATE = 7  # no lgpatch work tree here, or another lgpatch holds its lock
    UNSAFE = 8  # a patch or backport would write outside the tree (absolute path, '..', symlink escape)
    BUILD = 9  # the build command failed (lgpatch build)
    INTERRUPTED = 10  # the build was interrupted (Ctrl-C / SIGTERM); the report is still written
    FINDINGS = 11  # lgpatch classify found error-level findings in a log
    DOCTOR = 12  # lgpatch doctor: this machine cannot build or run the chosen recipe
    VERIFY = 13  # lgpatch verify: a compile probe gave the wrong answer
    TOOL = 14  # a required external tool (git, nvcc, cmake, compiler) is missing or too old


class LgpatchError(Exception):
    """Base class: a user-facing error, printed as one paragraph without a traceback."""

    exit_code: ExitCode = ExitCode.INTERNAL
    title: str = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = f"lgpatch: {self.title}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        # File names from patches and trees may hold undecodable bytes (kept as surrogates): show them escaped
        # rather than fail to print the error.
        return text.encode("utf-8", errors="backslashreplace").decode("utf-8")


class ConfigError(LgpatchError):
    exit_code = ExitCode.CONFIG
    title = "invalid configuration"


class SourceError(LgpatchError):
    exit_code = ExitCode.SOURCE
    title = "source error"


class PatchError(LgpatchError):
    exit_code = ExitCode.PATCH
    title = "step failed"


class DirtyTreeError(LgpatchError):
    exit_code = ExitCode.DIRTY
    title = "work tree has uncommitted changes"


class StateError(LgpatchError):
    exit_code = ExitCode.STATE
    title = "work tree state"


class UnsafePathError(LgpatchError):
    exit_code = ExitCode.UNSAFE
    title = "unsafe path refused"


class BuildError(LgpatchError):
    exit_code = ExitCode.BUILD
    title = "build failed"


class InterruptedBuild(LgpatchError):
    exit_code = ExitCode.INTERRUPTED
    title = "build interrupted"


class FindingsError(LgpatchError):
    exit_code = ExitCode.FINDINGS
    title = "error findings"


class DoctorError(LgpatchError):
    exit_code = ExitCode.DOCTOR
    title = "machine not suitable"


class VerifyError(LgpatchError):
    exit_code = ExitCode.VERIFY
    title = "verification failed"


class ToolError(LgpatchError):
    exit_code = ExitCode.TOOL
    title = "required tool missing"
