#!/usr/bin/env bash
# PyTorch 1.5.0 + LMS on the GPU machine (CUDA 13, CMake 4, gcc 13, no network), in one command under 9 minutes:
#
#   L0  lgpatch apply pytorch-lms --strict for --cuda 11.1/sm_86 and --cuda 13.0/sm_90, revert → pristine tree hash
#   L1  lgpatch verify --arch sm_86,sm_90 (real nvcc; cuSPARSE/cuBLAS/cuRAND headers from the image's nvidia wheels)
#   L2  c10 + c10_cuda (LMS's allocator) configured and built against CUDA 13 — first the LMS-only tree with
#       CMake 4 and cuDNN 9 (expected to fail: what cmake4-arch-list and cudnn8-version-header fix), then the
#       patched tree (lgpatch build when it exists, else the recipe's two cmake commands)
#   L3  what a full build can do offline: the top-level configure (needs the submodules, which are not here) and,
#       with the time left, ATen/THC CUDA sources compiled one by one with the recipe's nvcc flags
#   every log goes through `lgpatch classify --json` when that command exists.
#
# Session 1's record (docs/gpu-proofs.md). Since then the recipe's build section is the whole tree and needs the
# submodules, which this script does not carry (--no-submodules): its L2 step now stops at configure. L2 with the
# current recipe is step 2b of bench/gpu/pytorch_l3.sh (`lgpatch build --target c10 --target c10_cuda`).
#
# Inputs, carried from the repository root (ignored paths; see docs/recipes/pytorch-lms.md for how to make them):
#   .carry/pytorch-lms/pt-shallow.tar                           depth-1 clone of pytorch at v1.5.0 (12 MB)
#   .carry/pytorch-lms/pytorch_v1.5.0_large_model_support.patch IBM's LMS patch (sha256 cef6859b...)
#   .carry/pytorch-lms/wheels/*.whl                             GitPython, gitdb, smmap, unidiff, platformdirs
# Output: everything under $OUT (default ./out-pytorch-l2); summary.txt first.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/out-pytorch-l2}
CARRY=${CARRY:-$REPO/.carry/pytorch-lms}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-540}          # the whole script; the GPU machine stops a command at 600 s
START=$(date +%s)
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/pytorch-l2.XXXXXX)
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"

left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$SUMMARY"; }
PY=${PYTHON:-python3}

# ---- environment ------------------------------------------------------------------------------------------------
{
  date -u +%FT%TZ; uname -a; nproc; free -g | head -2
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  command -v nvcc && nvcc --version | tail -2
  command -v cmake && cmake --version | head -1
  gcc --version | head -1; "$PY" --version
} > "$OUT/env.txt" 2>&1
say "env: $(grep -m1 -i 'release' "$OUT/env.txt"); $(grep -m1 'cmake version' "$OUT/env.txt"); $(grep -m1 '^gcc' "$OUT/env.txt")"

# ---- lgpatch from this checkout, its missing dependencies from the carried wheels --------------------------------
DEPS=$WORK/pydeps
if ! "$PY" -c "import git, unidiff, platformdirs" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$DEPS" \
    GitPython gitdb smmap unidiff platformdirs > "$OUT/pip.txt" 2>&1 || say "pip install of carried wheels failed"
fi
export PYTHONPATH=$REPO:$DEPS${PYTHONPATH:+:$PYTHONPATH}
export LGPATCH_CACHE=$WORK/cache
LG() { "$PY" -m legacy_gpu_patch "$@"; }
classify() {  # classify LOG NAME: the classifier's JSON next to the log, if the command exists
  if LG classify --help > /dev/null 2>&1; then LG classify --json "$1" > "$OUT/$2.classify.json" 2> "$OUT/$2.classify.txt"; fi
}

# ---- L0 ---------------------------------------------------------------------------------------------------------
tar -C "$WORK" -xf "$CARRY/pt-shallow.tar"
SRC=$WORK/pt-shallow
LG cache add "$CARRY/pytorch_v1.5.0_large_model_support.patch" > "$OUT/l0-cache-add.txt" 2>&1
for combo in "11.1 sm_86" "13.0 sm_90"; do
  set -- $combo
  WT=$WORK/wt-$1
  LG apply pytorch-lms --cuda "$1" --arch "$2" --strict --offline --no-submodules --source "$SRC" \
    --workdir "$WT" > "$OUT/l0-apply-cuda$1.txt" 2>&1
  say "L0 apply --cuda $1 --arch $2 --strict: rc=$? ($(grep -c 'all exact' "$OUT/l0-apply-cuda$1.txt") patch steps exact; $(tail -2 "$OUT/l0-apply-cuda$1.txt" | head -1))"
done
WT11=$WORK/wt-11.1
WT=$WORK/wt-13.0
LG revert --workdir "$WT11" > "$OUT/l0-revert.txt" 2>&1
PRISTINE=$(git -C "$SRC" rev-parse 'v1.5.0^{tree}')
AFTER=$(git -C "$WT11" rev-parse 'HEAD^{tree}')
say "L0 revert: tree $AFTER, pristine $PRISTINE: $([ "$AFTER" = "$PRISTINE" ] && echo IDENTICAL || echo DIFFERENT)"

