"""Recipe and patchset validation: every error names file, line and key path, and suggests the closest valid choice.

The recipe below is written by the test into a temporary folder; each case edits one line of it and checks the exact
`file:line: key.path:` prefix of the message (the part a user's editor jumps to) and the suggestion.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import PIN, demo_recipe_head, write_patchset, write_recipe

from legacy_gpu_patch.config.recipe import SearchPath, find_recipe, load_recipe
from legacy_gpu_patch.errors import ConfigError, ExitCode, LgpatchError

# Line numbers matter: the cases below refer to them (1 name, 3 description, 7 cuda, 12 the inline step, ...).
# Lines 1-7 come from conftest's demo_recipe_head: 2 aliases, 5 the git source, 6 parameters.
RECIPE = demo_recipe_head() + """\
  arch: {type: arch, default: sm_86, choices: [sm_75, sm_86, sm_90]}
  cudnn: {type: bool, default: true}
steps:
  - widen-guard
  - id: rename
    when: {arch: ">=sm_80"}
    regex:
      files: ["**/*.h"]
      pattern: CAFFE2_API
      replace: TORCH_API
"""

PATCHSET = """\
name: widen-guard
description: Widen the __CUDA_ARCH__ guard.
when: {cuda: ">=11.0"}
steps:
  - id: widen
    when: {arch: ">=sm_80"}
    patch: widen.patch
"""

WIDEN = "--- a/x.h\n+++ b/x.h\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path/recipes with the recipe and its patchset; the cwd is tmp_path so messages say recipes/demo.yaml."""
    monkeypatch.chdir(tmp_path)
    d = tmp_path / "recipes"
    write_recipe(d, RECIPE)
    write_patchset(d, "widen-guard", PATCHSET, {"widen.patch": WIDEN})
    return d


def _load(d: Path):
    return load_recipe(Path("recipes/demo.yaml"), SearchPath.from_options([d]))


def _edit_error(d: Path, file: str, text: str, old: str, new: str) -> str:
    """Write `text` with `old` (which must occur) replaced by `new` to d/file, load the recipe, and return the
    ConfigError's message."""
    assert old in text, old
    (d / file).write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        _load(d)
    return info.value.message


def recipe_error(d: Path, old: str, new: str) -> str:
    return _edit_error(d, "demo.yaml", RECIPE, old, new)


def patchset_error(d: Path, old: str, new: str) -> str:
    return _edit_error(d, "patchsets/widen-guard/patchset.yaml", PATCHSET, old, new)


def test_the_unedited_fixture_loads(tree: Path) -> None:
    recipe = _load(tree)
    assert recipe.name == "demo" and recipe.aliases == ("dm",)
    assert [e.patchset.name if e.patchset else e.step.id for e in recipe.entries] == ["widen-guard", "rename"]
    assert recipe.params["cuda"].allowed == ">=8.0,<14"


# ------------------------------------------------------------------------------------------- exact prefixes

