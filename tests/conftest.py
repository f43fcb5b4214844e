"""Pytest hooks and fixtures. Helpers that tests import live in tests/helpers (imported as `helpers`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import TORCHLIKE, Runner, Upstream, make_upstream, network_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "network" in item.keywords and not network_available():
            item.add_marker(pytest.mark.skip(reason="PyPI (pypi.org:443) is not reachable from this machine"))


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own cache and no CI strictness leaking in from the environment."""
    monkeypatch.setenv("LGPATCH_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("LGPATCH_RECIPE_PATH", raising=False)
    monkeypatch.delenv("LGPATCH_PATCHSET_PATH", raising=False)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return make_upstream(tmp_path / "upstream", TORCHLIKE)


@pytest.fixture
def lgpatch(capsys: pytest.CaptureFixture[str]) -> Runner:
    return Runner(capsys)


@pytest.fixture
def chdir_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real HTTP server on loopback serving a folder (the 'upstream download site')."""
    import functools
    import http.server
    import threading

    root = tmp_path / "site"
    root.mkdir()
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
