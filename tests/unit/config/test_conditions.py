"""`when:` conditions: version ranges, arch ranges, lists as OR, booleans, plain values, and ${param} templates."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_patchset, write_recipe

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.conditions import arch_number, check_condition, evaluate, holds, parse_version, render
from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.ledger.plan import make_plan, resolve_params

# ------------------------------------------------------------------------------------------- values


@pytest.mark.parametrize(("text", "number"), [
    ("sm_86", 86), ("sm_90", 90), ("sm_100", 100), ("sm_90a", 90), ("sm_100a", 100), ("compute_75", 75),
    ("sm_86+ptx", 86), (" sm_80 ", 80),
])
def test_arch_number(text: str, number: int) -> None:
    assert arch_number(text) == number


@pytest.mark.parametrize("text", ["sm86", "sm_8", "86", "SM_86", "sm_86 ptx", "", "gfx90a", "sm_1000"])
def test_arch_number_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="is not a GPU architecture"):
        arch_number(text)


def test_parse_version() -> None:
    assert parse_version("11.1") < parse_version("11.10")  # numeric, not lexical
    assert parse_version("12") == parse_version("12.0")
    with pytest.raises(ValueError, match=r"'eleven' is not a version \(like 11.1 or 3.12\)"):
        parse_version("eleven")


# ------------------------------------------------------------------------------------------- ranges

VERSION_CASES = [
    (">=11.0", "11.0", True), (">=11.0", "10.2", False), (">=11.0", "12.4", True),
    (">=11.0,<13", "12.9", True), (">=11.0,<13", "13.0", False), (">=11.0,<13", "10.99", False),
    (">= 11.0 , < 13", "12.1", True),  # spaces are allowed
    ("==12.*", "12.4", True), ("==12.*", "12.0.1", True), ("==12.*", "13.0", False), ("==12.*", "11.8", False),
    ("!=11.2", "11.2", False), ("!=11.2", "11.3", True),
    (">11.8", "11.8", False), (">11.8", "11.8.1", True), ("<=11.8", "11.8", True),
    ("<12", "12.0", False), ("<12", "11.8", True),
    ("<3.10", "3.9", True), ("<3.10", "3.10", False), (">=3.10", "3.12", True),  # 3.10 > 3.9, numerically
    (">=11.0", "12.0rc1", True),  # pre-releases of toolkits count (early-access CUDA builds)
    ("11.0", "11", True), ("11.0", "11.0.0", True), ("11.0", "11.1", False),  # a plain value is equality
]


@pytest.mark.parametrize(("cond", "value", "expected"), VERSION_CASES)
def test_version_ranges(cond: str, value: str, expected: bool) -> None:
    assert check_condition("version", cond) is None
    assert holds("version", cond, value) is expected


ARCH_CASES = [
    (">=sm_80", "sm_86", True), (">=sm_80", "sm_80", True), (">=sm_80", "sm_75", False),
    (">=sm_80", "sm_90a", True), (">=sm_80", "sm_100", True),
    (">sm_80", "sm_80", False), ("<sm_90", "sm_89", True), ("<sm_90", "sm_90", False), ("<=sm_75", "sm_75", True),
    (">=sm_80,<sm_90", "sm_86", True), (">=sm_80,<sm_90", "sm_90", False), (">=sm_80,<sm_90", "sm_75", False),
    ("==sm_86", "sm_86", True), ("!=sm_87", "sm_87", False), ("!=sm_87", "sm_86", True),
    (">=compute_80", "sm_86", True),  # compute_XX and sm_XX compare by number
    ("sm_86", "sm_86", True), ("sm_86", "sm_89", False), ("sm_86", "sm_86+ptx", True),
]


@pytest.mark.parametrize(("cond", "value", "expected"), ARCH_CASES)
def test_arch_ranges(cond: str, value: str, expected: bool) -> None:
    assert check_condition("arch", cond) is None
    assert holds("arch", cond, value) is expected


# ------------------------------------------------------------------------------------------- lists, bools, strings


@pytest.mark.parametrize(("kind", "cond", "value", "expected"), [
    ("arch", ["sm_86", "sm_90"], "sm_90", True),
    ("arch", ["sm_86", "sm_90"], "sm_89", False),
    ("arch", ["<sm_70", ">=sm_90"], "sm_60", True),
    ("arch", ["<sm_70", ">=sm_90"], "sm_80", False),
    ("arch", [">=sm_80,<sm_86", "sm_90"], "sm_86", False),  # commas AND inside one alternative
    ("version", [">=12", "11.8"], "11.8", True),
    ("version", [">=12", "11.8"], "11.7", False),
    ("version", [">=12", "11.8"], "12.4", True),
    ("version", ["==10.*", "==12.*"], "11.1", False),
    ("string", ["gcc", "clang"], "clang", True),
    ("string", ["gcc", "clang"], "icc", False),
])
def test_lists_are_alternatives(kind: str, cond: list[str], value: str, expected: bool) -> None:
    assert check_condition(kind, cond) is None
    assert holds(kind, cond, value) is expected


def test_bools() -> None:
    assert holds("bool", True, True) and not holds("bool", True, False)
    assert holds("bool", False, False) and not holds("bool", False, True)
    assert holds("bool", [True, False], False)
    assert check_condition("bool", True) is None
    assert check_condition("bool", "yes") == "expected true or false, got 'yes'"
    assert check_condition("bool", 1) == "expected true or false, got 1"


def test_plain_strings_compare_as_text() -> None:
    assert holds("string", "auto", "auto") and not holds("string", "auto", "Auto")
    assert holds("string", 3, "3")  # a YAML number against a string value: compared as text


@pytest.mark.parametrize(("kind", "cond", "problem"), [
    ("version", ">=11.x", "'>=11.x' is not a version range (like '>=11.0,<13')"),
    ("version", ">=11.0,<=x", "'>=11.0,<=x' is not a version range (like '>=11.0,<13')"),
    ("version", ">=sm_80", "'>=sm_80' is not a version range (like '>=11.0,<13')"),
    ("version", "eleven", "'eleven' is not a version (like 11.1 or 3.12)"),
    ("version", [">=11", "x"], "'x' is not a version (like 11.1 or 3.12)"),  # every alternative is checked
    ("arch", ">=sm80", "'sm80' is not a GPU architecture (like sm_86 or sm_90)"),
    ("arch", ">=11.0", "'11.0' is not a GPU architecture (like sm_86 or sm_90)"),
    ("arch", ["sm_86", "sm_9O"], "'sm_9O' is not a GPU architecture (like sm_86 or sm_90)"),
    ("arch", ">=", "'' is not a GPU architecture (like sm_86 or sm_90)"),
])
def test_bad_conditions_are_reported(kind: str, cond: object, problem: str) -> None:
    assert check_condition(kind, cond) == problem


# ------------------------------------------------------------------------------------------- evaluate


def test_evaluate_is_and_with_reasons() -> None:
    kinds = {"cuda": "version", "arch": "arch", "cudnn": "bool"}
    when = {"cuda": ">=11.0", "arch": ["sm_86", "sm_90"]}
    v = evaluate(when, {"cuda": "11.1", "arch": "sm_90"}, kinds)
    assert v.selected and v.reasons == ("cuda=11.1 matches >=11.0", "arch=sm_90 matches sm_86 or sm_90")
    v = evaluate(when, {"cuda": "10.2", "arch": "sm_90"}, kinds)
    assert not v.selected
    assert v.reasons == ("cuda=10.2 does not match >=11.0", "arch=sm_90 matches sm_86 or sm_90")
    v = evaluate({"cudnn": False}, {"cudnn": True}, kinds)
    assert not v.selected and v.reasons == ("cudnn=True does not match False",)
    assert evaluate(None, {}, kinds).selected and evaluate({}, {}, kinds).reasons == ()


# ------------------------------------------------------------------------------------------- templates


@pytest.mark.parametrize(("text", "expected"), [
    ("${cuda}", "11.1"),
    ("-arch=${arch} -DCUDA=${cuda}", "-arch=sm_86 -DCUDA=11.1"),
    ("cost: $$5", "cost: $5"),
    ("$${cuda}", "${cuda}"),  # $$ first: a literal ${...}
    ("$$${cuda}", "$11.1"),
    ("$cuda and $ alone", "$cuda and $ alone"),  # only ${name} is a template
    ("${cudnn}", "True"),
    ("no templates", "no templates"),
])
def test_render(text: str, expected: str) -> None:
    assert render(text, {"cuda": "11.1", "arch": "sm_86", "cudnn": True}) == expected


def test_render_unknown_name_raises_keyerror() -> None:
    with pytest.raises(KeyError, match="cdua"):
        render("${cdua}", {"cuda": "11.1"})


def test_template_names() -> None:
    assert conditions.template_names("${a} $${b} ${c} $d ${e") == {"a", "c"}


# ------------------------------------------------------------------------------------------- in a recipe

PIN = "0123456789abcdef0123456789abcdef01234567"
NESTED = f"""\
name: nest
description: conditions at three levels
source:
  git: {{url: "file:///nowhere", ref: v1, commit: {PIN}}}
