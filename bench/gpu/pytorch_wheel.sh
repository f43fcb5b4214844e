#!/usr/bin/env bash
# PyTorch 1.5.0 + LMS as a wheel on a GPU machine (CUDA 13, CMake 4, gcc 13, no network), then the checks.
#
#   bash bench/gpu/pytorch_wheel.sh            build (or resume), wheel, install, checks, then $EXTRA_CHECK
#   bash bench/gpu/pytorch_wheel.sh status     progress only: objects done/total per phase, log tails
#   ARCH=sm_80,sm_86,sm_89,sm_90+ptx PTX_JIT=1 bash bench/gpu/pytorch_wheel.sh   the multi-architecture wheel
#
# ARCH (default sm_90): the targets, as `lgpatch apply/build --arch` take them; a list builds one wheel for all of
#   them (TORCH_CUDA_ARCH_LIST 8.0;8.6;8.9;9.0+PTX, wheel 1.5.0+lgpatch.cu130.sm80.sm86.sm89.sm90ptx) in its own
#   work folder (.ptwork-<label>; a work folder is refused for other targets than it was built for).
# UNTIL=apply|configure|wheel: stop after that phase (a build without the GPU checks).
# JOBS (default: python -m legacy_gpu_patch.tools.jobs: min(cores, available memory / 1.3 GiB per CUDA job)).
# PTX_JIT=1: after the checks, the conv checks and LMS's own tests again with CUDA_FORCE_PTX_JIT=1 (the driver
#   ignores the cubins and JIT-compiles the embedded PTX; needs +ptx in ARCH), with the JIT cache of
#   `lgpatch jit-cache env` in a fresh folder: the first start (cold cache) and the second (warm) timed.
#
# Phases (each prints its time; a phase that is done is skipped when the script is called again on the same
# machine, so a build longer than one session's command limit is a chain of calls; ninja resumes the tree):
#   apply     the 11 submodules into lgpatch's mirror cache, `lgpatch apply pytorch-lms --offline` (re-applying
#             rewinds to the first changed step when a patchset changed since the last call)
#   configure `lgpatch build --target ATEN_CUDA_FILES_GEN_TARGET`: the recipe's configure + ATen's generator
#   build     `lgpatch build`: the recipe's whole build section in one process: configure again (before any
#             object is compiled), cmake --build build (ninja, JOBS jobs), setup.py bdist_wheel, check-wheel
#             -> dist/torch-1.5.0+lgpatch.cu130.sm90-cp312-*.whl; after a failed compile, ninja -k 0 builds all
#             else it can (KEEP_GOING=0: not), so one call lists every failure
#   wheel     done by build; on a tree built without the wheel step, `lgpatch build` again (nothing to compile)
#   Every lgpatch build runs with --python $PY. Before one re-runs CMake on a tree that has objects, the guard
#   configures alone and prints `ninja -n` edge counts before/after; more than MAX_DIRTY (50) built edges made
#   dirty stops the call with the first changed command (ALLOW_REBUILD=1: build anyway).
#   install   pip install --no-deps --target $WORK/site: a fresh folder, first on PYTHONPATH of the checks
#             only (the image's own torch stays as it is); site/nvidia links the image's CUDA 13 wheels, so the
#             wheel's $ORIGIN/../../nvidia/... run paths resolve as in a normal site-packages
#   archs     tools/cuda_archs on torch/lib/libtorch_cuda.so: every SASS arch of ARCH and its PTX (archs.json)
#   checks    bench/gpu/pytorch_checks.py (import, correctness vs CPU, TF32 both ways, cuDNN RNN report, exit
#             status after backward, a deterministic conv under an LMS limit), bench/gpu/lms_train.py (then
#             again with PYTORCH_LMS_DEBUG=$LMS_DEBUG_VARIANT, default reclaim-algo=size, empty: not; and with
#             $LMS_TRANSFER_ARGS, default "--width 32 --batch 64", a transfer-bound model, empty: not; after a
#             failure with --cudnn off instead), PyTorch's own tests from the patched tree through their own
#             runner (TEST_BUDGET_S each, in parallel), $EXTRA_CHECK
#
# Inputs, carried from the repository root (ignored; docs/recipes/pytorch-lms.md "The GPU command" says how):
#   .carry/pytorch-lms/pt-shallow.tar, submodules.tar, pytorch_v1.5.0_large_model_support.patch, wheels/*.whl
# Work folder: $PT_WORK (default .ptwork/ in the repository: ignored, kept by the machine between calls).
# Results: $OUT (default $PT_WORK/out-final) gets summary.txt, checks.json, lms.txt, archs.json and logs.tgz
# (and ptx-jit.txt with PTX_JIT=1). cuobjdump: the toolkit's, or the nvidia-cuda-cuobjdump wheel among the carried
# wheels (installed into $PT_WORK/cuobjdump when the machine has none).
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${CARRY:-$REPO/.carry/pytorch-lms}
ARCH=${ARCH:-sm_90}
# The image's interpreter, as a path (CMake's PYTHON_EXECUTABLE); not resolved further: a venv's bin/python is a link
PY=$(command -v "${PYTHON:-python3}") || { echo "PYTHON=${PYTHON:-python3}: not found" >&2; exit 2; }
RECIPE=${RECIPE:-pytorch-lms}  # tests give a small recipe of the same shape (its build section: the same commands)
# The targets as lgpatch stores them, TORCH_CUDA_ARCH_LIST, and the wheel label (this checkout's lgpatch, stdlib only)
read -r ARCH_CANON ARCH_LIST ARCH_LABEL < <(PYTHONPATH=$REPO "$PY" -S -c 'import sys
from legacy_gpu_patch.cuda.archflags import ArchSyntaxError, flags_for
try:
    f = flags_for(sys.argv[1])
except ArchSyntaxError as exc:
    sys.exit(f"ARCH={sys.argv[1]}: {exc.message} (like sm_90, or a list: sm_80,sm_86,sm_89,sm_90+ptx)")
print(",".join(f.names), f.torch_cuda_arch_list, f.wheel_label)' "$ARCH") || exit 2
if [ "$ARCH_CANON" = sm_90 ]; then DEFAULT_WORK=$REPO/.ptwork; else DEFAULT_WORK=$REPO/.ptwork-$ARCH_LABEL; fi
WORK=${PT_WORK:-$DEFAULT_WORK}
FINAL=${OUT:-$WORK/out-final}
FINAL_RUN=$WORK/out-final  # what the checks write; copied to $OUT by the call that reads them
JOBS_GIVEN=${JOBS:-}
TEST_BUDGET_S=${TEST_BUDGET_S:-180}  # the three test runs (in parallel); the whole chain must fit 30 min of GPU time
LOGS=$WORK/logs
mkdir -p "$LOGS" "$FINAL" "$FINAL_RUN" "$WORK/state"
SUMMARY=$LOGS/summary.txt
touch "$SUMMARY"
T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$SUMMARY"; }
done_phase() { [ -f "$WORK/state/$1" ]; }
mark() { echo "$(( $(date +%s) - $2 ))" > "$WORK/state/$1"; say "phase $1: done in $(cat "$WORK/state/$1") s"; }
WT=$WORK/wt
B=$WT/build
if [ -n "$JOBS_GIVEN" ]; then
  JOBS=$JOBS_GIVEN; JOBS_WHY="JOBS given"
else  # the same sizing as lgpatch build's MAX_JOBS; all cores if the helper cannot run
  JOBS=$(PYTHONPATH=$REPO "$PY" -S -m legacy_gpu_patch.tools.jobs 2> "$WORK/jobs.txt") || JOBS=$(nproc)
  JOBS_WHY=$(cat "$WORK/jobs.txt" 2>/dev/null)
fi

progress() {  # objects done/total: C/C++ and CUDA, from build.ninja and the objects on disk
  [ -f "$B/build.ninja" ] || { say "progress: not configured yet"; return; }
  local tc tu dc du
  tc=$(grep -c -E '^build [^:]*\.(cpp|cc|c)\.o:' "$B/build.ninja"); tu=$(grep -c -E '^build [^:]*\.cu\.o:' "$B/build.ninja")
  dc=$(find "$B" -name '*.cpp.o' -o -name '*.cc.o' -o -name '*.c.o' | wc -l); du=$(find "$B" -name '*.cu.o' | wc -l)
  say "progress: C/C++ objects $dc/$tc, CUDA objects $du/$tu, libraries: $(ls "$B"/lib/*.so 2>/dev/null | xargs -rn1 basename | tr '\n' ' ')"
  local last; last=$(ls -t "$LOGS"/build-*.log "$LOGS"/keep-going-*.log 2>/dev/null | head -1)
  say "progress: failed in the last build log: $(grep -c '^FAILED' "${last:-/dev/null}"); wheel: $(ls "$WT"/dist/*.whl 2>/dev/null | xargs -rn1 basename)"
}
finish() {  # everything that comes back: at most 8 files (summary, logs archive, checks, lms, run paths)
  progress
  cp "$SUMMARY" "$FINAL_RUN/summary.txt"
  tar -C "$WORK" -czf "$FINAL_RUN/logs.tgz" logs 2>/dev/null
  [ "$FINAL" = "$FINAL_RUN" ] || cp "$FINAL_RUN"/* "$FINAL"/ 2>/dev/null
  exit "${1:-0}"
}
if [ "${1:-}" = status ] || [ "${1:-}" = wait ]; then
  # wait [SECONDS]: until the pipeline (started detached by an earlier call) has finished, or SECONDS passed
  end=$(( $(date +%s) + ${2:-0} ))
  while [ "${1:-}" = wait ] && [ ! -f "$WORK/state/all" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 10; done
  say "status: $([ -f "$WORK/state/all" ] && echo 'pipeline finished' || echo 'pipeline running'); $(ls "$WORK/state" | tr '\n' ' ')"
  tail -2 "$(ls -t "$LOGS"/build-*.log 2>/dev/null | head -1)" 2>/dev/null | cut -c1-300
  finish
fi
rm -f "$WORK/state/all"
trap 'touch "$WORK/state/all"' EXIT
# One work folder, one set of targets: its phases (configure, build, wheel) are done for the targets it was made for.
if [ -f "$WORK/arch.txt" ] && [ "$(cat "$WORK/arch.txt")" != "$ARCH_CANON" ]; then
  say "ARCH=$ARCH_CANON, but $WORK was built for $(cat "$WORK/arch.txt"): set PT_WORK to another folder"; finish 2
fi
echo "$ARCH_CANON" > "$WORK/arch.txt"
say "targets: $ARCH_CANON (TORCH_CUDA_ARCH_LIST=$ARCH_LIST, wheel label $ARCH_LABEL); jobs: $JOBS ($JOBS_WHY)"

{ date -u +%FT%TZ; nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -1; cmake --version | head -1; gcc --version | head -1; ninja --version; "$PY" --version
  "$PY" -c 'import numpy, setuptools; print("numpy", numpy.__version__, "setuptools", setuptools.__version__)'
} > "$LOGS/env.txt" 2>&1

DEPS=$WORK/pydeps
if ! "$PY" -c "import git, unidiff, platformdirs" 2>/dev/null && [ ! -d "$DEPS" ]; then
  "$PY" -m pip install -q --no-index --find-links "$CARRY/wheels" --target "$DEPS" \
    GitPython gitdb smmap unidiff platformdirs > "$LOGS/pip.txt" 2>&1 || say "pip install of carried wheels failed"
fi
# LGPATCH_SRC: a snapshot of lgpatch (legacy_gpu_patch/, recipes/, patchsets/) to run instead of this checkout's
export PYTHONPATH=${LGPATCH_SRC:-$REPO}:$DEPS${PYTHONPATH:+:$PYTHONPATH}
export LGPATCH_CACHE=$WORK/cache CMAKE_GENERATOR=Ninja
LG() { (cd "$WORK" && "$PY" -m legacy_gpu_patch "$@"); }  # from $WORK: PYTHONPATH decides which lgpatch
SITE_PACKAGES=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# ---- apply --------------------------------------------------------------------------------------------------------
t=$(date +%s)
if [ ! -d "$WT/.git" ]; then
  rm -rf "$WORK/pt-shallow" "$WORK/submirrors"
  tar -C "$WORK" -xf "$CARRY/pt-shallow.tar" && tar -C "$WORK" -xf "$CARRY/submodules.tar"
  LG cache add "$CARRY/pytorch_v1.5.0_large_model_support.patch" > "$LOGS/cache-add.txt" 2>&1
  while read -r url dir; do
    LG cache add-mirror "$url" "$WORK/submirrors/$dir" >> "$LOGS/cache-add.txt" 2>&1 || say "add-mirror $url failed"
  done < "$WORK/submirrors/urls.txt"
fi
LG apply "$RECIPE" --cuda 13.0 --arch "$ARCH_CANON" --strict --offline --source "$WORK/pt-shallow" --workdir "$WT" \
  > "$LOGS/apply.txt" 2>&1
rc=$?
say "apply: rc=$rc; $(tail -2 "$LOGS/apply.txt" | head -1 | cut -c1-200)"
[ $rc = 0 ] || finish 1
mark apply "$t"
[ "${UNTIL:-}" = apply ] && { say "UNTIL=apply: stopping here"; finish 0; }

# ---- configure ----------------------------------------------------------------------------------------------------
# Every lgpatch build builds in $PY's environment (--python): its site-packages has the CUDA 13 library wheels, so
# the recipe's CPATH, CMAKE_INCLUDE_PATH and wheel-library-links find them (lgpatch's own build venv has none: the
# configure then found the machine's cuDNN in /usr/include instead of the wheel's).
LGB() { LG build --workdir "$WT" --arch "$ARCH_CANON" --jobs "$JOBS" --python "$PY" "$@"; }
if ! done_phase configure; then
  t=$(date +%s)
  LGB --target ATEN_CUDA_FILES_GEN_TARGET --log "$LOGS/configure.log" --report-dir "$LOGS/configure-report" -q \
    > "$LOGS/configure.txt" 2>&1
  rc=$?
  say "configure: rc=$rc; $(grep -m1 'Found cuDNN' "$LOGS/configure.log"); $(grep -c 'CMake Error' "$LOGS/configure.log") CMake errors"
  [ $rc = 0 ] || finish 1
  mark configure "$t"
fi
[ "${UNTIL:-}" = configure ] && { say "UNTIL=configure: stopping here"; finish 0; }

# The recipe's build env, as lgpatch build sets it (same --python, same values), for ninja run by hand in build/:
# ninja re-runs CMake itself when FindCUDA's .depend files changed, and that configure needs these paths.
CUDA_ROOT=$(sed -n 's/^CUDA_TOOLKIT_ROOT_DIR:PATH=//p' "$B/CMakeCache.txt" 2>/dev/null)
export CPATH=$SITE_PACKAGES/nvidia/cu13/include:$SITE_PACKAGES/nvidia/cudnn/include:${CUDA_ROOT:-/usr/local/cuda}/include
export CMAKE_LIBRARY_PATH=$B/lgpatch/wheel-libs:$B/lgpatch/driver CMAKE_INCLUDE_PATH=$SITE_PACKAGES/nvidia/cudnn/include
export TORCH_CUDA_ARCH_LIST=$ARCH_LIST

# ---- the guard: a configure must not silently throw away a built tree ---------------------------------------------
# lgpatch build configures first. On a tree with objects, that configure runs alone first; then ninja -d explain
# says how many already-built edges would run again because their command changed or the configure rewrote an input
# (ninja compares with the command each object was last built with, so a second call after a stop stops again).
# More than MAX_DIRTY (a changed compiler command: another --python, a CMakeLists that is not idempotent) stops the
# call with the first changed command, instead of a rebuild that outlasts the machine (session 4 lost its wheel so:
# 1225 of 2096 edges). The `ninja -n` edge counts before and after go into the summary too. ALLOW_REBUILD=1: build.
MAX_DIRTY=${MAX_DIRTY:-50}
# ninja -n's edge count; "stale" when build.ninja is older than its CMake inputs (ninja -n then only says it would
# re-run CMake, and counts nothing else)
edges_to_build() { local out; out=$(cd "$B" && ninja -n 2>/dev/null)
  if grep -q '^\[[0-9]*/[0-9]*\] Re-running CMake' <<< "$out"; then echo stale; else grep -c '^\[' <<< "$out"; fi; }
built_to_rebuild() { (cd "$B" && ninja -n -d explain 2>&1 >/dev/null) \
  | grep -c -E '^ninja explain: (command line changed for |(output|recorded mtime of) .* older than most recent input)'; }
commands_of() { (cd "$B" && ninja -t commands 2>/dev/null | sort) > "$1"; }
reconfigure_guard() {  # reconfigure_guard PHASE: 0 = go on
  [ -f "$B/build.ninja" ] && [ -n "$(find "$B" -name '*.o' -print -quit)" ] || return 0  # nothing built to lose
  local before after made changed t0 old new
  t0=$(date +%s)
  before=$(edges_to_build); commands_of "$LOGS/commands-before.txt"
  LGB --target ATEN_CUDA_FILES_GEN_TARGET --log "$LOGS/reconfigure-$1.log" --report-dir "$LOGS/reconfigure-report" \
    -q > "$LOGS/reconfigure-$1.txt" 2>&1 || { say "$1: reconfigure failed (rc=$?): $(tail -2 "$LOGS/reconfigure-$1.txt" | tr '\n' ' ')"; return 1; }
  after=$(edges_to_build); commands_of "$LOGS/commands-after.txt"; made=$(built_to_rebuild)
  changed=$(diff "$LOGS/commands-before.txt" "$LOGS/commands-after.txt" | grep -c '^>')
  say "$1: reconfigure check: ninja -n: $before edges to build before the configure, $after after; $made built edges to rebuild (limit $MAX_DIRTY); the configure changed $changed commands ($(( $(date +%s) - t0 )) s)"
  [ "$made" -le "$MAX_DIRTY" ] && return 0
  # the first changed command, word by word (its new form: the added command that ends with the same word; CMake's
  # ninja commands end with the source); none changed here when an earlier call's configure changed them
  old=$(diff "$LOGS/commands-before.txt" "$LOGS/commands-after.txt" | grep -m1 '^<' | cut -c3-)
  new=$(diff "$LOGS/commands-before.txt" "$LOGS/commands-after.txt" | grep '^>' | grep -m1 -F -e " ${old##* }" | cut -c3-)
  [ -n "$new" ] || new=$(diff "$LOGS/commands-before.txt" "$LOGS/commands-after.txt" | grep -m1 '^>' | cut -c3-)
  diff <(tr ' ' '\n' <<< "$old") <(tr ' ' '\n' <<< "$new") > "$LOGS/reconfigure-first-change.txt"
  say "$1: STOPPED: $made built edges would be rebuilt (> MAX_DIRTY=$MAX_DIRTY)$([ "$changed" = 0 ] || echo "; the first changed command lost [$(sed -n 's/^< //p' "$LOGS/reconfigure-first-change.txt" | head -8 | tr '\n' ' ' | cut -c1-300)] and gained [$(sed -n 's/^> //p' "$LOGS/reconfigure-first-change.txt" | head -8 | tr '\n' ' ' | cut -c1-300)]") (ninja -C $B -d explain -n says why; logs/commands-before.txt, commands-after.txt; ALLOW_REBUILD=1 rebuilds)"
  [ "${ALLOW_REBUILD:-0}" = 1 ] && { say "$1: ALLOW_REBUILD=1: rebuilding"; return 0; }
  return 1
}

# ---- build: the recipe's whole build section in one lgpatch build ---------------------------------------------------
# configure (nothing compiled yet on a first call, so even a configure that changes commands costs nothing),
# cmake --build (ninja; a later call resumes the tree), setup.py bdist_wheel, check-wheel.
wheel_name() { ls "$WT"/dist/*.whl 2>/dev/null | xargs -rn1 basename; }
full_build() {  # full_build PHASE
  local t=$(date +%s) n LOG MEMLOG MEMPID rc
  reconfigure_guard "$1" || finish 1
  n=$(ls "$LOGS"/build-*.log 2>/dev/null | wc -l); LOG=$LOGS/build-$((n + 1)).log
  progress
  MEMLOG=$LOGS/mem-$((n + 1)).txt  # memory in use (MemTotal - MemAvailable, KiB) every 5 s: the build's peak
  while :; do awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END {print t - a}' /proc/meminfo; sleep 5; done \
    > "$MEMLOG" 2>/dev/null &
  MEMPID=$!
  LGB --log "$LOG" --report-dir "$LOGS/build-report" -q > "$LOGS/build-$((n + 1)).txt" 2>&1
  rc=$?
  local failures=$LOG
  if [ $rc != 0 ] && grep -q '^FAILED' "$LOG" && [ "${KEEP_GOING:-1}" = 1 ]; then
    # cmake --build stops at the first failed compile; ninja -k 0 on the same build.ninja compiles all the rest,
    # so one call shows every failure (what the old ninja phase did; KEEP_GOING=0: not)
    failures=$LOGS/keep-going-$((n + 1)).log
    (cd "$B" && ninja -k 0 -j "$JOBS") > "$failures" 2>&1
    say "$1: lgpatch build failed; ninja -k 0 then: rc=$?, $(grep -c '^FAILED' "$failures") failed"
  fi
  kill "$MEMPID" 2>/dev/null; wait "$MEMPID" 2>/dev/null
  say "$1: lgpatch build (configure, cmake --build -j $JOBS, wheel, check-wheel) rc=$rc in $(( $(date +%s) - t )) s; FAILED: $(grep -c '^FAILED' "$failures"); wheel: $(wheel_name) $(du -h "$WT"/dist/*.whl 2>/dev/null | cut -f1)"
  say "$1: peak memory in use $(sort -n "$MEMLOG" | tail -1 | awk '{printf "%.1f GiB", $1 / 1048576}') (sampled every 5 s), $(nproc) cores, -j $JOBS"
  grep '^FAILED' "$failures" | cut -c1-240 > "$LOGS/failed.txt"
  if [ $rc != 0 ]; then
    LG classify "$failures" > "$LOGS/build.classify.txt" 2>&1
    say "classify: $(head -c 1200 "$LOGS/build.classify.txt" | tr -s ' \n' ' ')"
    finish 1
  fi
}
if ! done_phase build; then t=$(date +%s); full_build build; mark build "$t"; fi
# ---- wheel: made by the build phase; a tree built without it (an older script ran ninja alone) gets it here
if ! done_phase wheel; then
  t=$(date +%s)
  [ -n "$(wheel_name)" ] || full_build wheel-build
  [ -n "$(wheel_name)" ] || { say "wheel: none in $WT/dist after lgpatch build"; finish 1; }
  say "wheel: $(wheel_name)"
  mark wheel "$t"
fi
[ "${UNTIL:-}" = wheel ] && { say "UNTIL=wheel: stopping here"; finish 0; }

# ---- install ------------------------------------------------------------------------------------------------------
SITE=$WORK/site
if ! done_phase install; then
  t=$(date +%s)
  rm -rf "$SITE"
  "$PY" -m pip install -q --no-deps --no-index --target "$SITE" "$WT"/dist/torch-*.whl > "$LOGS/install.txt" 2>&1 \
    || { say "install failed: $(tail -3 "$LOGS/install.txt")"; finish 1; }
  ln -s "$SITE_PACKAGES/nvidia" "$SITE/nvidia"
  for f in "$SITE"/torch/lib/*.so* "$SITE"/torch/_C*.so; do
    echo "$(basename "$f"): $(readelf -d "$f" | grep -E 'RUNPATH|RPATH' | sed 's/.*\[\(.*\)\]/\1/')"
  done > "$LOGS/runpaths.txt"
  cp "$LOGS/runpaths.txt" "$FINAL_RUN/"
  mark install "$t"
fi

# ---- archs: what libtorch_cuda really embeds ----------------------------------------------------------------------
if ! done_phase archs; then
  t=$(date +%s)
  CUOBJDUMP_ARG=()
  if ! command -v cuobjdump > /dev/null && [ ! -x "${CUDA_ROOT:-/usr/local/cuda}/bin/cuobjdump" ] \
     && [ ! -x "$SITE_PACKAGES/nvidia/cu13/bin/cuobjdump" ]; then
    [ -x "$WORK/cuobjdump/nvidia/cu13/bin/cuobjdump" ] || "$PY" -m pip install -q --no-deps --no-index \
      --find-links "$CARRY/wheels" --target "$WORK/cuobjdump" nvidia-cuda-cuobjdump > "$LOGS/cuobjdump-pip.txt" 2>&1
    [ -x "$WORK/cuobjdump/nvidia/cu13/bin/cuobjdump" ] \
      && CUOBJDUMP_ARG=(--cuobjdump "$WORK/cuobjdump/nvidia/cu13/bin/cuobjdump")
  fi
  PYTHONPATH=$REPO "$PY" -m legacy_gpu_patch.tools.cuda_archs "$SITE/torch/lib/libtorch_cuda.so" \
    --expect "$ARCH_CANON" ${CUOBJDUMP_ARG[@]+"${CUOBJDUMP_ARG[@]}"} --json > "$FINAL_RUN/archs.json" 2> "$LOGS/archs.txt"
  rc=$?
  say "archs: rc=$rc (0: every target of $ARCH_CANON present, 9: some missing, 14: no cuobjdump): $(tr '\n' ' ' < "$LOGS/archs.txt" | cut -c1-300)"
  case $rc in 0|9) mark archs "$t" ;; esac  # an answer; without cuobjdump the next call tries again
fi
if [ "${PTX_JIT:-0}" = 1 ]; then  # the JIT cache settings, from lgpatch (PYTHONPATH is the wheel's below)
  JIT_ENV=$(LG jit-cache env --path "$WORK/jit-cache")
fi

# ---- checks -------------------------------------------------------------------------------------------------------
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1
cd "$WORK"  # not the source tree: `import torch` must find the wheel
t=$(date +%s)
"$PY" "$REPO/bench/gpu/pytorch_checks.py" --json "$FINAL_RUN/checks.json" > "$LOGS/checks.txt" 2>&1
say "checks: rc=$? ($(grep -c ' ok$' "$LOGS/checks.txt") ok, $(grep -c ' FAIL' "$LOGS/checks.txt") FAIL)"
LGPATCH_CUDNN_TF32=1 "$PY" "$REPO/bench/gpu/pytorch_checks.py" --only tf32 --json "$FINAL_RUN/checks-tf32on.json" \
  > "$LOGS/checks-tf32on.txt" 2>&1
say "checks with LGPATCH_CUDNN_TF32=1: rc=$?"
"$PY" "$REPO/bench/gpu/lms_train.py" --modern-python "$PY" > "$LOGS/lms.txt" 2>&1
rc=$?
say "lms_train: rc=$rc $(grep -E '^(verdict|LMS)' "$LOGS/lms.txt" | tr '\n' ' ' | cut -c1-300)"
cp "$LOGS/lms.txt" "$FINAL_RUN/lms.txt"
LMS_VARIANT=${LMS_DEBUG_VARIANT-reclaim-algo=size}  # set but empty: no second run
if [ $rc = 0 ] && [ -n "$LMS_VARIANT" ]; then
  # IBM LMS's other reclaim order (PYTORCH_LMS_DEBUG, read once per process): largest blocks first instead of the
  # first that fits. Its table beside the default's says whether the order moves the step time toward the floor.
  PYTORCH_LMS_DEBUG=$LMS_VARIANT "$PY" "$REPO/bench/gpu/lms_train.py" > "$LOGS/lms-variant.txt" 2>&1
  say "lms_train PYTORCH_LMS_DEBUG=$LMS_VARIANT: rc=$? $(grep -E '^(verdict|LMS step)' "$LOGS/lms-variant.txt" | tr '\n' ' ' | cut -c1-300)"
fi
LMS_TRANSFER=${LMS_TRANSFER_ARGS---width 32 --batch 64}  # set but empty: no transfer-bound run
if [ $rc = 0 ] && [ -n "$LMS_TRANSFER" ]; then
  # The default model computes for 1.43x the transfer floor on the H200 (session 6), so its LMS step can never come
  # near 1.5x the floor while LMS pages in on demand. The same working set with 1/4 of the arithmetic (a quarter of
  # the width, four times the batch) is bound by the transfers: its ratio measures LMS's swapping itself.
  # shellcheck disable=SC2086  # the arguments are words
  "$PY" "$REPO/bench/gpu/lms_train.py" --modern-python "$PY" $LMS_TRANSFER > "$LOGS/lms-transfer.txt" 2>&1
  say "lms_train $LMS_TRANSFER (transfer-bound): rc=$? $(grep -E '^(working set|verdict|LMS step)' "$LOGS/lms-transfer.txt" | tr '\n' ' ' | cut -c1-400)"
fi
if [ $rc != 0 ]; then  # the same run without cuDNN: whether LMS itself swaps and keeps the losses (in logs.tgz)
  "$PY" "$REPO/bench/gpu/lms_train.py" --modern-python "$PY" --cudnn off > "$LOGS/lms-nocudnn.txt" 2>&1
  say "lms_train --cudnn off: rc=$? $(grep -E '^(verdict|LMS)' "$LOGS/lms-nocudnn.txt" | tr '\n' ' ' | cut -c1-300)"
fi
cd "$WT/test"  # PyTorch's own tests from the patched tree, against the installed wheel, each time-boxed
# PyTorch 1.5's test files run through their own runner (common_utils.run_tests, i.e. unittest): today's pytest
# cannot collect them (1.5's TestCase lacks attributes pytest 8 reads). unittest's -k is a case-sensitive
# substring, so each word becomes a case-blind fnmatch pattern (conv -> *[cC][oO][nN][vV]*), as pytest's -k is.
ci_pattern() {
  local word=$1 out="*" ch i
  for (( i = 0; i < ${#word}; i++ )); do ch=${word:i:1}; out+="[${ch,,}${ch^^}]"; done
  echo "$out*"
}
own_tests() {  # own_tests NAME FILE [WORD ...]: the tests whose names contain any WORD (any case); -v: one line each
  local name=$1 file=$2
  local log=$LOGS/tests-$name.txt word
  shift 2
  local select=()
  for word in "$@"; do select+=(-k "$(ci_pattern "$word")"); done
  timeout -k 10 "$TEST_BUDGET_S" "$PY" "$file" -v ${select[@]+"${select[@]}"} > "$log" 2>&1
  local rc=$?
  say "tests $name ($file $*): rc=$rc (124 = stopped at ${TEST_BUDGET_S} s): $(unittest_counts "$log"); $(grep -E '^(Ran [0-9]+ tests|OK|FAILED)' "$log" | tr '\n' ' ')"
  say "tests $name: $(failures_judged "$file" "$log")"
}
# The results of a -v run, one per test: unittest writes "test_x (...) ... " and the result word when the test ends,
# so whatever the test itself printed meanwhile (IBM's LMS tests print "LMS: allocation limit ..." to stderr)
# pushes the word to the start of a later line. unittest's own "Ran N" is no substitute: some 3.12 releases leave
# skipped tests out of it, and a time-boxed run never prints it.
unittest_counts() {
  awk '
    function result(text) {
      if (text ~ /^ok$/) { ok++; return 1 }
      if (text ~ /^FAIL$/) { failed++; return 1 }
      if (text ~ /^ERROR$/) { errors++; return 1 }
      if (text ~ /^(skipped|expected failure)/) { skipped++; return 1 }
      return 0
    }
    / \.\.\. / { pending = !result(substr($0, index($0, " ... ") + 5)); next }
    pending && result($0) { pending = 0 }
    END { printf "%d passed, %d failed, %d skipped or expected failures, %d errors", ok, failed, skipped, errors }
  ' "$1"
}
# Each failure or error of a run (unittest's "FAIL: test_x (__main__.Class.test_x)" lines) as known, listed in
# bench/gpu/pytorch_known_failures.txt with its reason, or new
failures_judged() {
  local file=$1 log=$2 known=$REPO/bench/gpu/pytorch_known_failures.txt id new="" old=""
  while read -r id; do
    if grep -q "^$file $id " "$known" 2>/dev/null; then old+=" $id"; else new+=" $id"; fi
  done < <(sed -nE -e 's/^(FAIL|ERROR): ([^ ]+) \([^ .]+\.([^ .]+)\.\2\)$/\3.\2/p;t' \
                  -e 's/^(FAIL|ERROR): ([^ ]+) \([^ .]+\.([^ .]+)\)$/\3.\2/p' "$log" | sort -u)  # 3.12's form, 3.11's
  echo "known failures:${old:- none}; NEW failures:${new:- none}"
}
ptx_jit() {  # the conv checks and LMS's tests through the embedded PTX only; first (cold cache) and second start
  if [[ "$ARCH_CANON" != *+ptx* && "$ARCH_CANON" != *compute_* ]]; then
    say "ptx-jit: skipped: $ARCH_CANON embeds no PTX (add +ptx to a target)"; return
  fi
  rm -rf "$WORK/jit-cache"; mkdir -p "$WORK/jit-cache"
  local start s0 rc out=$FINAL_RUN/ptx-jit.txt
  echo "$JIT_ENV" > "$out"
  for start in first second; do
    s0=$(date +%s%N)
    ( eval "$JIT_ENV"; export CUDA_FORCE_PTX_JIT=1
      "$PY" "$REPO/bench/gpu/pytorch_checks.py" --only import conv --json "$LOGS/ptx-jit-$start.json" ) \
      > "$LOGS/ptx-jit-$start.txt" 2>&1
    rc=$?
    say "ptx-jit $start start: rc=$rc in $(( ($(date +%s%N) - s0) / 1000000 )) ms ($(grep -c ' ok$' "$LOGS/ptx-jit-$start.txt") ok, $(grep -c ' FAIL' "$LOGS/ptx-jit-$start.txt") FAIL); cache $(du -sh "$WORK/jit-cache" | cut -f1)" | tee -a "$out"
  done
  cd "$WT/test"
  ( eval "$JIT_ENV"; export CUDA_FORCE_PTX_JIT=1; own_tests lms-ptx-jit test_cuda.py test_large_model_support ) \
    | tee -a "$out"
  cd "$WORK"
}
# The three runs share the GPU at once (each its own process and time box): the whole chain must fit one
# machine hold, and none of these tests measures time. lms_train.py, which does, has finished before.
own_tests lms test_cuda.py test_large_model_support &
own_tests cuda test_cuda.py &
own_tests nn test_nn.py conv lstm batchnorm &
wait
cd "$WORK"
if [ "${PTX_JIT:-0}" = 1 ]; then ptx_jit; fi
if [ -n "${EXTRA_CHECK:-}" ]; then
  bash -c "$EXTRA_CHECK" > "$LOGS/extra.txt" 2>&1
  say "EXTRA_CHECK: rc=$?"
fi
say "checks took $(( $(date +%s) - t )) s; whole call $(( $(date +%s) - T0 )) s"
finish 0
