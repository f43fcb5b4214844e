"""An `arch` parameter holding a list of targets (the multi-architecture wheel, sm_80,sm_86,sm_89,sm_90+ptx): one
stored spelling per set, every target checked against choices and ranges, `when:` true when any target matches,
and the flags and wheel label derived from the list."""

from __future__ import annotations

import pytest

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.gpuarch import ArchSyntaxError, canonical_arch_list, parse_arch_list
from legacy_gpu_patch.config.params import Param, canonical_arch_value, param_problem
from legacy_gpu_patch.cuda.archflags import flags_for

ISSUE_LIST = "sm_80,sm_86,sm_89,sm_90+ptx"


def _arch_param(choices: tuple[str, ...] | None = ("sm_80", "sm_86", "sm_89", "sm_90"),
                allowed: str | None = None) -> Param:
    return Param("arch", "arch", "sm_86", choices, allowed, None, "")


@pytest.mark.parametrize("given, stored", [
    ("sm_90", "sm_90"),  # a single target is stored exactly as before
    ("sm_90+ptx", "sm_90+ptx"),
    ("sm_90+ptx,sm_80,sm_86,sm_89", ISSUE_LIST),  # sorted by capability
    ("sm_80, sm_86 ;sm_89 sm_90+ptx", ISSUE_LIST),  # any separator
    ("sm_90,sm_80,sm_90", "sm_80,sm_90"),  # duplicates collapse
    ("sm_90,compute_90,sm_80", "sm_80,sm_90+ptx"),  # sm_90 + compute_90 is sm_90+ptx
    ("compute_75,sm_86", "compute_75,sm_86"),
])
def test_one_spelling_per_set_of_targets(given: str, stored: str) -> None:
    assert canonical_arch_list(given) == stored
    assert canonical_arch_value(given.upper()) == stored  # the command line lower-cases first


def test_a_list_is_refused_item_by_item_and_an_empty_one_too() -> None:
    with pytest.raises(ArchSyntaxError, match="'sm_9x' is not a GPU architecture"):
        parse_arch_list("sm_80,sm_9x", recipe_value=True)
    with pytest.raises(ArchSyntaxError, match=r"'8\.6' is not a GPU architecture"):
        parse_arch_list("sm_80,8.6", recipe_value=True)  # recipes spell targets the way nvcc does
    with pytest.raises(ArchSyntaxError, match="no GPU architecture given"):
        parse_arch_list(" , ")
    assert canonical_arch_value("sm_80,Bogus") == "sm_80,bogus"  # left for param_problem to explain


def test_every_target_must_be_a_choice_with_ptx_counted_as_its_gpu() -> None:
    p = _arch_param()
    assert param_problem(p, ISSUE_LIST) is None
    assert param_problem(p, "sm_90+ptx") is None  # was refused before: "sm_90+ptx" is not literally a choice
    problem = param_problem(p, "sm_75,sm_86")
    assert problem is not None and problem.startswith("'sm_75' (in 'sm_75,sm_86') is not one of sm_80, sm_86")
    # PTX only is another thing than the GPU's cubin: it must be listed itself
    assert "'compute_90' is not one of" in (param_problem(p, "compute_90") or "")
    assert param_problem(_arch_param(("sm_86", "compute_90")), "sm_86,compute_90") is None
    assert "'sm_8' is not a GPU architecture" in (param_problem(p, "sm_80,sm_8") or "")
    assert param_problem(_arch_param(None), "") == "no GPU architecture given"


def test_an_allowed_range_holds_for_every_target() -> None:
    p = _arch_param(None, ">=sm_80")
    assert param_problem(p, ISSUE_LIST) is None
    assert param_problem(p, "sm_75,sm_90") == "'sm_75' is outside the allowed range >=sm_80"


@pytest.mark.parametrize("cond, value, expected", [
    (">=sm_80", "sm_75,sm_86", True),  # the sm_86 code needs the sm_80+ fix: the tree must have it
    (">=sm_80", "sm_70,sm_75", False),
    ("<sm_80", ISSUE_LIST, False),
    ("<sm_80", "sm_75,sm_86", True),  # a fix for the sm_75 code
    (">=sm_81,<sm_86", "sm_80,sm_90", False),  # one alternative's clauses hold for the same target, not across two
    (">=sm_81,<sm_87", "sm_80,sm_86", True),
    (["sm_89", "sm_100"], ISSUE_LIST, True),  # alternatives: any of them, for any target
    ("sm_90", "sm_90+ptx", True),
    ("!=sm_90", "sm_90", False),
    ("!=sm_90", "sm_86,sm_90", True),  # some target is not sm_90
])
def test_a_condition_holds_when_any_target_satisfies_it(cond: object, value: str, expected: bool) -> None:
    assert conditions.holds("arch", cond, value) is expected
    # the single-target answers are unchanged: a list is the OR of its targets
    singles = [conditions.holds("arch", cond, a.name) for a in parse_arch_list(value)]
    assert expected is any(singles)


def test_the_reason_names_the_targets_that_matched() -> None:
    verdict = conditions.evaluate({"arch": ">=sm_86"}, {"arch": ISSUE_LIST}, {"arch": "arch"})
    assert verdict.selected
    assert verdict.reasons == (f"arch={ISSUE_LIST} matches >=sm_86 (sm_86, sm_89, sm_90+ptx)",)
    single = conditions.evaluate({"arch": ">=sm_86"}, {"arch": "sm_90"}, {"arch": "arch"})
    assert single.reasons == ("arch=sm_90 matches >=sm_86",)  # as before
    miss = conditions.evaluate({"arch": ">=sm_100"}, {"arch": ISSUE_LIST}, {"arch": "arch"})
    assert not miss.selected and miss.reasons == (f"arch={ISSUE_LIST} does not match >=sm_100",)


def test_the_issues_list_gives_pytorchs_arch_list_and_a_label_that_names_every_target() -> None:
    flags = flags_for(ISSUE_LIST)
    assert flags.torch_cuda_arch_list == "8.0;8.6;8.9;9.0+PTX"
    assert flags.cmake_cuda_architectures == "80-real;86-real;89-real;90"
    assert flags.sass_archs == ("sm_80", "sm_86", "sm_89", "sm_90") and flags.ptx_archs == ("compute_90",)
    assert flags.wheel_label == "sm80.sm86.sm89.sm90ptx"
    assert flags_for([ISSUE_LIST]) == flags  # a parameter's value inside a sequence is split too
    assert flags_for(["sm_90"]).wheel_label == "sm90"  # 1.5.0+lgpatch.cu130.sm90, as single-arch wheels were
    assert flags_for(["sm_90+ptx"]).wheel_label == "sm90ptx"
    assert flags_for(["compute_75", "sm_90a"]).wheel_label == "compute75.sm90a"


def test_the_label_is_a_valid_local_version_that_normalisation_keeps() -> None:
    from packaging.version import Version

    for text in (ISSUE_LIST, "sm_90", "compute_75,sm_100f+ptx"):
        label = flags_for(text).wheel_label
        version = f"1.5.0+lgpatch.cu130.{label}"
        assert str(Version(version)) == version
