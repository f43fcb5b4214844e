set -u; mkdir -p $OUT; export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; export PYTHONUNBUFFERED=1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uptime
W=/tmp/s14; mkdir -p $W; export CUPY_CACHE_DIR=$W/kc
python3 -m pip install -q --no-deps --no-index --target $W/lean .carry/s14full/after/*.whl .carry/s14full/deps/*.whl > /dev/null 2>&1
PYTHONPATH=$W/lean timeout 60 python3 .carry/s14/b1_calls.py > $OUT/calls_lean.txt 2>&1; echo "calls rc $?"; grep "==" $OUT/calls_lean.txt
timeout 200 python3 bench/gpu/chainer_proof.py --wheel .carry/s14full/after/chainer-1.24.0-cp312-cp312-linux_x86_64.whl --extra-wheels .carry/s14full/deps --out $OUT/proof > $W/proof.out 2>&1; echo "proof rc $?"; tail -4 $W/proof.out
CARRY=.carry/s14full OUT=$OUT/speed ROUNDS=7 BUDGET_S=200 timeout 330 bash bench/gpu/chainer_speed.sh > $W/speed.out 2>&1; echo "speed rc $?"; tail -3 $W/speed.out
grep -n "within\|below 50\|start-up\|inspection_infer_b1 \|inspection_infer_b1_no\|inspection_infer_b32 " $OUT/speed/chainer_speed.md | cut -c1-300
cp $W/proof.out $W/speed.out $OUT/
