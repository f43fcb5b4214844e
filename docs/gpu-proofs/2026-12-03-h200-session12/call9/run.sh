set -u
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; mkdir -p $OUT; date -u > $OUT/when.txt
W=/tmp/g7; mkdir -p $W
for b in before after; do python3 -m pip install -q --no-deps --no-index --target $W/$b .carry/s12/$b/*.whl .carry/s12/deps/*.whl > /dev/null 2>&1; done
export CUPY_CACHE_DIR=$W/kc
PYTHONPATH=$W/after timeout 100 python3 .carry/s12/pooldiag.py > $OUT/pooldiag.log 2>&1; echo "pooldiag rc $?"; cat $OUT/pooldiag.log
PYTHONPATH=$W/after timeout 200 python3 bench/gpu/chainer_pool_check.py --skip-timing --json $OUT/pool_check.json > $OUT/pool_check.log 2>&1; echo "pool check rc $?"; tail -3 $OUT/pool_check.log
cd bench/gpu && PYTHONPATH= timeout 240 python3 chainer_speed.py --interleave before=$W/before after=$W/after --rounds 7 --min-batch-ms 20 --only infer_b1 infer_b32 max_pool --budget-s 200 --json $OUT/b1.json > $OUT/b1.log 2>&1; echo "rc $?"
python3 chainer_speed.py --table $OUT/b1.json > $OUT/b1.md 2>&1; sed -n 1,12p $OUT/b1.md; grep -n "within\|below 50" $OUT/b1.md
