#!/usr/bin/env bash
# PyTorch 1.5.0 + LMS: compile, on a GPU machine's toolchain (gcc 13, nvcc 13), the translation units a full build
# reaches last, without the full build: caffe2's CUDA units (the 12 the 2026-12-01 H200 build failed on), every
# C++ source of libtorch_cuda and of torch_python. Each unit is compiled with the build's own command line
# (`ninja -t commands`), after only the generated headers it needs (ATen's and autograd's code generators, the
# protobuf headers). No linking: that needs the whole build (bench/gpu/pytorch_wheel.sh).
#
#   OUT=$OUT bash bench/gpu/pytorch_units.sh        (carry .carry/pytorch-lms, as pytorch_wheel.sh)
#
# Writes $OUT/units-summary.txt (ok/failed per group) and $OUT/units-logs.tgz (failed units' logs, classified).
#
# UNITS=REGEX: instead of the groups, the objects whose path matches REGEX (extended regex over ninja's object
# paths), e.g. UNITS='native/cudnn/Conv\.cpp|autograd/python_engine\.cpp|SparseCUDATensorMath\.cu' — the loop
# for checking a changed C++/CUDA patch on any machine with the toolchain, a GPU or not (DEVELOPERS.md).
# GENERATED=0 skips the generated headers (autograd code, protobuf: protoc is built first, minutes on 2 cores)
# for units that do not include them.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${CARRY:-$REPO/.carry/pytorch-lms}
WORK=${PT_WORK:-$REPO/.ptwork-units}
FINAL=${OUT:-$WORK/out}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-480}
# --python of lgpatch build: this interpreter's site-packages has the CUDA 13 wheels that CPATH below points at
PY=$(command -v "${PYTHON:-python3}") || { echo "PYTHON=${PYTHON:-python3}: not found" >&2; exit 2; }
START=$(date +%s)
mkdir -p "$WORK/logs" "$FINAL"
SUMMARY=$FINAL/units-summary.txt
: > "$SUMMARY"
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$SUMMARY"; }
left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }

DEPS=$WORK/pydeps
"$PY" -c "import git, unidiff, platformdirs" 2>/dev/null || "$PY" -m pip install -q --no-index \
  --find-links "$CARRY/wheels" --target "$DEPS" GitPython gitdb smmap unidiff platformdirs > /dev/null 2>&1
export PYTHONPATH=${LGPATCH_SRC:-$REPO}:$DEPS LGPATCH_CACHE=$WORK/cache CMAKE_GENERATOR=Ninja  # LGPATCH_SRC: a snapshot
LG() { (cd "$WORK" && "$PY" -m legacy_gpu_patch "$@"); }  # from $WORK: PYTHONPATH decides which lgpatch
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
WT=$WORK/wt B=$WORK/wt/build

tar -C "$WORK" -xf "$CARRY/pt-shallow.tar" && tar -C "$WORK" -xf "$CARRY/submodules.tar"
LG cache add "$CARRY/pytorch_v1.5.0_large_model_support.patch" > /dev/null 2>&1
while read -r url dir; do LG cache add-mirror "$url" "$WORK/submirrors/$dir" > /dev/null 2>&1; done < "$WORK/submirrors/urls.txt"
LG apply pytorch-lms --cuda 13.0 --arch sm_90 --strict --offline --source "$WORK/pt-shallow" --workdir "$WT" \
  > "$WORK/logs/apply.txt" 2>&1
say "apply: rc=$? $(tail -2 "$WORK/logs/apply.txt" | head -1 | cut -c1-160)"
LG build --workdir "$WT" --arch sm_90 --jobs "$JOBS" --python "$PY" --target ATEN_CUDA_FILES_GEN_TARGET --log "$WORK/logs/configure.log" \
  -q > /dev/null 2>&1
say "configure + ATen codegen: rc=$?"

