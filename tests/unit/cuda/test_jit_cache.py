"""The JIT cache: status findings, recommended settings (evaluated by a real shell), and warm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import Runner

from legacy_gpu_patch.cuda import jit_cache as jc


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}
    env.update(extra)
    return env


def test_defaults(tmp_path: Path) -> None:
    st = jc.status(env_for(tmp_path))
    assert st.path == str(tmp_path / "home" / ".nv" / "ComputeCache")
    assert st.path_source == "default"
    assert st.maxsize_bytes is None and st.maxsize_source == "driver default"
    assert not st.exists and st.writable
    assert st.ok, st.problems


def test_usage_is_counted(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "sub").mkdir(parents=True)
    (cache / "sub" / "a").write_bytes(b"x" * 1000)
    (cache / "b").write_bytes(b"y" * 24)
    st = jc.status(env_for(tmp_path, CUDA_CACHE_PATH=str(cache)))
    assert (st.used_bytes, st.files, st.path_source) == (1024, 2, "CUDA_CACHE_PATH")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"CUDA_CACHE_DISABLE": "1"}, "CUDA_CACHE_DISABLE"),
        ({"CUDA_CACHE_MAXSIZE": "1000000"}, "too small"),
        ({"CUDA_CACHE_MAXSIZE": str(8 * 1024**3)}, "maximum"),
        ({"CUDA_CACHE_MAXSIZE": "4G"}, "not a number"),
        ({"CUDA_FORCE_PTX_JIT": "1"}, "CUDA_FORCE_PTX_JIT"),
        ({"CUDA_DISABLE_PTX_JIT": "1"}, "cannot load"),
    ],
)
def test_problems(tmp_path: Path, extra: dict[str, str], needle: str) -> None:
    st = jc.status(env_for(tmp_path, **extra))
    assert not st.ok
    assert any(needle in p for p in st.problems), st.problems


def test_unwritable_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    st = jc.status(env_for(tmp_path, CUDA_CACHE_PATH=str(blocker / "cache")))
    assert not st.writable
    assert any("cannot be written" in p for p in st.problems)


def test_full_cache(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    cache.mkdir()
    limit = 300 * 1024**2
    blob = cache / "blob"
    with open(blob, "wb") as fh:  # sparse: the size counts, the disk is not used
        fh.truncate(1024**2)
    env = env_for(tmp_path, CUDA_CACHE_PATH=str(cache), CUDA_CACHE_MAXSIZE=str(limit))
    assert jc.status(env).ok
    os.truncate(blob, limit - 1024)
    assert any("evicted" in p for p in jc.status(env).problems)


def test_filesystem_type_from_mounts(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/sda1 / ext4 rw 0 0\ntmpfs /home/u/.nv tmpfs rw 0 0\nproc /proc proc rw 0 0\n")
    assert jc.filesystem_type(Path("/home/u/.nv/ComputeCache"), str(mounts)) == "tmpfs"
    assert jc.filesystem_type(Path("/home/u/.nvidia"), str(mounts)) == "ext4"
    assert jc.filesystem_type(Path("/x"), str(tmp_path / "missing")) is None


@pytest.mark.skipif(jc.filesystem_type(Path("/dev/shm")) != "tmpfs", reason="/dev/shm is not a tmpfs here")
def test_tmpfs_cache_is_not_persistent(tmp_path: Path) -> None:
    st = jc.status(env_for(tmp_path, CUDA_CACHE_PATH="/dev/shm/lgpatch-test-cache"))
    assert any("reboot" in p for p in st.problems)


def test_recommended_env(tmp_path: Path) -> None:
    env = env_for(tmp_path, CUDA_FORCE_PTX_JIT="1", CUDA_CACHE_MAXSIZE="1000000")
    rec = jc.recommended_env(env)
    assert rec["CUDA_CACHE_DISABLE"] == "0"
    assert rec["CUDA_CACHE_MAXSIZE"] == str(4 * 1024**3)
    assert rec["CUDA_CACHE_PATH"] == str(tmp_path / "home" / ".nv" / "ComputeCache")
    assert rec["CUDA_FORCE_PTX_JIT"] is None  # unset it
    assert jc.status(jc.apply_settings(env, rec)).ok


def test_recommended_path_keeps_a_usable_user_choice(tmp_path: Path) -> None:
    mine = tmp_path / "my-cache"
    assert jc.recommended_env(env_for(tmp_path, CUDA_CACHE_PATH=str(mine)))["CUDA_CACHE_PATH"] == str(mine)


def test_recommended_path_falls_back_when_home_is_unwritable(tmp_path: Path) -> None:
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("")
    env = {"HOME": str(blocker), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert jc.recommended_path(env) == tmp_path / "xdg" / "lgpatch" / "cuda-jit-cache"


def test_shell_format_is_valid_shell(tmp_path: Path) -> None:
    settings = {"CUDA_CACHE_DISABLE": "0", "CUDA_CACHE_PATH": str(tmp_path / "dir with space"),
                "CUDA_CACHE_MAXSIZE": "4294967296", "CUDA_FORCE_PTX_JIT": None}
    script = jc.render_env(settings, "shell")
    out = subprocess.run(["sh", "-c", script + 'printf "%s|%s|%s|%s" "$CUDA_CACHE_DISABLE" "$CUDA_CACHE_PATH" '
                          '"$CUDA_CACHE_MAXSIZE" "${CUDA_FORCE_PTX_JIT-unset}"'],
                         env={"CUDA_FORCE_PTX_JIT": "1", "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True).stdout
    assert out == f"0|{tmp_path / 'dir with space'}|4294967296|unset"


def test_dotenv_format() -> None:
    text = jc.render_env({"CUDA_CACHE_DISABLE": "0", "CUDA_FORCE_PTX_JIT": None}, "dotenv")
    assert "CUDA_CACHE_DISABLE=0\n" in text
    assert "# CUDA_FORCE_PTX_JIT must be unset" in text
    with pytest.raises(ValueError):
        jc.render_env({}, "fish")


def test_warm_runs_with_settings_and_measures(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    code = ("import os, pathlib; p = pathlib.Path(os.environ['CUDA_CACHE_PATH']) / 'entry'; "
            "p.write_bytes(b'j' * 12345); "
            "assert os.environ['CUDA_CACHE_MAXSIZE'] == '4294967296' and os.environ['CUDA_CACHE_DISABLE'] == '0'")
    res = jc.warm([sys.executable, "-c", code], env=env_for(tmp_path), path=cache)
    assert res.returncode == 0
    assert res.filled_bytes == 12345
    assert (res.files_before, res.files_after) == (0, 1)
    assert res.to_json()["cache_path"] == str(cache)


def test_warm_reports_failure(tmp_path: Path) -> None:
    res = jc.warm([sys.executable, "-c", "raise SystemExit(3)"], env=env_for(tmp_path), path=tmp_path / "c")
    assert res.returncode == 3
    with pytest.raises(ValueError):
        jc.warm([], env=env_for(tmp_path))


def test_cli_status_env_warm(lgpatch: Runner, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "CUDA_CACHE_MAXSIZE": "1000000"}
    res = lgpatch("jit-cache", "status", "--json", env=env)
    assert res.code == 0, res.out + res.err
    data = json.loads(res.out)
    assert data["maxsize_bytes"] == 1000000 and not data["ok"]
    res = lgpatch("jit-cache", "env", "--format", "dotenv", "--path", str(tmp_path / "c"), env=env)
    assert f"CUDA_CACHE_PATH={tmp_path / 'c'}" in res.out
    res = lgpatch("jit-cache", "warm", "--json", "--path", str(tmp_path / "w"), "--",
                  sys.executable, "-c", "raise SystemExit(5)", env=env)
    assert res.code == 5
    assert json.loads(res.out)["returncode"] == 5
