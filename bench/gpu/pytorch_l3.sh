#!/usr/bin/env bash
# PyTorch 1.5.0 + LMS, L3: the full build on the GPU machine (CUDA 13, CMake 4, gcc 13, no network), as far as
# the time allows, with every failure classified. Re-running it on the same (still warm) machine continues the
# same build tree.
#
#   1. lgpatch cache add-mirror for the 11 submodules the recipe lists (shallow clones carried in submodules.tar),
#      lgpatch apply pytorch-lms --cuda 13.0 --arch sm_90 --strict --offline: the submodules come from the cache
#   2. lgpatch build --target ATEN_CUDA_FILES_GEN_TARGET: the recipe's own configure (driver link, wheel library
#      links, top-level CMake) and ATen's code generator
#   2b. lgpatch build --target c10 --target c10_cuda: LMS's allocator libraries (L2 with this recipe)
#   3. cmake --build --target torch_cuda, keep going past failures (ninja -k 0), until BUDGET_S; the log is
#      classified by `lgpatch classify`; counts of compiled CUDA/C++ objects and the failed ones go to summary.txt
#
# Inputs, carried from the repository root (ignored paths; docs/recipes/pytorch-lms.md says how to make them):
#   .carry/pytorch-lms/pt-shallow.tar, pytorch_v1.5.0_large_model_support.patch, wheels/  (as pytorch_l2.sh)
#   .carry/pytorch-lms/submodules.tar   submirrors/<name>.git shallow clones at the pins + submirrors/urls.txt
# Work tree: $L3_WORK (default .l3work/ in the repository, an ignored path the machine keeps between calls).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
FINAL=${OUT:-$PWD/out-pytorch-l3}  # gets summary.txt and one archive of the logs (few files come back)
CARRY=${CARRY:-$REPO/.carry/pytorch-lms}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-540}
TARGET=${TARGET:-torch_cuda}
START=$(date +%s)
WORK=${L3_WORK:-$REPO/.l3work}
OUT=$WORK/out
mkdir -p "$OUT" "$FINAL"
SUMMARY=$OUT/summary.txt
touch "$SUMMARY"
finish() { say "done"; tar -C "$WORK" -czf "$FINAL/l3-logs.tgz" out 2>/dev/null; cp "$SUMMARY" "$FINAL/summary.txt"; exit 0; }
left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }
say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$SUMMARY"; }
PY=${PYTHON:-python3}

{ date -u +%FT%TZ; nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvcc --version | tail -1; cmake --version | head -1; gcc --version | head -1; "$PY" --version
  command -v ninja || echo "no ninja"; } > "$OUT/env.txt" 2>&1

DEPS=$WORK/pydeps
if ! "$PY" -c "import git, unidiff, platformdirs, packaging" 2>/dev/null && [ ! -d "$DEPS" ]; then
  "$PY" -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$DEPS" \
    GitPython gitdb smmap unidiff platformdirs packaging > "$OUT/pip.txt" 2>&1 || say "pip install of carried wheels failed"
fi
export PYTHONPATH=$REPO:$DEPS${PYTHONPATH:+:$PYTHONPATH}
export LGPATCH_CACHE=$WORK/cache
LG() { "$PY" -m legacy_gpu_patch "$@"; }
command -v ninja > /dev/null && export CMAKE_GENERATOR=Ninja

WT=$WORK/wt
if [ ! -f "$WT/build/cmake/CMakeCache.txt" ]; then
  # ---- 1. apply, submodules from the cache ---------------------------------------------------------------------
  rm -rf "$WT" "$WORK/pt-shallow" "$WORK/submirrors"
  tar -C "$WORK" -xf "$CARRY/pt-shallow.tar"
  tar -C "$WORK" -xf "$CARRY/submodules.tar"
  LG cache add "$CARRY/pytorch_v1.5.0_large_model_support.patch" > "$OUT/cache-add.txt" 2>&1
  while read -r url dir; do
    LG cache add-mirror "$url" "$WORK/submirrors/$dir" >> "$OUT/cache-add.txt" 2>&1 || say "add-mirror $url failed"
  done < "$WORK/submirrors/urls.txt"
  LG apply pytorch-lms --cuda 13.0 --arch sm_90 --strict --offline --source "$WORK/pt-shallow" --workdir "$WT" \
    > "$OUT/apply.txt" 2>&1
  rc=$?
  say "apply --cuda 13.0 --arch sm_90 --strict --offline: rc=$rc ($(tail -2 "$OUT/apply.txt" | head -1 | cut -c1-160)); $(grep -c . <(git -C "$WT" submodule status | grep -v '^-')) submodules checked out"
  [ $rc = 0 ] || finish

  # ---- 2. the recipe's configure through lgpatch build ---------------------------------------------------------
  LG build --workdir "$WT" --arch sm_90 --jobs "$JOBS" --target ATEN_CUDA_FILES_GEN_TARGET \
    --log "$OUT/configure.log" --report-dir "$OUT/configure-report" -q > "$OUT/configure.txt" 2>&1
  say "lgpatch build (configure + ATen codegen): rc=$? ($(grep -m1 -E 'CUDA detected' "$OUT/configure.log")); $(grep -c 'CMake Error' "$OUT/configure.log") CMake errors"
  # L2 with this recipe: LMS's allocator libraries through lgpatch build --target (streamed, classified)
  LG build --workdir "$WT" --arch sm_90 --jobs "$JOBS" --target c10 --target c10_cuda \
    --log "$OUT/l2-c10.log" --report-dir "$OUT/l2-c10-report" -q > "$OUT/l2-c10.txt" 2>&1
  say "lgpatch build --target c10 --target c10_cuda: rc=$?; $(find "$WT/build/cmake" -name 'libc10*.so' -printf '%f ' 2>/dev/null)"
