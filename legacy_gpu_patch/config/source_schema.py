"""Schema of a recipe's `source:` section and its typed form: a pinned git commit or a pinned sdist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from legacy_gpu_patch.config.patchset import COMMIT, HTTP_URL, SHA256
from legacy_gpu_patch.config.schema import AnyOf, Bool, Key, ListOf, Map, Str, relpath_check

PYPI_SIMPLE = "https://pypi.org/simple"

SOURCE_SCHEMA = Map(
    {
        "git": Key(
            Map(
                {
                    "url": Key(Str(), required=True),
                    "ref": Key(Str(allow_numbers=True), required=True),
                    "commit": Key(Str(pattern=COMMIT, what="a full 40-hex commit id"), required=True),
                    # true: all, recursively; or the paths the build needs (PyTorch has ~30, a CUDA build needs ~10)
                    "submodules": Key(AnyOf([(lambda v: isinstance(v, list),
                                              ListOf(Str(check=relpath_check, what="a submodule path"), min_items=1)),
                                             (lambda v: True, Bool())], what="true/false or a list of submodule paths"),
                                      default=False),
                },
                what="git source",
            )
        ),
        "sdist": Key(
            Map(
                {
                    "name": Key(Str(), default=None),
                    "version": Key(Str(allow_numbers=True), default=None),
                    "url": Key(Str(pattern=HTTP_URL, what="an http(s) URL"), default=None),
                    "sha256": Key(Str(pattern=SHA256, what="64 lowercase hex digits"), required=True),
                    "index": Key(Str(), default=PYPI_SIMPLE),
                },
                what="sdist source",
            )
        ),
    },
    one_of=("git", "sdist"),
    what="source mapping",
    one_of_why="a recipe has one source",
)


@dataclass(frozen=True)
class GitSource:
    url: str
    ref: str
    commit: str
    submodules: bool | tuple[str, ...]  # True: all, recursively; a tuple: those paths only

    kind = "git"


@dataclass(frozen=True)
class SdistSource:
    sha256: str
    name: str | None = None
    version: str | None = None
    url: str | None = None
    index: str = PYPI_SIMPLE

    kind = "sdist"

    @property
    def label(self) -> str:
        return f"{self.name or 'sdist'}=={self.version or '?'}"


Source = Union[GitSource, SdistSource]


def make_source(data: dict[str, Any]) -> Source:
    """The validated `source:` mapping (one of git/sdist) as its frozen type."""
    if "git" in data:
        git = data["git"]
        subs = git["submodules"]
        return GitSource(git["url"], git["ref"], git["commit"], tuple(subs) if isinstance(subs, list) else subs)
    sdist = data["sdist"]
    return SdistSource(sdist["sha256"], sdist["name"], sdist["version"], sdist["url"], sdist["index"])
