"""engine-exit-finalized, the mechanism on this machine's Python: a C++ worker thread that holds a released thread
state in a destructor-restored guard (as PyTorch 1.5's PythonEngine::thread_init does with pybind11's
gil_scoped_release), woken by a static destructor at exit. Unguarded, the process aborts with "terminate called
without an active exception" (status 134), the crash of every 1.5 script that ran backward() on Python >= 3.9;
with the patch's guard (leave the guards undone when Py_IsInitialized() is false) it exits 0. The module is
compiled here with g++ against the running interpreter's headers."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.integration

PATCH = REPO / "patchsets" / "engine-exit-finalized" / "no-gil-after-finalize.patch"
HEADERS = Path(sysconfig.get_paths()["include"])

MODULE = r"""
#include <Python.h>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace {
std::mutex mu;
std::condition_variable cv;
bool ready = false, shutdown = false, guarded = false;

struct Release {  // pybind11::gil_scoped_release: saves the thread state, restores it in its destructor
  PyThreadState* state = PyEval_SaveThread();
  ~Release() { PyEval_RestoreThread(state); }
};

void worker() {
  PyGILState_STATE gil = PyGILState_Ensure();
  auto no_gil = std::make_unique<Release>();
  { std::lock_guard<std::mutex> lock(mu); ready = true; }
  cv.notify_all();
  { std::unique_lock<std::mutex> lock(mu); cv.wait(lock, [] { return shutdown; }); }
  if (guarded && !Py_IsInitialized()) {  // the patch's guard
    (void)no_gil.release();
    return;
  }
  no_gil.reset();
  PyGILState_Release(gil);
}

std::thread* running = nullptr;
struct Engine {  // a static object, destroyed in exit() after Py_Finalize: it wakes the worker, as ~Engine does
  ~Engine() {
    { std::lock_guard<std::mutex> lock(mu); shutdown = true; }
    cv.notify_all();
    if (running) running->join();
  }
} engine;

PyObject* start(PyObject*, PyObject* arg) {
  guarded = PyObject_IsTrue(arg);
  Py_BEGIN_ALLOW_THREADS
  running = new std::thread(worker);
  { std::unique_lock<std::mutex> lock(mu); cv.wait(lock, [] { return ready; }); }
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}
PyMethodDef methods[] = {{"start", start, METH_O, nullptr}, {nullptr, nullptr, 0, nullptr}};
PyModuleDef def = {PyModuleDef_HEAD_INIT, "exitmod", nullptr, -1, methods};
}  // namespace
PyMODINIT_FUNC PyInit_exitmod() { return PyModule_Create(&def); }
"""


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not shutil.which("g++") or not (HEADERS / "Python.h").is_file():
        pytest.skip("needs g++ and this Python's headers")
    out = tmp_path_factory.mktemp("exitmod")
    (out / "exitmod.cpp").write_text(MODULE)
    target = out / f"exitmod{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-pthread", f"-I{HEADERS}",
                    str(out / "exitmod.cpp"), "-o", str(target)], check=True, capture_output=True, timeout=180)
    return out


def _run(module_dir: Path, guarded: bool) -> subprocess.CompletedProcess[str]:
    code = f"import exitmod; exitmod.start({guarded}); print('script done')"
    return subprocess.run([sys.executable, "-c", code], cwd=module_dir, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(sys.version_info < (3, 9), reason="Python < 3.9 blocks such a thread instead of ending it")
def test_unguarded_worker_aborts_the_process_at_exit(module_dir: Path) -> None:
    for _ in range(3):  # not a race: the worker is parked before start() returns, the exit wakes it
        done = _run(module_dir, guarded=False)
        assert "script done" in done.stdout
        assert done.returncode == -6, (done.returncode, done.stderr)  # SIGABRT: std::terminate
        assert "terminate called without an active exception" in done.stderr


def test_the_guard_lets_the_process_exit_0(module_dir: Path) -> None:
    for _ in range(3):
        done = _run(module_dir, guarded=True)
        assert done.returncode == 0, (done.returncode, done.stderr)
        assert "terminate called" not in done.stderr and "script done" in done.stdout


def test_the_patch_guards_the_engine_thread_the_same_way() -> None:
    added = [ln[1:].strip() for ln in PATCH.read_text().splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert "if (!Py_IsInitialized()) {" in added
    assert "(void)no_gil.release();" in added and "(void)gil.release();" in added
    assert "auto no_gil = std::make_unique<pybind11::gil_scoped_release>();" in added
