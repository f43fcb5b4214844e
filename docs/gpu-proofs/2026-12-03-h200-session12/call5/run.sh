set -u
export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; mkdir -p $OUT
W=/tmp/g3; mkdir -p $W
python3 -m pip install -q --no-deps --no-index --target $W/after .carry/s12/after/*.whl .carry/s12/deps/*.whl > /dev/null 2>&1
python3 -m pip install -q --no-deps --no-index --target $W/spy .carry/s12/pyspy/*.whl > /dev/null 2>&1
SPY=$(ls $W/spy/bin/py-spy 2>/dev/null || find $W/spy -name py-spy -type f | head -1)
export CUPY_CACHE_DIR=$W/kc
PYTHONPATH=$W/after timeout 200 python3 bench/gpu/chainer_native_profile.py --py-spy "$SPY" --cases inspection_infer_b1 max_pool_b1 --seconds 5 --out $OUT/native --top 45 > $OUT/native.txt 2>&1; echo "rc $?"
cd $OUT && tar czf native.tgz native && rm -rf native
head -120 $OUT/native.txt
