"""Progress bars for clone, fetch, download and unpack (rich), on stderr; none when stderr is not a terminal or
with -q."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Bar:
    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def update(self, done: float, total: float | None = None, text: str | None = None) -> None:
        if self._progress is None:
            return
        kwargs: dict[str, Any] = {"completed": done}
        if total:
            kwargs["total"] = total
        if text:
            kwargs["description"] = text
        self._progress.update(self._task, **kwargs)


@contextmanager
def bar(description: str, unit: str = "bytes") -> Iterator[Bar]:
    from legacy_gpu_patch.console import console, is_quiet

    if is_quiet() or not sys.stderr.isatty():
        yield Bar(None, None)
        return
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    amount = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    with Progress(TextColumn("{task.description}"), BarColumn(), amount, TimeElapsedColumn(),
                  console=console(), transient=True) as progress:
        yield Bar(progress, progress.add_task(description, total=None))
