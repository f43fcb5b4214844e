set -u
mkdir -p $OUT; date -u > $OUT/when.txt
python3 -m pip install -q --no-deps --no-index --target /tmp/lgdeps .carry/s12/lgdeps/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/lgdeps
{ nproc; uptime; grep --version | head -1; python3 --version; } > $OUT/machine.txt 2>&1
timeout 250 python3 bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 3 --against "$PWD/.carry/s12/export-5e7" > $OUT/classify_bench.txt 2>&1; echo "rc $?" >> $OUT/classify_bench.txt
cat $OUT/machine.txt $OUT/classify_bench.txt