PREFIX_CASES = [
    # (old, new, exact start of the message, text that must follow: the suggestion or the problem)
    ("description:", "descripton:",
     "recipes/demo.yaml:3: descripton: unknown key", "(did you mean 'description'?)"),
    ("      pattern:", "      patern:",
     "recipes/demo.yaml:16: steps[1].regex.patern: unknown key", "(did you mean 'pattern'?)"),
    ("aliases: [dm]", "aliases: dm",
     "recipes/demo.yaml:2: aliases: expected a list", "got str 'dm'"),
    ("pattern: CAFFE2_API", "pattern: '(CAFFE2'",
     "recipes/demo.yaml:16: steps[1].regex.pattern: invalid regular expression '(CAFFE2'", "missing )"),
    ('when: {arch: ">=sm_80"}', 'when: {cuda: ">=11.x"}',
     "recipes/demo.yaml:12: steps[1].when.cuda: '>=11.x' is not a version range", "'>=11.0,<13'"),
    ('when: {arch: ">=sm_80"}', 'when: {arch: ">=sm80"}',
     "recipes/demo.yaml:12: steps[1].when.arch: 'sm80' is not a GPU architecture", "sm_86"),
    ('when: {arch: ">=sm_80"}', 'when: {cdua: ">=11"}',
     "recipes/demo.yaml:12: steps[1].when.cdua: unknown parameter", "(did you mean 'cuda'?)"),
    ('when: {arch: ">=sm_80"}', 'when: {cudnn: "yes"}',
     "recipes/demo.yaml:12: steps[1].when.cudnn: expected true or false", "'yes'"),
    ('allowed: ">=8.0,<14"', 'allowed: ">=8.0,<<14"',
     "recipes/demo.yaml:7: parameters.cuda.allowed: '>=8.0,<<14' is not a version range", ""),
    ('default: "11.1"', 'default: "7.0"',
     "recipes/demo.yaml:7: parameters.cuda.default: '7.0' is outside the allowed range >=8.0,<14", ""),
    ("default: sm_86", "default: sm_87",
     "recipes/demo.yaml:8: parameters.arch.default: 'sm_87' is not one of sm_75, sm_86, sm_90",
     "(did you mean 'sm_86'?)"),
    ("type: version", "type: verison",
     "recipes/demo.yaml:7: parameters.cuda.type: 'verison' is not one of version, arch, bool, string",
     "(did you mean 'version'?)"),
    ("      replace: TORCH_API", "      replace: TORCH_API\n      on_missing: eror",
     "recipes/demo.yaml:18: steps[1].regex.on_missing: 'eror' is not one of error, warn, ignore",
     "(did you mean 'error'?)"),
    ("    regex:\n", "    patch: x.patch\n    regex:\n",
     "recipes/demo.yaml:12: steps[1]: has more than one of: patch, regex", ""),
    ('    regex:\n      files: ["**/*.h"]\n      pattern: CAFFE2_API\n      replace: TORCH_API\n',
     "    patch: nothere.patch\n",
     "recipes/demo.yaml:12: steps[1].patch: patch file 'nothere.patch' not found", ""),
    ("  - widen-guard", "  - widen-guards",
     "recipes/demo.yaml:11: steps[0]: patchset 'widen-guards' not found", "(did you mean 'widen-guard'?)"),
    ('    regex:\n      files: ["**/*.h"]\n      pattern: CAFFE2_API\n      replace: TORCH_API\n',
     f"    backport: {{ref: v2, commit: {PIN}, files: [ok.h, a/../../x]}}\n",
     "recipes/demo.yaml:14: steps[1].backport.files[1]: 'a/../../x' must not contain '..'", ""),
    ('    regex:\n      files: ["**/*.h"]\n      pattern: CAFFE2_API\n      replace: TORCH_API\n',
     "    insert: {file: /etc/profile, text: x}\n",
     "recipes/demo.yaml:14: steps[1].insert.file: '/etc/profile' must be a relative path", ""),
    ("  - widen-guard", "  - {patchset: widen-guard, when: {cuda: '>=11.0,<=x'}}",
     "recipes/demo.yaml:11: steps[0].when.cuda: '>=11.0,<=x' is not a version range", ""),
    ("name: demo", "name: Demo",
     "recipes/demo.yaml:1: name: 'Demo' is not a name of lowercase letters", ""),
    ("  cudnn: {type: bool, default: true}", "  cudnn: {type: bool, default: 1}",
     "recipes/demo.yaml:9: parameters.cudnn.default: expected true or false", "got 1"),
    ("  cudnn: {type: bool, default: true}", "  cudnn: {type: bool, default: [1]}",
     "recipes/demo.yaml:9: parameters.cudnn.default: expected a scalar value", "got a list"),
    ("  cudnn: {type: bool, default: true}", "  cudnn: {type: bool, default: auto}",
     "recipes/demo.yaml:9: parameters.cudnn.default: 'auto' needs 'detect: python' or 'detect: cuda'", ""),
    ("  cudnn: {type: bool, default: true}", "  cudnn: {type: string, default: x, allowed: '>=1'}",
     "recipes/demo.yaml:9: parameters.cudnn.allowed: 'allowed' ranges apply to version and arch parameters", ""),
    ("  cudnn: {type: bool, default: true}", "  CuDnn: {type: bool, default: true}",
     "recipes/demo.yaml:9: parameters.CuDnn: 'CuDnn' is not a parameter name", ""),
    ('      files: ["**/*.h"]', "      files: []",
     "recipes/demo.yaml:15: steps[1].regex.files: needs at least 1 item(s)", ""),
    ('    when: {arch: ">=sm_80"}', "    when: [cuda]",
     "recipes/demo.yaml:13: steps[1].when: expected a mapping", "got a list"),
    ('    when: {arch: ">=sm_80"}', "    when: {arch: []}",
     "recipes/demo.yaml:13: steps[1].when.arch: empty list of alternatives", ""),
    ("  - id: rename", "  - id: rename\n    description: [1]",
     "recipes/demo.yaml:13: steps[1].description: expected a string", "got a list"),

]


