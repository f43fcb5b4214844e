"""The wheel repair of `lgpatch ci`: local version label, LGPATCH.json, a RECORD that matches, run paths."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from legacy_gpu_patch.ci import wheel
from legacy_gpu_patch.errors import BuildError


def _make_wheel(folder: Path, files: dict[str, bytes], name: str = "demo-1.2.0-py3-none-any.whl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    dist = "demo-1.2.0.dist-info"
    meta = {f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.2.0\n",
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as zf:
        for rel, data in {**files, **meta}.items():
            zf.writestr(rel, data)
        zf.writestr(f"{dist}/RECORD", "")
    return path


@pytest.mark.parametrize("params, label", [({"cuda": "13.0"}, "lgpatch.cu130"), ({"cuda": "11.1"}, "lgpatch.cu111"),
                                            ({"cuda": "auto"}, "lgpatch"), ({}, "lgpatch")])
def test_local_label(params: dict, label: str) -> None:
    assert wheel.local_label(params) == label


def test_labelled_version_keeps_an_existing_local_part() -> None:
    assert wheel.labelled_version("1.24.0", "lgpatch.cu130") == "1.24.0+lgpatch.cu130"
    assert wheel.labelled_version("2.0+abc", "lgpatch") == "2.0+abc.lgpatch"


def test_relabel_renames_metadata_and_writes_a_true_record(tmp_path: Path) -> None:
    built = _make_wheel(tmp_path / "dist", {"demo/__init__.py": b"X = 1\n"})
    result = wheel.repair(built, label="lgpatch.cu130", out_dir=tmp_path / "out",
                          ledger={"recipe": "demo", "steps": [{"step": "fix/a", "digest": "d"}]}, auditwheel="off")
    assert result.wheel.name == "demo-1.2.0+lgpatch.cu130-py3-none-any.whl" and result.version == "1.2.0+lgpatch.cu130"
    with zipfile.ZipFile(result.wheel) as zf:
        names = zf.namelist()
        dist = "demo-1.2.0+lgpatch.cu130.dist-info"
        assert f"{dist}/METADATA" in names and not any(n.startswith("demo-1.2.0.dist-info") for n in names)
        assert "Version: 1.2.0+lgpatch.cu130" in zf.read(f"{dist}/METADATA").decode()
        assert json.loads(zf.read(f"{dist}/LGPATCH.json"))["steps"][0]["step"] == "fix/a"
        rows = [r.split(",") for r in zf.read(f"{dist}/RECORD").decode().splitlines()]
        assert {r[0] for r in rows} == set(names)
        for rel, digest, size in rows:
            if rel.endswith("RECORD"):
                assert digest == size == ""
                continue
            data = zf.read(rel)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), rel
    assert result.auditwheel == {"used": False, "reason": "--auditwheel off"}


def _shared_object(tmp_path: Path, rpath: str) -> bytes:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to make a shared object")
    src = tmp_path / "m.c"
    src.write_text("int f(void) { return 1; }\n")
    out = tmp_path / "m.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-rpath,{rpath}",
                    "-Wl,--enable-new-dtags"], check=True)
    return out.read_bytes()


def test_absolute_run_paths_are_removed_and_relative_ones_kept(tmp_path: Path) -> None:
    if wheel._tool("patchelf") is None:
        pytest.skip("patchelf is not installed")
    so = _shared_object(tmp_path, "$ORIGIN/../nvidia/lib:/home/build/tree/stub")
    built = _make_wheel(tmp_path / "dist", {"demo/m.so": so}, "demo-1.2.0-cp311-cp311-linux_x86_64.whl")
    result = wheel.repair(built, label="lgpatch", out_dir=tmp_path / "out", ledger={}, auditwheel="off")
    assert result.runpaths == {"demo/m.so": ["$ORIGIN/../nvidia/lib"]}
    assert result.fixed == ["demo/m.so: removed /home/build/tree/stub"]


def test_without_patchelf_an_absolute_run_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    so = _shared_object(tmp_path, "/abs/only")
    built = _make_wheel(tmp_path / "dist", {"demo/m.so": so}, "demo-1.2.0-cp311-cp311-linux_x86_64.whl")
    monkeypatch.setattr(wheel, "_tool", lambda name: None)
    with pytest.raises(BuildError, match=r"not \$ORIGIN-relative \(demo/m.so: /abs/only\)"):
        wheel.repair(built, label="lgpatch", out_dir=tmp_path / "out", ledger={}, auditwheel="auto")
    assert not (tmp_path / "out").exists()
