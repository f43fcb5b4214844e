#!/usr/bin/env bash
# Issue 17 on the GPU machine, in one call: Chainer 1.24 before/after the speed patchsets, against torch.
#
# Run from the repository root with .carry/chainer-speed-next carried (CARRY names another such folder):
#   $CARRY/before/chainer-1.24.0-cp312-*.whl   the recipe without its speed steps (chainer-cudnn-algo-cache,
#                                              cupy-reduction-grid)
#   $CARRY/after/chainer-1.24.0-cp312-*.whl    the whole recipe
#   $CARRY/deps/*.whl                          six, filelock (installed only if the image lacks them)
# Each wheel goes into its own `pip install --no-deps --target` folder (the image's packages are never touched),
# first on PYTHONPATH of its own processes only. Both builds share one CuPy kernel cache (keys are the kernel
# sources, so the unchanged kernels compile once). Steps: the reduction checks of both builds in parallel, then
# the interleaved bench (chainer_speed.py --interleave: both builds' workers alternate round by round, so host
# noise lands on both; median and range per build; large inputs; launches per iteration). Writes into $OUT
# (3 files): chainer_speed.md (the tables), chainer_speed.json (raw reports), chainer_speed.log. ROUNDS (5) and
# BUDGET_S (150, no new case after it) tune it. About 3-4 minutes on an H200.
set -u
OUT=${OUT:-/tmp/chainer-speed-out}
CARRY=${CARRY:-.carry/chainer-speed-next}
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/chainer-speed.XXXXXX)
LOG="$OUT/chainer_speed.log"
mkdir -p "$OUT"
: > "$LOG"
export CUPY_CACHE_DIR="$WORK/kernel_cache"
command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"  # CuPy 1.x runs nvcc at run time
unset LD_LIBRARY_PATH  # the wheel finds the CUDA 13 libraries itself
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nvcc --version | tail -2
  "$PY" -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'; } >> "$LOG" 2>&1

deps=()
for mod in six filelock; do
  "$PY" -c "import $mod" 2> /dev/null || deps+=("$CARRY"/deps/"$mod"-*.whl)
done
for b in before after; do
  wheel=$(ls "$CARRY/$b"/chainer-1.24.0-cp3*.whl 2> /dev/null | head -1)
  if [ -z "$wheel" ]; then echo "no wheel in $CARRY/$b" | tee -a "$LOG"; exit 2; fi
  "$PY" -m pip install -q --no-deps --no-index --target "$WORK/$b" "$wheel" "${deps[@]}" >> "$LOG" 2>&1 \
    || { echo "pip install of $wheel failed (see $LOG)"; exit 2; }
done

# 1. Correctness of both builds' reductions against NumPy (compiles their kernels into the shared cache). One
#    after the other: the after build's workspace check takes almost all of the GPU's memory for a moment.
for b in before after; do
  PYTHONPATH="$WORK/$b" timeout 150 "$PY" "$HERE/chainer_reduction_check.py" --label "$b" \
    --json "$WORK/check-$b.json" >> "$WORK/check-$b.log" 2>&1
done
cat "$WORK/check-before.log" "$WORK/check-after.log" >> "$LOG"

# 2. The bench: one worker process per build, alive side by side, asked in alternating rounds (torch timed in
#    both as the control), then launch/call counts and the start-ups, alternating too.
PYTHONPATH= timeout 300 "$PY" "$HERE/chainer_speed.py" --interleave before="$WORK/before" after="$WORK/after" \
  --rounds "${ROUNDS:-5}" --min-batch-ms 20 --budget-s "${BUDGET_S:-150}" --json "$WORK/bench.json" >> "$LOG" 2>&1 \
  || echo "bench: exit $?" >> "$LOG"

reports=()
for f in "$WORK"/bench.json "$WORK"/check-before.json "$WORK"/check-after.json; do
  [ -f "$f" ] && reports+=("$f")
done
if [ ${#reports[@]} -gt 0 ]; then
  "$PY" "$HERE/chainer_speed.py" --table "${reports[@]}" > "$OUT/chainer_speed.md" 2>> "$LOG"
else
  echo "no reports: every check and bench failed (see chainer_speed.log)" > "$OUT/chainer_speed.md"
fi
"$PY" - "${reports[@]}" > "$OUT/chainer_speed.json" << 'EOF'
import json, os, sys
print(json.dumps({os.path.basename(p)[:-5]: json.load(open(p)) for p in sys.argv[1:]}, indent=1))
EOF
cat "$OUT/chainer_speed.md"
rm -rf "$WORK"
