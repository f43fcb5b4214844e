"""The work tree as a ledger: a git repository whose commits are the applied steps.

    .git/lgpatch/state.json    recipe, parameters, source and baseline (written atomically)
    .git/lgpatch/journal.json  present only while lgpatch changes the tree: what it was doing, from which commit
    .git/lgpatch/lock          flock'ed by the lgpatch process working on the tree (the kernel drops it on kill -9)

Each step is one commit with trailers (Lgpatch-Step, Lgpatch-Digest, …). Status, diff, revert and recovery come
from git itself. If a process dies mid-step, the journal tells the next command what to repair: partial changes are
set aside in a stash (never discarded: a user may have edited since) and the tree returns to the last complete step.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.errors import StateError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.ledger import locks, recovery

STATE_FORMAT = 1
TRAILERS = ("Lgpatch-Recipe", "Lgpatch-Patchset", "Lgpatch-Step", "Lgpatch-Digest", "Lgpatch-Params")
DEFAULT_IGNORE = ("build/", "dist/", "*.egg-info/", "__pycache__/", "*.pyc", "*.o", "*.so", ".eggs/")
_TRAILER_RE = re.compile(r"^(Lgpatch-[A-Za-z]+): (.*)$", re.M)


@dataclass
class State:
    recipe: str
    recipe_file: str
    params: dict[str, Any]
    source: str
    baseline: str
    source_dir: str | None = None
    format: int = STATE_FORMAT
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AppliedStep:
    commit: str
    key: str  # patchset/step
    digest: str
    subject: str


@dataclass(frozen=True)
class Ledger:
    applied: tuple[AppliedStep, ...]
    foreign: tuple[str, ...]  # commits after the baseline not made by lgpatch (the user's own)


def _atomic_write(path: Path, text: str, durable: bool = True) -> None:
    """Write via rename, so a killed process leaves the old or the new file, never half of one.

    fsync only where a power loss matters (the state file); the journal guards against killed processes, for which
    the rename alone is enough, and it is written twice per step.
    """
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def find_root(start: Path) -> Path | None:
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git" / "lgpatch" / "state.json").is_file():
            return candidate
    return None


class WorkTree:
    def __init__(self, root: Path, state: State) -> None:
        self.root = root
        self.state = state
        self.git = Git(root)
        self._lock_fd: int | None = None
        self._exclusive = False

    # ---------------------------------------------------------------------------------------- opening

    @staticmethod
    def meta_dir(root: Path) -> Path:
        return root / ".git" / "lgpatch"

    @classmethod
    def open(cls, path: Path | str = ".", lock: bool = True, repair: bool = True, shared: bool = False) -> WorkTree:
        """Open the work tree containing `path`.

        Commands that change the tree (apply, revert) take the lock exclusively; commands that only read it (status,
        export, build, verify) take it shared, so a long build and a verify can run side by side while an apply is
        refused until both are done. A journal left by a killed process is always repaired first, under an
        exclusive lock.
        """
        root = find_root(Path(path))
        if root is None:
            raise StateError(
                f"{Path(path).resolve()} is not inside an lgpatch work tree",
                hint="create one with `lgpatch apply RECIPE --workdir DIR`, or pass --workdir",
            )
        try:
            raw = json.loads((cls.meta_dir(root) / "state.json").read_text(encoding="utf-8"))
            state = State(**raw)
        except (OSError, ValueError, TypeError) as exc:
            raise StateError(f"{root}: unreadable lgpatch state: {exc}") from None
        wt = cls(root, state)
        if lock:
            wt.acquire_lock(shared=shared and not (repair and wt.journal_path.exists()))
        if repair:
            wt.repair()
            if lock and shared:
                wt.acquire_lock(shared=True)  # flock converts the held lock in place
        return wt

    @classmethod
    def create(cls, root: Path, state: State, ignore: tuple[str, ...]) -> WorkTree:
        meta = cls.meta_dir(root)
        meta.mkdir(parents=True, exist_ok=True)
        exclude = root / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        lines = ["# lgpatch: build outputs are not user edits", *DEFAULT_IGNORE, *ignore]
        with open(exclude, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        wt = cls(root, state)
        wt.save_state()
        return wt

    def save_state(self) -> None:
        _atomic_write(self.meta_dir(self.root) / "state.json", json.dumps(asdict(self.state), indent=2) + "\n")

    @property
    def baseline(self) -> str:
        return self.state.baseline

    # ---------------------------------------------------------------------------------------- locking

    def acquire_lock(self, shared: bool = False) -> None:
        fd = self._lock_fd
        if fd is None:
            fd = os.open(self.meta_dir(self.root) / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        holder = locks.take_or_name_holder(fd, shared)
        if holder is not None:
            if self._lock_fd is None:
                os.close(fd)
            raise StateError(
                f"another lgpatch process ({holder}) is {'changing' if shared else 'using'} {self.root}",
                hint="wait for it to finish (apply/revert need the tree to themselves); "
                "a killed process releases the lock by itself",
            )
        if not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        self._lock_fd = fd
        self._exclusive = not shared

    def release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
            self._exclusive = False

    # ---------------------------------------------------------------------------------------- journal

    @property
    def journal_path(self) -> Path:
        return self.meta_dir(self.root) / "journal.json"

    @contextlib.contextmanager
    def journal(self, op: str, **info: Any) -> Iterator[None]:
        """Record an operation before it touches the tree; remove the record only when it completed."""
        entry = {"op": op, "head": self.git.head(), "pid": os.getpid(), "time": time.time(),
                 "locks": recovery.locks_for(self.root, op, info), **info}
        _atomic_write(self.journal_path, json.dumps(entry), durable=False)
        yield
        self.journal_path.unlink(missing_ok=True)

    def repair(self) -> list[str]:
        """Bring a tree left by a killed process back to a step boundary (see recovery.py). Only under the exclusive
        lock: the git lock files it removes must not belong to a live lgpatch."""
        if not self.journal_path.exists():
            return []
        if not self._exclusive:
            self.acquire_lock()  # converts a shared lock in place, or refuses while another lgpatch holds it
        hooked = self._run_repair_hook()
        if hooked is not None:
            return hooked
        return recovery.repair(self)

    def _run_repair_hook(self) -> list[str] | None:
        """An operation journaled by another package (authoring's refresh writes recipe files, not the tree) names
        the function that knows how to undo it; None when the journal names none."""
        try:
            entry = json.loads(self.journal_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        hook = str(entry.get("repair_hook") or "") if isinstance(entry, dict) else ""
        if not hook.startswith("legacy_gpu_patch."):
            return None
        import importlib

        from legacy_gpu_patch.console import warn

        module, _, func = hook.partition(":")
        done: list[str] = getattr(importlib.import_module(module), func)(self, entry)
        self.journal_path.unlink(missing_ok=True)
        warn("; ".join(done))
        return done

    def is_step_commit(self, commit: str | None, key: str | None) -> bool:
        if not commit or not key:
            return False
        trailers = parse_trailers(self.git.out("log", "-1", "--format=%B", commit))
        return trailers.get("Lgpatch-Step") == key

    # ---------------------------------------------------------------------------------------- ledger

    def ledger(self) -> Ledger:
        raw = self.git.run("log", "--reverse", "-z", "--format=%H%n%B", f"{self.baseline}..HEAD").stdout
        applied: list[AppliedStep] = []
        foreign: list[str] = []
        for record in raw.decode("utf-8", errors="replace").split("\0"):
            record = record.strip("\n")
            if not record:
                continue
            sha, _, body = record.partition("\n")
            trailers = parse_trailers(body)
            if "Lgpatch-Step" in trailers and not foreign:
                applied.append(AppliedStep(sha, trailers["Lgpatch-Step"], trailers.get("Lgpatch-Digest", ""),
                                           body.split("\n", 1)[0]))
            else:
                foreign.append(sha)
        return Ledger(tuple(applied), tuple(foreign))

    def dirty_paths(self) -> list[str]:
        return [entry[3:] for entry in self.git.status_porcelain()]

    def describe_head(self) -> str:
        head = self.git.head()
        if head == self.baseline:
            return "the pristine baseline"
        trailers = parse_trailers(self.git.out("log", "-1", "--format=%B", "HEAD"))
        step = trailers.get("Lgpatch-Step")
        return f"step {step}" if step else f"commit {str(head)[:12]}"


def parse_trailers(body: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in _TRAILER_RE.finditer(body)}


def format_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
