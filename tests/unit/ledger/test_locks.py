"""locks.take_or_name_holder against a lock a real child process holds: the holder named is a live one, seen in
the same look that followed the failed try (a later look may find it gone; CI once printed "pid unknown" then)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from legacy_gpu_patch.ledger import locks

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")

HOLD = (
    "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); "
    "print('held', flush=True); sys.stdin.read()"
)


@pytest.fixture
def held_dir(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A folder (like a new workdir's claim) whose flock a child process holds until its stdin closes."""
    folder = tmp_path / "wt"
    folder.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    yield folder, child.pid
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)


def test_names_the_child_holding_the_lock(held_dir: tuple[Path, int]) -> None:
    folder, pid = held_dir
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert locks.take_or_name_holder(fd) == f"pid {pid}"
    finally:
        os.close(fd)


def test_a_holder_gone_by_the_second_look_is_still_the_one_named(
    held_dir: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interleaving CI hit: the look after the failed try sees the holder, and any later look would not.
    folder, pid = held_dir
    looks = iter([[pid]])
    monkeypatch.setattr(locks, "holders", lambda fd: next(looks, []))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert locks.take_or_name_holder(fd) == f"pid {pid}"
    finally:
        os.close(fd)


def test_a_look_that_finds_nobody_tries_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The holder let go between the failed try and the look: the next try takes the lock.
    tries = iter([False, True])
    monkeypatch.setattr(locks, "try_flock", lambda fd, shared=False: next(tries))
    monkeypatch.setattr(locks, "holders", lambda fd: [])
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert locks.take_or_name_holder(fd) is None
    finally:
        os.close(fd)
