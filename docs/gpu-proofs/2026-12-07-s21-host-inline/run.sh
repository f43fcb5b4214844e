# Session 21's GPU call: chainer-host-inline (the whole recipe) against the recipe one step earlier (its wheel is
# session 20's "after"), on the device. Run from the repository root with .carry/s21/{before,after,deps} carried.
set -u; R=/tmp/r21; mkdir -p $R; export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nproc; uptime; lscpu | grep "Model name"; git log --oneline -1; } > $R/machine.txt 2>&1
W=/tmp/s21; mkdir -p $W; export CUPY_CACHE_DIR=$W/kc
for b in before after; do python3 -m pip install -q --no-deps --no-index --target $W/$b .carry/s21/$b/*.whl .carry/s21/deps/*.whl > /dev/null 2>&1; done
sha256sum .carry/s21/*/*.whl > $R/wheels.txt
for b in before after; do PYTHONPATH=$W/$b timeout 60 python3 bench/gpu/chainer_b1_calls.py > $R/calls_$b.txt 2>&1; echo "calls $b rc $?"; grep "==" $R/calls_$b.txt; done
PYTHONPATH=$W/after timeout 120 python3 bench/gpu/chainer_pool_check.py --skip-timing --json $R/pool.json > $R/pool.out 2>&1; echo "pool rc $?"; tail -1 $R/pool.out
timeout 200 python3 bench/gpu/chainer_proof.py --wheel .carry/s21/after/chainer-1.24.0-cp312-cp312-linux_x86_64.whl --extra-wheels .carry/s21/deps --out $R/proof > $R/proof.out 2>&1; echo "proof rc $?"; tail -3 $R/proof.out
CARRY=.carry/s21 OUT=$R/speed ROUNDS=${ROUNDS:-9} BUDGET_S=200 timeout 330 bash bench/gpu/chainer_speed.sh > $R/speed.out 2>&1; echo "speed rc $?"
grep -n "within\|below 50\|start-up\|inspection_infer_b1 \|inspection_infer_b32 \|vgg_infer_b1 \|reduction check" $R/speed.out | cut -c1-260
tar -C $R -czf $OUT/s21call.tgz .
