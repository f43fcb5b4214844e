"""CuPy 1.24's loop tables and cdef functions as a patched Chainer tree has them at a ledger step, made plain Python
so that tests run a patchset's choice logic (and the code before it) on the CPU, without building CuPy."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy

from helpers import git
from helpers.reduction_template import commit_of, text_at


def op_tables(tree: Path, step: str) -> dict[str, list[tuple]]:
    """Every create_ufunc / create_reduction_func table written as a literal in CuPy 1.24 (core.pyx, cupy/) as it
    builds them: (in types, out types, routine) with NumPy scalar types, in the table's order."""
    tables: dict[str, list[tuple]] = {}
    files = git(tree, "ls-tree", "-r", "--name-only", commit_of(tree, step), "cupy").split()
    sources = [text_at(tree, step, path) for path in files if path.endswith((".py", ".pyx", ".pxi"))]
    for name, body in re.findall(r"create_(?:ufunc|reduction_func)\(\s*'(\w+)',\s*\((.*?)\)\s*,",
                                 "\n".join(sources), re.S):
        ops = []
        for sig in re.findall(r"'([?a-zA-Z]+->[?a-zA-Z]+)'", body):
            ins, outs = sig.split("->")
            ops.append((tuple(numpy.dtype(c).type for c in ins), tuple(numpy.dtype(c).type for c in outs), None))
        if ops:
            tables[name] = ops
    return tables


def cdef_function(source: str, name: str, params: str, namespace: dict[str, Any]) -> Any:
    """The cdef (or cpdef) function `name` of a .pxi/.pyx as a Python function taking `params`: its signature and
    its `cdef` declaration lines dropped (the body is otherwise Python), defined into `namespace`."""
    body = re.search(rf"^c(?:p)?def \w+ {name}\(.*?\)(?: except \*)?:\n(.*?)(?=^\S)", source, re.S | re.M)
    assert body, f"no cdef function {name}"
    lines = [line for line in body.group(1).splitlines() if not line.strip().startswith("cdef ")]
    with warnings.catch_warnings():  # CuPy writes `op is ()`: the empty tuple is one object in CPython
        warnings.simplefilter("ignore", SyntaxWarning)
        exec(f"def {name}({params}):\n" + "\n".join(lines) + "\n", namespace)
    return namespace[name]
