set -u; R=/tmp/s16out; mkdir -p $R $OUT; export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; nproc; uptime; lscpu | grep "Model name"; python3 --version; grep --version | head -1; git log --oneline -1; git status --short | head -30; } > $R/machine.txt 2>&1
W=/tmp/s16; mkdir -p $W; export CUPY_CACHE_DIR=$W/kc
python3 -m pip install -q --no-deps --no-index --target $W/after .carry/s16/after/*.whl .carry/s16/deps/*.whl > /dev/null 2>&1
python3 -m pip install -q --no-deps --no-index --target /tmp/lgdeps .carry/s16/clsdeps/*.whl > /dev/null 2>&1; echo "deps rc $?"
(export PYTHONPATH=/tmp/lgdeps; for r in 1 2; do timeout 150 python3 bench/classify_bench.py --size-mb 50 --big-mb 0 --repeat 7 --against .carry/s16/base > $R/classify_bench_$r.txt 2>&1; echo "bench $r rc $?"; done)
PYTHONPATH=$W/after timeout 120 python3 bench/gpu/chainer_b1_host.py --rounds 7 --json $R/b1_host.json > $R/b1_host.txt 2>&1; echo "b1_host rc $?"
PYTHONPATH=$W/after timeout 90 python3 bench/gpu/chainer_host_profile.py --iters 300 --top 40 > $R/host_profile.txt 2>&1; echo "profile rc $?"
grep -E "process/grep|dense / quiet|this/against|^  lgpatch classify" $R/classify_bench_*.txt | cut -c1-200
grep -E "^(batch|host|latency|torch)" $R/b1_host.txt | head -20
head -12 $R/host_profile.txt
tar -C $R -czf $OUT/s16call2.tgz .
