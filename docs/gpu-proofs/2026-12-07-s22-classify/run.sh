# issue 12's classifier bench on the device machine's CPU cores (no GPU work): this checkout against an export of
# 14d1aab (.carry/s22/base), lgpatch's dependencies from carried cp312 wheels (.carry/s22/wheels)
set -u; mkdir -p $OUT; { date -u; nproc; uptime; lscpu | grep "Model name"; python3 --version; grep --version | head -1; } | tee $OUT/machine.txt
python3 -m pip install -q --no-deps --no-index --target /tmp/lgdeps .carry/s22/wheels/*.whl > /dev/null 2>&1; echo "deps rc $?"
export PYTHONPATH=/tmp/lgdeps
timeout 520 python3 bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 3 --against .carry/s22/base > $OUT/classify_bench.txt 2>&1; echo "bench rc $?"
uptime
tail -40 $OUT/classify_bench.txt