parameters:
  cuda: {{type: version, default: "11.1"}}
  arch: {{type: arch, default: sm_86}}
  python: {{type: version, default: "3.9"}}
  cudnn: {{type: bool, default: true}}
steps:
  - patchset: host-api
    when: {{cuda: ">=11.0"}}
  - id: py310
    when: {{python: 3.10}}
    regex: {{files: ["*.py"], pattern: x, replace: y}}
  - id: no-cudnn
    when: {{cudnn: false}}
    regex: {{files: ["*.py"], pattern: x, replace: y}}
"""
HOST_API = """\
name: host-api
description: two steps
when: {arch: ">=sm_80"}
steps:
  - id: always
    regex: {files: ["*.h"], pattern: a, replace: b}
  - id: only-12
    when: {cuda: ["==12.*", ">=13"]}
    regex: {files: ["*.h"], pattern: a, replace: b}
"""


@pytest.fixture
def nested(tmp_path: Path):
    d = tmp_path / "recipes"
    write_recipe(d, NESTED, "nest.yaml")
    write_patchset(d, "host-api", HOST_API)
    return load_recipe(d / "nest.yaml", SearchPath.from_options([d]))


def _selected(recipe, **given: str) -> list[str]:
    return [p.step.key for p in make_plan(recipe, resolve_params(recipe, given)) if p.selected]


def test_all_three_levels_must_hold(nested) -> None:
    assert _selected(nested) == ["host-api/always"]
    assert _selected(nested, cuda="12.4") == ["host-api/always", "host-api/only-12"]
    assert _selected(nested, cuda="13.0", arch="sm_75") == []  # the patchset's own `when` fails
    assert _selected(nested, cuda="10.2", arch="sm_90") == []  # the recipe entry's `when` fails
    assert _selected(nested, cudnn="off") == ["host-api/always", "recipe/no-cudnn"]


def test_skipped_step_says_why(nested) -> None:
    plan = {p.step.key: p for p in make_plan(nested, resolve_params(nested, {"cuda": "10.2", "arch": "sm_75"}))}
    assert plan["host-api/only-12"].reasons == (
        "cuda=10.2 does not match >=11.0", "arch=sm_75 does not match >=sm_80",
        "cuda=10.2 does not match ==12.* or >=13",
    )


def test_unquoted_yaml_version_keeps_its_trailing_zero(nested) -> None:
    # YAML reads `python: 3.10` as the float 3.1: the step meant for Python 3.10 would be silently skipped for 3.10
    # (and run for 3.1). Versions written without quotes must keep the text as written (yamlio keeps float text).
    assert "recipe/py310" in _selected(nested, python="3.10")
    assert "recipe/py310" not in _selected(nested, python="3.1")
