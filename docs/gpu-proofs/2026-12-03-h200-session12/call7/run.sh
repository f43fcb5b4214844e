set -u
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; mkdir -p $OUT; date -u > $OUT/when.txt
W=/tmp/g5; mkdir -p $W
for b in before after; do python3 -m pip install -q --no-deps --no-index --target $W/$b .carry/s12/$b/*.whl .carry/s12/deps/*.whl > /dev/null 2>&1; done
export CUPY_CACHE_DIR=$W/kc
PYTHONPATH=$W/after timeout 250 python3 bench/gpu/chainer_graph_conv_check.py --rounds 7 --json $OUT/graph_check.json > $OUT/graph_check.log 2>&1; echo "graph check rc $?"
grep -n "semantics\|BAD\|workspace\|inspection\|conv3x3" $OUT/graph_check.log
PYTHONPATH=$W/after timeout 150 python3 bench/gpu/chainer_reduction_check.py --label after --parts conv_workspace conv_algo_cache --json $OUT/check.json > $OUT/check.log 2>&1; echo "check rc $?"; tail -2 $OUT/check.log
cd bench/gpu && PYTHONPATH= timeout 240 python3 chainer_speed.py --interleave before=$W/before after=$W/after --rounds 7 --min-batch-ms 20 --only infer_b1 infer_b32 --budget-s 200 --json $OUT/b1.json > $OUT/b1.log 2>&1; echo "rc $?"
python3 chainer_speed.py --table $OUT/b1.json > $OUT/b1.md 2>&1; sed -n 1,8p $OUT/b1.md; grep -n "within" $OUT/b1.md