def _case_id(case: tuple[str, str, str, str]) -> str:
    return case[2].split(": ")[1] + ": " + case[1].strip()[:24]


@pytest.mark.parametrize(("old", "new", "prefix", "then"), PREFIX_CASES, ids=[_case_id(c) for c in PREFIX_CASES])
def test_error_names_file_line_key_path_and_suggestion(tree: Path, old: str, new: str, prefix: str,
                                                       then: str) -> None:
    message = recipe_error(tree, old, new)
    assert message.startswith(prefix), message
    assert then in message, message


def test_valid_edit_loads(tree: Path) -> None:
    # The mutation machinery itself: an edit that keeps the recipe valid loads (the tests above can fail).
    (tree / "demo.yaml").write_text(RECIPE.replace('    when: {arch: ">=sm_80"}\n', ""), encoding="utf-8")
    assert _load(tree).entries[1].step.when is None


def test_unknown_key_lists_the_valid_ones(tree: Path) -> None:
    message = recipe_error(tree, "      pattern:", "      patern:")
    assert "valid keys: files, exclude, pattern, replace, word, on_missing, count" in message


def test_duplicate_keys_name_both_lines(tree: Path) -> None:
    message = recipe_error(tree, "name: demo\n", "name: demo\nname: again\n")
    assert message == "recipes/demo.yaml:2: duplicate key 'name' (first at line 1)"
    message = recipe_error(tree, "  cudnn: {type: bool, default: true}", "  cuda: {type: bool, default: true}")
    assert message == "recipes/demo.yaml:9: duplicate key 'cuda' (first at line 7)"


def test_duplicate_key_inside_a_flow_mapping(tree: Path) -> None:
    message = recipe_error(tree, 'when: {arch: ">=sm_80"}', 'when: {arch: ">=sm_80", arch: sm_90}')
    assert message.startswith("recipes/demo.yaml:13: duplicate key 'arch' (first at line 13)")


def test_yaml_syntax_error_names_line(tree: Path) -> None:
    message = recipe_error(tree, "steps:\n", "steps: [\n")
    assert message.startswith("recipes/demo.yaml:11: YAML syntax error:"), message
    message = recipe_error(tree, "    regex:\n", "    regex:\n   bad-indent: [\n")
    assert message.startswith("recipes/demo.yaml:"), message
    assert "YAML syntax error" in message


def test_tab_indentation_is_a_syntax_error_with_line(tree: Path) -> None:
    message = recipe_error(tree, "      pattern: CAFFE2_API", "\tpattern: CAFFE2_API")
    assert message.startswith("recipes/demo.yaml:16: YAML syntax error:"), message


def test_whole_file_of_the_wrong_shape(tree: Path) -> None:
    (tree / "demo.yaml").write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^recipes/demo.yaml:1: expected a recipe mapping, got a list$"):
        _load(tree)
    (tree / "demo.yaml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^recipes/demo.yaml: expected a recipe mapping, got empty \(null\)$"):
        _load(tree)
    (tree / "demo.yaml").write_bytes(b"name: d\xe9mo\n")
    with pytest.raises(ConfigError, match=r"^recipes/demo.yaml: not UTF-8 text \(byte 7\)$"):
        _load(tree)


def test_yaml_objects_are_not_constructed(tree: Path) -> None:
    # Safe loading: a python/object tag is an error, never an object.
    message = recipe_error(tree, "name: demo", "name: !!python/object/apply:os.system ['true']")
    assert message.startswith("recipes/demo.yaml:1: YAML syntax error:"), message


def test_missing_required_key(tree: Path) -> None:
    message = recipe_error(tree, "description: A fixture recipe.\n", "")
    assert message == "recipes/demo.yaml:1: missing required key 'description'"


def test_source_needs_exactly_one_kind(tree: Path) -> None:
    message = recipe_error(tree, "source:\n", f"source:\n  sdist: {{name: a, version: '1', sha256: {'a' * 64}}}\n")
    assert message.startswith("recipes/demo.yaml:5: source: has more than one of: git, sdist"), message
    message = recipe_error(tree, f'  git: {{url: "file:///nowhere", ref: v1.0, commit: {PIN}}}\n', "  {}\n")
    assert "source: needs exactly one of: git, sdist" in message


def test_source_one_of_message_does_not_talk_about_steps(tree: Path) -> None:
    # The one_of message once said "(a step does one thing)" for every mapping, `source:` included.
    message = recipe_error(tree, "source:\n", f"source:\n  sdist: {{name: a, version: '1', sha256: {'a' * 64}}}\n")
    assert "step" not in message, message


