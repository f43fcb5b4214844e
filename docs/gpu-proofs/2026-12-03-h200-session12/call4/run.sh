set -u
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; mkdir -p $OUT
W=/tmp/g2; mkdir -p $W
for b in before after; do python3 -m pip install -q --no-deps --no-index --target $W/$b .carry/s12/$b/*.whl .carry/s12/deps/*.whl > /dev/null 2>&1; done
export CUPY_CACHE_DIR=$W/kc
PYTHONPATH=$W/after timeout 100 python3 .carry/s12/diag.py free 2>&1 | tee $OUT/diag_free.log | tail -5
cd bench/gpu && PYTHONPATH= timeout 300 python3 chainer_speed.py --interleave before=$W/before after=$W/after --rounds 7 --min-batch-ms 20 --only infer_b1 --budget-s 200 --json $OUT/b1.json > $OUT/b1.log 2>&1; echo "rc $?"
python3 chainer_speed.py --table $OUT/b1.json > $OUT/b1.md 2>&1; grep -n "infer_b1" $OUT/b1.md | head -12
