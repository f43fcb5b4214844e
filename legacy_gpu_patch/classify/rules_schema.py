"""Schema of the classifier's rule files (legacy_gpu_patch/classify/rules/*.yaml), as data.

A rule file is a mapping with `rules:` (an ordered list) and optionally `macros:` (named regex fragments written
`{NAME}` inside patterns), `literal_sets:` (named prefilter lists), `triggers:` (the literals that decide which
lines are looked at at all: each is searched in every line of a log), and `lead:` (try this file's rules first).
File order, then list order, is priority: the first rule that matches a line decides it, so exceptions (lines
that look like errors but are not) come before the rules they protect against.
"""

from __future__ import annotations

from legacy_gpu_patch.classify.categories import CATEGORIES  # re-exported: the ids are part of the schema
from legacy_gpu_patch.config.schema import Bool, Int, Key, ListOf, Map, MapOf, Str

__all__ = ["BLOCK_SCHEMA", "CATEGORIES", "RULES_FILE_SCHEMA", "RULE_ID", "RULE_SCHEMA"]

RULE_ID = r"[a-z0-9][a-z0-9-]*"

BLOCK_SCHEMA = Map(
    {
        # A header line opens a block: following lines are joined to it and the whole is classified again.
        "continue": Key(Str(what="a regular expression"), default=r"^(?:\s|$)"),  # a line that continues it
        "stop": Key(Str(what="a regular expression"), default=None),  # ends it, exclusive
        "end": Key(Str(what="a regular expression"), default=None),  # ends it, inclusive
        "max_lines": Key(Int(minimum=1), default=30),
    },
    what="block mapping",
)

RULE_SCHEMA = Map(
    {
        "id": Key(Str(pattern=RULE_ID, what="a rule id of lowercase letters, digits and '-'"), required=True),
        "category": Key(Str(choices=tuple(CATEGORIES)), default="other"),
        "pattern": Key(Str(), required=True),
        "prefilter": Key(ListOf(Str(), single_ok=True), default=list),
        "severity": Key(Str(choices=("error", "warning")), default="error"),
        "explanation": Key(Str(), default=""),
        "fix": Key(Str(), default=""),
        "patchset": Key(ListOf(Str(pattern=r"[a-z0-9][a-z0-9.+_-]*", what="a patchset name"), single_ok=True),
                        default=list),
        "exception": Key(Bool(), default=False),  # matching lines are not findings
        "secondary": Key(Bool(), default=False),  # a consequence (make's "Error 1"): ranked after root causes
        "generic": Key(Bool(), default=False),  # a catch-all: a more specific reading is tried first
        "case_sensitive": Key(Bool(), default=False),
        "block": Key(BLOCK_SCHEMA, default=None),
        "examples": Key(ListOf(Str(allow_numbers=True)), default=list),  # lines this rule must decide
        "not_examples": Key(ListOf(Str(allow_numbers=True)), default=list),  # lines it must not decide
    },
    what="rule",
)

RULES_FILE_SCHEMA = Map(
    {
        # a lead file's rules are tried first, one by one (each gated by its own prefilter), before the literal
        # index picks among the rest: cheap exceptions decide the common innocent lines early
        "lead": Key(Bool(), default=False),
        "macros": Key(MapOf(Str(), key=Str(pattern=r"[A-Z][A-Z0-9_]*", what="an UPPERCASE macro name")),
                      default=dict),
        # named prefilter lists, used in a rule as prefilter: [$NAME, ...]
        "literal_sets": Key(MapOf(ListOf(Str(), min_items=1), key=Str(pattern=r"[A-Z][A-Z0-9_]*",
                                                                          what="an UPPERCASE name")),
                            default=dict),
        "triggers": Key(ListOf(Str()), default=list),
        "rules": Key(ListOf(RULE_SCHEMA), default=list),
    },
    what="rules file",
)
