set -u
mkdir -p $OUT; W=/tmp/s13; mkdir -p $W; date -u > $W/when.txt
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; export PYTHONUNBUFFERED=1

{ nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; lscpu | grep -i 'model name'; nproc; uptime; } > $W/machine.txt 2>&1; cat $W/machine.txt
for b in base after; do python3 -m pip install -q --no-deps --no-index --target $W/$b .carry/s13/$b/*.whl .carry/s13/deps/*.whl > /dev/null 2>&1; done
export CUPY_CACHE_DIR=$W/kc
B=bench/gpu
PYTHONPATH=$W/base timeout 100 python3 $B/chainer_b1_budget.py --json $OUT/budget_base.json > $W/budget_base.log 2>&1; echo "budget base rc $?"
timeout 60 python3 $B/chainer_b1_budget.py --torch --json $OUT/budget_torch.json > $W/budget_torch.log 2>&1; echo "budget torch rc $?"
PYTHONPATH=$W/after timeout 100 python3 $B/chainer_b1_budget.py --json $OUT/budget_after.json > $W/budget_after.log 2>&1; echo "budget after rc $?"
PYTHONPATH=$W/after timeout 60 python3 $B/chainer_linear_check.py --json $OUT/linear_check.json > $W/linear_check.log 2>&1; echo "linear check rc $?"; tail -3 $W/linear_check.log
PYTHONPATH=$W/after timeout 150 python3 $B/chainer_graph_conv_check.py --rounds 5 --json $OUT/graph_check.json > $W/graph_check.log 2>&1; echo "graph check rc $?"; tail -4 $W/graph_check.log
tar czf $OUT/logs_a.tgz -C $W when.txt machine.txt budget_base.log budget_torch.log budget_after.log linear_check.log graph_check.log