def test_sdist_needs_url_or_name_and_version(tree: Path) -> None:
    message = recipe_error(tree, f'  git: {{url: "file:///nowhere", ref: v1.0, commit: {PIN}}}',
                           f"  sdist: {{name: chainer, sha256: {'a' * 64}}}")
    assert message.startswith("recipes/demo.yaml:5: source.sdist: needs either 'url' or both 'name' and 'version'")


def test_bad_pin_formats(tree: Path) -> None:
    message = recipe_error(tree, f"commit: {PIN}", f"commit: {PIN[:-1]}")
    assert message.startswith("recipes/demo.yaml:5: source.git.commit:") and "40-hex" in message
    message = recipe_error(tree, f'  git: {{url: "file:///nowhere", ref: v1.0, commit: {PIN}}}',
                           "  sdist: {url: 'ftp://x/y.tar.gz', sha256: ABC}")
    assert message.startswith("recipes/demo.yaml:5: source.sdist.url:") and "http(s) URL" in message


def test_build_section_errors_have_key_paths(tree: Path) -> None:
    extra = "build:\n  commands:\n    - {name: compile, phase: biuld, argv: [make]}\n"
    message = recipe_error(tree, "steps:\n", extra + "steps:\n")
    assert message.startswith("recipes/demo.yaml:12: build.commands[0].phase: 'biuld' is not one of"), message
    assert "(did you mean 'build'?)" in message
    extra = "build:\n  commands:\n    - {name: compile, argv: [make], when: {cdua: '>=11'}}\n"
    message = recipe_error(tree, "steps:\n", extra + "steps:\n")
    assert "build.commands[0].when.cdua: unknown parameter (did you mean 'cuda'?)" in message


def test_duplicate_step_ids_and_patchsets(tree: Path) -> None:
    message = recipe_error(tree, "  - widen-guard\n", "  - widen-guard\n  - widen-guard\n")
    assert message.startswith("recipes/demo.yaml:12: steps[1]: patchset 'widen-guard' is listed twice"), message
    twice = '  - id: rename\n    regex: {files: ["*"], pattern: A, replace: B}\n'
    message = recipe_error(tree, "  - widen-guard\n", "  - widen-guard\n" + twice)
    assert "duplicate inline step id 'rename'" in message


# ------------------------------------------------------------------------------------------- patchset files

PS = "recipes/patchsets/widen-guard/patchset.yaml"


def test_patchset_unknown_key_and_name_mismatch(tree: Path) -> None:
    message = patchset_error(tree, "steps:", "stpes:")
    assert message.startswith(f"{PS}:4: stpes: unknown key (did you mean 'steps'?)"), message
    message = patchset_error(tree, "name: widen-guard", "name: widen")
    assert message.startswith(f"{PS}:1: name: patchset name 'widen' must equal its folder name 'widen-guard'")


def test_patchset_step_errors(tree: Path) -> None:
    message = patchset_error(tree, "    patch: widen.patch", "    patch: nope.patch")
    assert message.startswith(f"{PS}:5: steps[0].patch: patch file 'nope.patch' not found in"), message
    message = patchset_error(tree, "    patch: widen.patch", "    patch: ../widen.patch")
    assert message.startswith(f"{PS}:7: steps[0].patch: '../widen.patch' must not contain '..'"), message
    message = patchset_error(tree, "    patch: widen.patch", "    patch: /etc/passwd")
    assert message.startswith(f"{PS}:7: steps[0].patch: '/etc/passwd' must be a relative path"), message
    two_kinds = "  - id: widen\n    regex: {files: [a], pattern: b, replace: c}\n"
    message = patchset_error(tree, "  - id: widen\n", two_kinds)
    assert message.startswith(f"{PS}:5: steps[0]: has more than one of: patch, regex"), message
    message = patchset_error(tree, "  - id: widen\n", "  - id: widen\n    desription: x\n")
    assert message.startswith(f"{PS}:6: steps[0].desription: unknown key (did you mean 'description'?)"), message


def test_patchset_level_when_error_names_line(tree: Path) -> None:
    # The patchset's own `when:` was once checked with line 0, so the message named no line.
    message = patchset_error(tree, "when: {cuda: \">=11.0\"}", "when: {cdua: \">=11.0\"}")
    assert "when.cdua: unknown parameter (did you mean 'cuda'?)" in message
    assert message.startswith(f"{PS}:3: when.cdua:"), message


