"""One GPU architecture parser for recipe conditions and build flags: the two agree on suffixes and numbers, and
differ only where a recipe value is stricter (nvcc's lower-case spelling only)."""

from __future__ import annotations

import pytest

from legacy_gpu_patch.config.conditions import arch_number, check_condition
from legacy_gpu_patch.config.gpuarch import ArchSyntaxError, parse_arch
from legacy_gpu_patch.cuda import archflags


@pytest.mark.parametrize("text", ["sm_86", "sm_90a", "sm_100f", "compute_75", "sm_86+ptx", "sm_120", "compute_90a"])
def test_recipe_spellings_give_the_same_number_everywhere(text: str) -> None:
    assert arch_number(text) == parse_arch(text).number == archflags.flags_for([text]).archs[0].number


@pytest.mark.parametrize("text", ["sm_90x", "sm_86b", "compute_90+ptx", "sm_86+PTXX"])
def test_suffixes_nvcc_does_not_know_are_refused_by_both(text: str) -> None:
    with pytest.raises(ValueError, match="is not a GPU architecture"):
        arch_number(text)
    with pytest.raises(ArchSyntaxError):
        archflags.flags_for([text])
    assert check_condition("arch", f">={text}") is not None


@pytest.mark.parametrize("text", ["SM_86", "8.6", "86", "86-real", "11.0"])
def test_recipe_values_are_nvcc_lower_case_only_while_flags_accept_every_build_spelling(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a GPU architecture \(like sm_86 or sm_90\)"):
        arch_number(text)
    assert parse_arch(text).number in (86, 110)


def test_the_module_that_derives_flags_reexports_the_one_parser() -> None:
    assert archflags.parse_arch is parse_arch and archflags.ArchSyntaxError is ArchSyntaxError
