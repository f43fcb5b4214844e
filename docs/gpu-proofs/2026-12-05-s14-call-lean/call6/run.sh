set -u; mkdir -p $OUT; { date -u; nproc; uptime; lscpu | grep "Model name"; python3 --version; grep --version | head -1; } | tee $OUT/machine.txt
python3 -m pip install -q --no-deps --no-index --target /tmp/lgdeps .carry/s14cls/wheels/*.whl > /dev/null 2>&1; echo "deps rc $?"
export PYTHONPATH=/tmp/lgdeps
timeout 300 python3 bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 5 --against .carry/s14cls/base > $OUT/classify_bench.txt 2>&1; echo "bench rc $?"
tail -25 $OUT/classify_bench.txt