else
  say "continuing the build tree from the previous call"
fi

# ---- 3. two things at once, half the cores each, until the budget: -----------------------------------------------
#   a) cmake --build --target $TARGET, keep going past failures (torch_cuda's CUDA objects wait for torch_cpu)
#   b) the CUDA translation units compiled straight away with the build's own nvcc command lines (taken from the
#      generated build files, so the flags are CMake's), the ones most likely to meet CUDA 13 changes first
n=$(ls "$OUT"/build-*.log 2>/dev/null | wc -l); n=$((n + 1))
LOG=$OUT/build-$n.log
KEEP=(); [ "${CMAKE_GENERATOR:-}" = Ninja ] && KEEP=(-- -k 0) || KEEP=(-- -k)
export CPATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/include"
HALF=$(( JOBS > 1 ? JOBS / 2 : 1 ))
SPAN=$(( $(left) - 50 ))
timeout --signal=INT $SPAN cmake --build "$WT/build/cmake" --target "$TARGET" --parallel "$HALF" \
  "${KEEP[@]}" > "$LOG" 2>&1 &
BUILD_PID=$!
CU=$OUT/cuda-units-$n
mkdir -p "$CU"; touch "$CU/ok.txt" "$CU/failed.txt"
if [ "${CMAKE_GENERATOR:-}" = Ninja ]; then
  ( cd "$WT/build/cmake" && ninja -t targets all | sed -n 's/^\(caffe2[^:]*\.cu\.o\): .*/\1/p' | sort -u ) > "$CU/all.txt"
  # thrust/CUB, cuSPARSE/cuBLAS, warp intrinsics and device properties first: where CUDA 12/13 changed things
  hot='cub|thrust|Sort|Unique|Embedding|Index|Reduce|Scan|Sparse|Blas|Dist|Random|Tensor(Math|Topk|Mode)|Shuffle'
  { grep -E "$hot" "$CU/all.txt"; grep -v -E "$hot" "$CU/all.txt"; } | while read -r t; do
    [ -f "$WT/build/cmake/$t" ] || echo "$t"
  done > "$CU/order.txt"
  export WT CU
  timeout --signal=INT $SPAN xargs -a "$CU/order.txt" -P "$HALF" -I{} bash -c '
    t={}; name=$(basename "$t" .cu.o); cmd=$(cd "$WT/build/cmake" && ninja -t commands "$t" | tail -1)
    if (cd "$WT/build/cmake" && eval "$cmd") > "$CU/$name.log" 2>&1; then echo "$name" >> "$CU/ok.txt"; rm -f "$CU/$name.log"
    else echo "$name" >> "$CU/failed.txt"; fi' 2> /dev/null
fi
wait $BUILD_PID; rc=$?
cxx=$(find "$WT/build/cmake" -name '*.cpp.o' -o -name '*.cc.o' | wc -l)
say "cmake --build --target $TARGET -j$HALF (keep going): rc=$rc (124 = stopped at the budget); C++ objects: $cxx; FAILED: $(grep -c '^FAILED' "$LOG")"
grep '^FAILED' "$LOG" | cut -c1-220 > "$OUT/failed-$n.txt"
say "CUDA units compiled directly (-j$HALF): $(wc -l < "$CU/order.txt" 2>/dev/null) to do, $(cat "$CU/ok.txt" 2>/dev/null | wc -l) ok, $(cat "$CU/failed.txt" 2>/dev/null | wc -l) failed: $(tr '\n' ' ' < "$CU/failed.txt" 2>/dev/null | cut -c1-400)"
cat "$LOG" "$CU"/*.log 2>/dev/null > "$OUT/all-$n.log"
LG classify --json "$OUT/all-$n.log" > "$OUT/all-$n.classify.json" 2> /dev/null
LG classify "$OUT/all-$n.log" > "$OUT/all-$n.classify.txt" 2>&1
say "classify: $(head -c 1500 "$OUT/all-$n.classify.txt" | tr -s ' \n' ' ')"
finish
