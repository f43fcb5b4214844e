set -u
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; mkdir -p $OUT; date -u > $OUT/when.txt
W=/tmp/g4; mkdir -p $W
python3 -m pip install -q --no-deps --no-index --target $W/after .carry/s12/after/*.whl .carry/s12/deps/*.whl > /dev/null 2>&1
export CUPY_CACHE_DIR=$W/kc
PYTHONPATH=$W/after timeout 200 python3 bench/gpu/chainer_reduction_check.py --label after --json $OUT/check.json > $OUT/check.log 2>&1; echo "check rc $?"
tail -4 $OUT/check.log
PYTHONPATH=$W/after timeout 250 python3 bench/gpu/chainer_graph_conv_check.py --rounds 7 --json $OUT/graph_check.json > $OUT/graph_check.log 2>&1; echo "graph check rc $?"
grep -n "semantics\|workspace\|inspection\|conv3x3" $OUT/graph_check.log