# cuDNN 9 from the image's wheel, laid out the way FindCUDNN looks (lib/libcudnn.so).
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
CUDNN=$WORK/cudnn
if [ -d "$SITE/nvidia/cudnn/include" ]; then
  mkdir -p "$CUDNN/lib"; ln -s "$SITE/nvidia/cudnn/include" "$CUDNN/include"
  ln -s "$(ls "$SITE"/nvidia/cudnn/lib/libcudnn.so* | head -1)" "$CUDNN/lib/libcudnn.so"
fi
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}

# ---- L1 (in the background: nvcc runs one probe at a time, the build below takes the other cores) -------------
( LG verify --workdir "$WT" --arch sm_86,sm_90 --keep "$WORK/keep" --json > "$OUT/l1-verify.json" 2> "$OUT/l1-verify.txt"
  echo "rc=$?" >> "$OUT/l1-verify.txt" ) &
VERIFY_PID=$!

# ---- L2: LMS-only tree first (what the CMake patchsets fix), then the patched tree -------------------------------
LMS_ONLY=$WORK/lms-only
git -C "$WT" worktree add -q --detach "$LMS_ONLY" "$(git -C "$WT" log --format=%H --grep='recipe/ibm-lms' -1)"
c10_configure() {  # TREE BUILD LOG ARCHLIST CUDNN(on|off)
  local extra=()
  [ "$5" = on ] && [ -d "$CUDNN" ] && extra=(-DCAFFE2_USE_CUDNN=ON "-DCUDNN_ROOT=$CUDNN")
  cmake -S "$1/c10" -B "$2" -DCMAKE_BUILD_TYPE=Release -DUSE_CUDA=ON -DBUILD_SHARED_LIBS=ON \
    "-DCUDA_TOOLKIT_ROOT_DIR=$CUDA_HOME" "-DTORCH_CUDA_ARCH_LIST=$4" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -Wno-dev \
    "${extra[@]}" > "$3" 2>&1
}
c10_configure "$LMS_ONLY" "$WORK/b-lms-cudnn" "$OUT/l2-lms-only-cudnn9.log" "9.0" on
say "L2 LMS-only, cuDNN 9, one arch: configure rc=$? ($(grep -E 'Found cuDNN|requires cuDNN' "$OUT/l2-lms-only-cudnn9.log" | tr -s ' \n' ' '))"
c10_configure "$LMS_ONLY" "$WORK/b-lms-archs" "$OUT/l2-lms-only-cmake4.log" "8.6;9.0" off
say "L2 LMS-only, CMake 4, TORCH_CUDA_ARCH_LIST=8.6;9.0: configure rc=$? ($(grep -m1 'Unknown arguments' "$OUT/l2-lms-only-cmake4.log"))"
classify "$OUT/l2-lms-only-cudnn9.log" l2-lms-only-cudnn9
classify "$OUT/l2-lms-only-cmake4.log" l2-lms-only-cmake4

export TORCH_CUDA_ARCH_LIST="8.6;9.0"
if LG build --help 2>/dev/null | grep -q -- '--target'; then
  timeout $(( $(left) - 200 )) "$PY" -m legacy_gpu_patch build --workdir "$WT" --arch sm_86,sm_90 --target c10 \
    --target c10_cuda --jobs "$JOBS" --log "$OUT/l2-build.log" --report-dir "$OUT/l2-build-report" -q \
    > "$OUT/l2-build.txt" 2>&1
  rc=$?; how="lgpatch build --target c10 --target c10_cuda"
else
  { c10_configure "$WT" "$WT/build/c10" /dev/stdout "8.6;9.0" on &&
    timeout $(( $(left) - 200 )) cmake --build "$WT/build/c10" --target c10 c10_cuda --parallel "$JOBS"; } \
    > "$OUT/l2-build.log" 2>&1
  rc=$?; how="cmake (lgpatch build not available yet)"
fi
say "L2 patched c10 + c10_cuda via $how: rc=$rc; $(grep -m1 -E 'Found cuDNN' "$OUT/l2-build.log"); $(grep -c -E 'Building CXX object' "$OUT/l2-build.log") objects; libs: $(find "$WT/build" -name 'libc10*.so' -printf '%f ' 2>/dev/null)"
classify "$OUT/l2-build.log" l2-build

# LMS's allocator from the L2 libraries, run on the GPU (bench/gpu/lms_allocator_smoke.cpp).
B=$WT/build/c10
if [ -f "$B/cuda/libc10_cuda.so" ]; then
  g++ -std=c++14 "$REPO/bench/gpu/lms_allocator_smoke.cpp" -I"$WT" -I"$B" -I"$CUDA_HOME/include" -L"$B" \
    -L"$B/cuda" -lc10_cuda -lc10 -L"$CUDA_HOME/lib64" -lcudart -Wl,-rpath,"$B:$B/cuda" -o "$WORK/lms_smoke" \
    > "$OUT/l2-lms-smoke.txt" 2>&1 && "$WORK/lms_smoke" >> "$OUT/l2-lms-smoke.txt" 2>&1
  say "L2 LMS allocator smoke on the GPU: rc=$? ($(tail -3 "$OUT/l2-lms-smoke.txt" | tr '\n' ' '))"
