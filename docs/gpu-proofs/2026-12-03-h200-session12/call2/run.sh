set -u
mkdir -p $OUT; date -u > $OUT/when.txt
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH
W=/tmp/g1; mkdir -p $W
python3 -m pip install -q --no-deps --no-index --target $W/after .carry/s12/after/*.whl .carry/s12/deps/*.whl > $OUT/pip.log 2>&1
export CUPY_CACHE_DIR=$W/kc
PYTHONPATH=$W/after timeout 240 python3 bench/gpu/chainer_graph_conv_check.py --rounds 7 --json $OUT/graph_check.json > $OUT/graph_check.log 2>&1; echo "check rc $?" >> $OUT/graph_check.log
tail -25 $OUT/graph_check.log
CARRY=.carry/s12 ROUNDS=5 BUDGET_S=150 timeout 330 bash bench/gpu/chainer_speed.sh > /dev/null 2>&1; echo "speed rc $?"
grep -n "inspection_infer\|vgg_infer\|seed_conv" $OUT/chainer_speed.md | head -20
