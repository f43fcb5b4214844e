set -u; mkdir -p $OUT; export PATH=/usr/local/cuda/bin:$PATH; unset LD_LIBRARY_PATH; export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uptime; lscpu | grep "Model name"; } | tee $OUT/machine.txt
W=/tmp/s14; mkdir -p $W; export CUPY_CACHE_DIR=$W/kc
for b in base:before s13after:s13after lean:after; do n=${b%%:*}; d=${b##*:}; src=.carry/s14full/$d; [ $d = s13after ] && src=.carry/s14ab/s13after
  [ -d $W/$n/chainer ] || python3 -m pip install -q --no-deps --no-index --target $W/$n $src/*.whl .carry/s14full/deps/*.whl > /dev/null 2>&1; done
PYTHONPATH=$W/lean timeout 60 python3 bench/gpu/chainer_b1_calls.py > $OUT/calls_lean.txt 2>&1; echo "calls lean rc $?"; grep "==" $OUT/calls_lean.txt
PYTHONPATH=$W/s13after timeout 60 python3 bench/gpu/chainer_b1_calls.py > $OUT/calls_s13after.txt 2>&1; echo "calls s13after rc $?"; grep "==" $OUT/calls_s13after.txt
for pass in 1 2; do for b in base s13after lean; do
  echo "=== pass $pass build $b" | tee -a $OUT/host_$b.txt; PYTHONPATH=$W/$b timeout 100 python3 bench/gpu/chainer_b1_host.py --json $OUT/host_${b}_$pass.json 2>&1 | tee -a $OUT/host_$b.txt | grep -E "^(batch checks on |batch checks off|torch batch)"
done; done
