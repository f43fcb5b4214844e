"""flock-based locks and who holds them.

The kernel drops a flock when its holder dies (also on kill -9), so a lock is never stale; but the pid written
into a lock file can be: a shared holder does not write it, and a dead exclusive holder's pid stays behind. To name
the *live* holder in "another lgpatch process (pid N)", ask the kernel (/proc/locks on Linux), and fall back to the
written pid only when that process is alive.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from legacy_gpu_patch.gitutil import pid_alive  # re-exported: ledger.create uses locks.pid_alive


def holders(fd: int) -> list[int]:
    """Pids holding a flock on the file open as `fd` (Linux /proc/locks; [] where unavailable)."""
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    pids = []
    for line in text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF"; waiters are marked "->" and hold nothing
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            pids.append(int(fields[4]))
    return sorted(set(pids))


def _named(pids: list[int]) -> str:
    return ("pid " if len(pids) == 1 else "pids ") + ", ".join(map(str, pids))


def describe_holders(fd: int) -> str:
    """'pid 123' (or 'pids 1, 2'), from the kernel, else from the pid written in the file if that one lives."""
    live = [p for p in holders(fd) if p != os.getpid()]
    if live:
        return _named(live)
    return _written_holder(fd)


def _written_holder(fd: int) -> str:
    try:
        written = os.pread(fd, 64, 0).decode(errors="replace").strip()
    except OSError:  # a directory (the claim on a new workdir) has no pid written in it
        written = ""
    number = written.removeprefix("pid ").strip()
    if number.isdigit() and pid_alive(int(number)):
        return f"pid {number}"
    return "pid unknown"


def try_flock(fd: int, shared: bool = False) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def take_or_name_holder(fd: int, shared: bool = False, attempts: int = 20) -> str | None:
    """Take the lock (None), or say who holds it ('pid N').

    The holders named are the ones seen in the same look at /proc/locks that followed the failed try: a second
    look could find them gone (the holder let go in between) and name nobody. A look that finds no holder means
    the lock was let go between the try and the look: try again."""
    for _ in range(attempts):
        if try_flock(fd, shared):
            return None
        live = [p for p in holders(fd) if p != os.getpid()]
        if live:
            return _named(live)
        if not Path("/proc/locks").exists():
            break
    return _written_holder(fd)
