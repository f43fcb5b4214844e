#!/usr/bin/env bash
# Issue 16 on a GPU machine: `lgpatch hetero-bench` for both models at batch 1, 16 and 256, inference and a
# training step, on an otherwise idle machine (the CPU share needs every core: run nothing beside it).
#
#   OUT=DIR bash bench/gpu/hetero_proof.sh        # from the repository root; needs torch with CUDA (the image's)
#
# Writes into $OUT: hetero-<model>.json (every figure), hetero-<model>.txt (the table the command prints),
# hetero-<model>.log (progress). STEPS/WARMUP (default 8/2) and BUDGET_S per model (default 240) bound the run:
# about 3-5 minutes on an H200 machine (16 cores). DEVICE=cpu BATCHES="1 4" STEPS=1 is the CPU dry run (the same
# code path with both shares on the CPU: it proves the script, not a speed-up).
set -u
OUT=${OUT:-/tmp/hetero-proof}
PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
{ date -u +%FT%TZ; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$OUT/env.txt" 2>&1
for model in seed resnet18-like; do
  t=$(date +%s)
  batches=()
  for b in ${BATCHES:-1 16 256}; do batches+=(--batch "$b"); done
  timeout -k 10 "${BUDGET_S:-240}" "$PY" -m legacy_gpu_patch hetero-bench --device "${DEVICE:-cuda:0}" \
    --model "$model" "${batches[@]}" --steps "${STEPS:-8}" --warmup "${WARMUP:-2}" --json \
    > "$OUT/hetero-$model.json" 2> "$OUT/hetero-$model.log"
  rc=$?
  echo "hetero-bench $model: rc=$rc in $(( $(date +%s) - t )) s (124: stopped at ${BUDGET_S:-240} s)"
  [ $rc = 0 ] || { tail -3 "$OUT/hetero-$model.log"; continue; }
  "$PY" - "$OUT/hetero-$model.json" > "$OUT/hetero-$model.txt" << 'PYEOF'
import json, sys
from legacy_gpu_patch.commands.hetero_bench import format_results
print(format_results(json.load(open(sys.argv[1]))))
PYEOF
  cat "$OUT/hetero-$model.txt"
done
