set -u; mkdir -p $OUT; export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; uptime; lscpu | grep "Model name"; } | tee $OUT/machine.txt
W=/tmp/s16; mkdir -p $W; export CUPY_CACHE_DIR=$W/kc
for b in before after; do python3 -m pip install -q --no-deps --no-index --target $W/$b .carry/s16/$b/*.whl .carry/s16/deps/*.whl > /dev/null 2>&1; done
sha256sum .carry/s16/*/*.whl | tee $OUT/wheels.txt
PYTHONPATH=$W/after timeout 60 python3 bench/gpu/chainer_b1_calls.py > $OUT/calls_after.txt 2>&1; echo "calls after rc $?"; grep "==" $OUT/calls_after.txt
PYTHONPATH=$W/before timeout 60 python3 bench/gpu/chainer_b1_calls.py > $OUT/calls_before.txt 2>&1; echo "calls before rc $?"; grep "==" $OUT/calls_before.txt
timeout 200 python3 bench/gpu/chainer_proof.py --wheel .carry/s16/after/chainer-1.24.0-cp312-cp312-linux_x86_64.whl --extra-wheels .carry/s16/deps --out $OUT/proof > $OUT/proof.out 2>&1; echo "proof rc $?"; tail -4 $OUT/proof.out
CARRY=.carry/s16 OUT=$OUT/speed ROUNDS=7 BUDGET_S=200 timeout 330 bash bench/gpu/chainer_speed.sh > $OUT/speed.out 2>&1; echo "speed rc $?"; tail -3 $OUT/speed.out
grep -n "within\|below 50\|start-up\|inspection_infer_b1 \|inspection_infer_b32 " $OUT/speed/chainer_speed.md | cut -c1-300
