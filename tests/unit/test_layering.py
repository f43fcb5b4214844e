"""The package's dependency rules (docs/architecture.md, "Dependency rules"), checked on the source with `ast`.

Nodes are the top-level folders and root modules of legacy_gpu_patch; every import between two nodes (at module
level or inside a function: a lazy import is still a dependency) must go to the same or a lower layer, and the
graph must have no cycle. tools/ runs under the build's interpreter, so it imports nothing else of lgpatch.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "legacy_gpu_patch"

# Bottom to top. A node may import nodes of its own layer or below, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors"),
    ("console", "progress", "gitutil", "safepath"),
    ("config",),
    ("cuda", "classify", "source", "tools", "hetero"),
    ("ledger", "report"),
    ("build",),
    ("ci", "authoring"),
    ("commands", "cli", "__main__"),
)
LAYER = {node: i for i, names in enumerate(LAYERS) for node in names}
STANDALONE = {"tools"}  # may import only itself (and the standard library)


def _node(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _targets(tree: ast.AST) -> list[tuple[str, int]]:
    """(node, line) of every legacy_gpu_patch import in a module."""
    out = []
    for n in ast.walk(tree):
        names: list[str] = []
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            if n.module == "legacy_gpu_patch":
                names = [f"legacy_gpu_patch.{a.name}" for a in n.names]
            else:
                names = [n.module]
        elif isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        for name in names:
            parts = name.split(".")
            if parts[0] != "legacy_gpu_patch":
                continue
            target = parts[1] if len(parts) > 1 else "__init__"
            # `from legacy_gpu_patch import __version__` is the package itself
            out.append(("__init__" if target == "__version__" else target, n.lineno))
    return out


def _edges() -> dict[str, dict[str, str]]:
    """source node -> target node -> one place that imports it ("file:line")."""
    edges: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _node(path)
        for target, line in _targets(ast.parse(path.read_text(encoding="utf-8"))):
            if target != src:
                edges[src].setdefault(target, f"{path.relative_to(REPO)}:{line}")
    return edges


def test_every_node_has_a_layer() -> None:
    nodes = {_node(p) for p in PACKAGE.rglob("*.py")}
    assert nodes == set(LAYER), f"in the tree but not in LAYERS: {sorted(nodes - set(LAYER))}; " \
                                f"in LAYERS but not in the tree: {sorted(set(LAYER) - nodes)}"


def test_no_import_runs_up_the_layers() -> None:
    upward = [f"{where}: {src} (layer {LAYER[src]}) imports {dst} (layer {LAYER[dst]})"
              for src, targets in _edges().items() for dst, where in targets.items() if LAYER[dst] > LAYER[src]]
    assert not upward, "\n".join(upward)


def test_standalone_nodes_import_nothing_else() -> None:
    edges = _edges()
    leaks = [f"{where}: {src} imports {dst}" for src in STANDALONE for dst, where in edges.get(src, {}).items()]
    assert not leaks, "\n".join(leaks)


def _cycle(edges: dict[str, dict[str, str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_cycle_between_folders_and_root_modules() -> None:
    edges = _edges()
    cycle = _cycle(edges)
    assert cycle is None, " -> ".join(cycle or []) + "\n" + "\n".join(
        edges[a][b] for a, b in zip(cycle or [], (cycle or [])[1:]))


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The check above must be able to fail: a two-node cycle and a three-node one are found, a chain is not.
    assert _cycle({"a": {"b": ""}, "b": {"a": ""}}) == ["a", "b", "a"]
    assert _cycle({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": ""}, "b": {"c": ""}}) is None


def test_architecture_doc_tables_match_the_tree() -> None:
    """docs/architecture.md: the layout table has one line per folder and root module, the layer table is LAYERS."""
    import re

    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    layout = page.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \|", layout, re.M)
    named = {r.rstrip("/").removesuffix(".py") for r in rows}
    nodes = {_node(p) for p in PACKAGE.rglob("*.py")}
    assert named == nodes and len(rows) == len(nodes), (sorted(nodes - named), sorted(named - nodes))
    rules = page.split("## Dependency rules", 1)[1].split("\n## ", 1)[0]
    doc_layers = {int(n): set(re.findall(r"`([^`]+)`", names))
                  for n, names in re.findall(r"^\| (\d) \| ([^|]+) \|", rules, re.M)}
    assert doc_layers == {i: set(names) for i, names in enumerate(LAYERS)}