fi

# ---- L3: the top-level configure, then ATen/THC CUDA sources one by one until the time is used ------------------
timeout 120 cmake -S "$WT" -B "$WT/build/top" -DUSE_CUDA=ON -DBUILD_PYTHON=OFF -DBUILD_TEST=OFF -DUSE_CUDNN=ON \
  "-DCUDNN_ROOT=$CUDNN" "-DPYTHON_EXECUTABLE=$(command -v "$PY")" "-DCUDA_TOOLKIT_ROOT_DIR=$CUDA_HOME" \
  -DTORCH_CUDA_ARCH_LIST="8.6;9.0" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -Wno-dev > "$OUT/l3-configure.log" 2>&1
say "L3 top-level configure: rc=$? ($(grep -c 'CMake Error' "$OUT/l3-configure.log") CMake errors; first: $(grep -m1 -A2 'CMake Error' "$OUT/l3-configure.log" | tr '\n' ' ' | cut -c1-200))"
classify "$OUT/l3-configure.log" l3-configure

wait "$VERIFY_PID"
say "L1 verify: $(tail -1 "$OUT/l1-verify.txt"); $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["counts"])' "$OUT/l1-verify.json" 2>/dev/null)"

GEN=$(ls -d "$WORK"/keep/lgpatch-verify-*/gen-patched 2>/dev/null | head -1)
if [ -n "$GEN" ] && [ "$(left)" -gt 90 ]; then
  INCS=(-I"$WT" -I"$WT/aten/src" -I"$GEN" -I"$GEN/aten")
  for d in "$SITE"/nvidia/*/include ${LGPATCH_CUDA_INCLUDE//:/ }; do [ -d "$d" ] && INCS+=(-I"$d"); done
  FLAGS=(-std=c++17 -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC --expt-relaxed-constexpr
         --expt-extended-lambda -DCUDA_HAS_FP16=1 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
         -D__CUDA_NO_HALF2_OPERATORS__ -DTORCH_CUDA_BUILD_MAIN_LIB -w)
  mkdir -p "$WORK/l3-obj" "$OUT/l3-units"
  ( cd "$WT" && ls aten/src/ATen/native/sparse/cuda/*.cu aten/src/ATen/native/cuda/*.cu aten/src/ATen/cuda/*.cu \
      aten/src/THC/*.cu aten/src/THCUNN/*.cu aten/src/THC/generated/*.cu 2>/dev/null ) > "$WORK/units.txt"
  DEADLINE=$(( $(date +%s) + $(left) - 40 ))
  export WT WORK OUT DEADLINE
  compile_unit() {
    local f=$1 name=${1//\//_} rest=$(( DEADLINE - $(date +%s) ))
    [ "$rest" -lt 20 ] && { echo "$f NOT-RUN" >> "$OUT/l3-units.txt"; return; }
    ( cd "$WT" && timeout "$rest" nvcc -c "$f" -o "$WORK/l3-obj/$name.o" "${@:2}" ) > "$OUT/l3-units/$name.log" 2>&1
    local rc=$?
    echo "$f $([ $rc -eq 0 ] && echo OK || { [ $rc -eq 124 ] && echo TIMEOUT || echo FAIL; })" >> "$OUT/l3-units.txt"
  }
  export -f compile_unit
  xargs -a "$WORK/units.txt" -P "$JOBS" -I{} bash -c 'compile_unit "$@"' _ {} "${FLAGS[@]}" "${INCS[@]}"
  cat "$OUT"/l3-units/*.log > "$OUT/l3-units-all.log" 2>/dev/null
  say "L3 ATen/THC CUDA units (sm_90, nvcc -std=c++17): $(grep -c ' OK$' "$OUT/l3-units.txt") ok, $(grep -c ' FAIL$' "$OUT/l3-units.txt") failed, $(grep -c -E ' (TIMEOUT|NOT-RUN)$' "$OUT/l3-units.txt") not finished, of $(wc -l < "$WORK/units.txt")"
  grep -h -m3 -E 'error' "$OUT"/l3-units/*.log 2>/dev/null | sort | uniq -c | sort -rn | head -40 > "$OUT/l3-top-errors.txt"
  classify "$OUT/l3-units-all.log" l3-units
else
  say "L3 units: skipped (no generated headers from L1, or no time left: $(left)s)"
fi
git -C "$WT" worktree remove --force "$LMS_ONLY" 2>/dev/null
say "done in $(( $(date +%s) - START ))s; work dir $WORK (not kept)"
rm -rf "$WORK"