def test_patchset_step_when_error_uses_the_step_index_path(tree: Path) -> None:
    # Every other error in a patchset file says steps[i]; a step's `when:` should too (not steps.<id>).
    message = patchset_error(tree, "    when: {arch: \">=sm_80\"}", "    when: {arch: \">=sm8\"}")
    assert "'sm8' is not a GPU architecture" in message
    assert message.startswith(f"{PS}:5: steps[0].when.arch:"), message


# ------------------------------------------------------------------------------------------- names and params


def test_recipe_name_suggestion(tree: Path) -> None:
    with pytest.raises(ConfigError) as info:
        find_recipe("dmeo", SearchPath.from_options([tree]))
    assert info.value.message == "no recipe named 'dmeo' (did you mean 'demo'?)"
    assert "lgpatch list" in (info.value.hint or "")
    # An alias resolves to the recipe.
    assert find_recipe("dm", SearchPath.from_options([tree])).name == "demo"


def test_cli_config_errors_exit_config_without_traceback(lgpatch, tree: Path) -> None:
    r = lgpatch("--recipe-path", tree, "show", "dmeo")
    assert r.code == ExitCode.CONFIG
    assert r.err.startswith("lgpatch: invalid configuration: no recipe named 'dmeo' (did you mean 'demo'?)")
    assert "Traceback" not in r.err
    (tree / "demo.yaml").write_text(RECIPE.replace("      pattern:", "      patern:"), encoding="utf-8")
    r = lgpatch("--recipe-path", tree, "show", "demo")
    assert r.code == ExitCode.CONFIG
    assert r.err.startswith("lgpatch: invalid configuration: recipes/demo.yaml:16: steps[1].regex.patern: unknown key")


@pytest.mark.parametrize(("args", "expected"), [
    (["--param", "cdua=11.0"],
     "recipe demo has no parameter 'cdua' (did you mean 'cuda'?); its parameters: cuda, arch, cudnn"),
    (["--python", "3.10"], "recipe demo has no parameter 'python'; its parameters: cuda, arch, cudnn"),
    (["--cuda", "7.5"], "recipe demo, parameter cuda: '7.5' is outside the allowed range >=8.0,<14"),
    (["--cuda", "14.0"], "recipe demo, parameter cuda: '14.0' is outside the allowed range >=8.0,<14"),
    (["--cuda", "11.x"], "recipe demo, parameter cuda: '11.x' is not a version (like 11.1 or 3.12)"),
    (["--arch", "sm_87"], "recipe demo, parameter arch: 'sm_87' is not one of sm_75, sm_86, sm_90 "
                          "(did you mean 'sm_86'?)"),
    (["--arch", "sm86"], "recipe demo, parameter arch: 'sm86' is not a GPU architecture (like sm_86 or sm_90)"),
    (["--param", "cudnn=maybe"], "parameter cudnn: expected true or false, got 'maybe'"),
    (["--param", "cudnn"], "--param 'cudnn': expected NAME=VALUE"),
])
def test_command_line_parameter_errors(lgpatch, tree: Path, args: list[str], expected: str) -> None:
    r = lgpatch("--recipe-path", tree, "show", "demo", *args)
    assert r.code == ExitCode.CONFIG, r.err
    assert r.err.startswith(f"lgpatch: invalid configuration: {expected}"), r.err


def test_command_line_parameters_in_range_are_accepted(lgpatch, tree: Path) -> None:
    r = lgpatch("--recipe-path", tree, "show", "demo", "--cuda", "13.9", "--arch", "SM_90", "--param",
                "cudnn=off", "--json")
    assert r.code == 0, r.err
    assert '"cuda": "13.9"' in r.out and '"arch": "sm_90"' in r.out and '"cudnn": false' in r.out


def test_every_error_is_an_lgpatch_error(tree: Path) -> None:
    # The loader never leaks a raw exception type for any of the table's edits.
    for old, new, *_ in PREFIX_CASES:
        (tree / "demo.yaml").write_text(RECIPE.replace(old, new, 1), encoding="utf-8")
        try:
            _load(tree)
        except LgpatchError:
            continue
        pytest.fail(f"edit {new!r} loaded without error")


def test_unknown_template_parameter_is_a_load_error(tree: Path) -> None:
    # `${cdua}` in a regex replacement was once found only at apply time, after earlier steps were committed, and
    # `lgpatch show` called the recipe valid. It fails at load, with a suggestion.
    message = recipe_error(tree, "      replace: TORCH_API", "      replace: TORCH_API_${cdua}")
    assert message.startswith("recipes/demo.yaml:17: steps[1].regex.replace:"), message
    assert "(did you mean 'cuda'?)" in message