CUDA_ROOT=$(sed -n 's/^CUDA_TOOLKIT_ROOT_DIR:PATH=//p' "$B/CMakeCache.txt")
export CPATH=$SITE/nvidia/cu13/include:$SITE/nvidia/cudnn/include:$CUDA_ROOT/include
export CMAKE_LIBRARY_PATH=$B/lgpatch/wheel-libs:$B/lgpatch/driver CMAKE_INCLUDE_PATH=$SITE/nvidia/cudnn/include
export TORCH_CUDA_ARCH_LIST=9.0
cd "$B" || exit 1
gen=$(ninja -t targets all | grep -E '^([^:]*autograd/generated/python_functions\.cpp|caffe2/proto/[a-z0-9_]*\.pb\.h|third_party/onnx/onnx/onnx(-operators)?_onnx_torch-ml\.pb\.h):' | cut -d: -f1 | sort -u)
if [ "${GENERATED:-1}" = 0 ]; then
  say "generated headers: skipped (GENERATED=0)"
else
  ninja -j "$JOBS" $gen > "$WORK/logs/generated.log" 2>&1
  say "generated headers (autograd code, protobuf incl. protoc): rc=$?"
fi

ninja -t targets all | cut -d: -f1 | sort -u > "$WORK/targets.txt"
grep -E '^caffe2/CMakeFiles/torch_cuda\.dir/(core|sgd|utils)/.*\.cu\.o$' "$WORK/targets.txt" > "$WORK/g-caffe2-cuda.txt"
grep -E '^caffe2/CMakeFiles/torch_cuda\.dir/.*\.(cpp|cc)\.o$' "$WORK/targets.txt" > "$WORK/g-torch_cuda-cxx.txt"
grep -E '^caffe2/torch/CMakeFiles/torch_python\.dir/.*\.cpp\.o$' "$WORK/targets.txt" > "$WORK/g-torch_python.txt"
groups=${UNIT_GROUPS:-caffe2-cuda torch_cuda-cxx torch_python}  # UNIT_GROUPS: a subset
if [ -n "${UNITS:-}" ]; then
  # relative names only: ninja also lists each CUDA object under its absolute path
  grep -E '\.(cpp|cc|cu)\.o$' "$WORK/targets.txt" | grep -v '^/' | grep -E -- "$UNITS" > "$WORK/g-match.txt"
  [ -s "$WORK/g-match.txt" ] || { say "UNITS=$UNITS matches no object of the build"; exit 1; }
  groups=match
fi
export B WORK
for g in $groups; do
  mkdir -p "$WORK/logs/$g"; : > "$WORK/logs/$g/ok.txt"; : > "$WORK/logs/$g/failed.txt"
  timeout --signal=INT "$(left)" xargs -a "$WORK/g-$g.txt" -P "$JOBS" -I{} bash -c '
    t={}; g='"$g"'; n=$(echo "$t" | sed "s#.*\.dir/##; s#/#_#g"); cmd=$(cd "$B" && ninja -t commands "$t" | tail -1)
    if (cd "$B" && eval "$cmd") > "$WORK/logs/$g/$n.log" 2>&1; then echo "$n" >> "$WORK/logs/$g/ok.txt"; rm -f "$WORK/logs/$g/$n.log"
    else echo "$n" >> "$WORK/logs/$g/failed.txt"; fi' 2> /dev/null
  say "$g: $(wc -l < "$WORK/g-$g.txt") units, $(wc -l < "$WORK/logs/$g/ok.txt") ok, $(wc -l < "$WORK/logs/$g/failed.txt") failed: $(tr '\n' ' ' < "$WORK/logs/$g/failed.txt" | cut -c1-600)"
done
cat "$WORK"/logs/*/*.log > "$WORK/logs/failed-units.log" 2>/dev/null
[ -s "$WORK/logs/failed-units.log" ] && LG classify "$WORK/logs/failed-units.log" > "$WORK/logs/failed-units.classify.txt" 2>&1
say "$(gcc --version | head -1); $(nvcc --version | tail -1); $("$PY" --version)"
tar -C "$WORK" -czf "$FINAL/units-logs.tgz" logs 2>/dev/null
exit 0
