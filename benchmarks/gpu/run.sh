#!/usr/bin/env bash
# Everything the GPU machine is for, in one call (device time is short): the environment, the
# GPU tests, the whole suite on arch=cuda and the GPU benchmarks. Logs go under $OUT (the
# device tool brings that folder back); a short table is printed last.
#   usage, from the repository root:  bash benchmarks/gpu/run.sh [pytest -k expression]
set -u
OUT=${OUT:-/tmp/jitrt-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 JITRT_CACHE_DIR=/tmp/jitrt-cache
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import sys, llvmlite, numpy; from cuda.bindings import driver; \
print(sys.version.split()[0], 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__)"
  $PY -c "from jitrt.backends import nvptx; print('libdevice', nvptx.libdevice_path()); \
print('ptxas', nvptx.ptxas_path())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
K=${1:-}
timeout 240 $PY -m pytest -q -p no:cacheprovider -x tests/test_gpu.py ${K:+-k "$K"} \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.log")"
# the whole suite on arch=cuda, the tests marked slow too (-m ''), spread over the host's cores
# with pytest-xdist where the machine has it (one CUDA context per worker; a file's tests stay
# on one worker)
XDIST=$($PY -c "import xdist" 2>/dev/null && echo "-n ${JITRT_GPU_WORKERS:-8} --dist loadfile")
JITRT_TEST_ARCHS=cuda JITRT_TEST_PTX=0 JITRT_TEST_AMDGPU=0 timeout 540 $PY -m pytest -q -p no:cacheprovider -rf -m '' $XDIST tests \
  > "$OUT/suite_cuda.log" 2>&1
echo "suite (arch=cuda): $(tail -1 "$OUT/suite_cuda.log")"
grep -E "^FAILED|^ERROR" "$OUT/suite_cuda.log" | cut -c1-200 | head -40
if [ -f benchmarks/gpu/bench.py ]; then
  timeout 240 $PY benchmarks/gpu/bench.py > "$OUT/bench.txt" 2>&1
  cat "$OUT/bench.txt"
fi
if [ -n "${JITRT_NCU:-}" ] && command -v ncu > /dev/null; then
  timeout 200 ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
    --launch-skip 2 --launch-count 4 $PY benchmarks/gpu/profile_adstack.py \
    > "$OUT/ncu_adstack.txt" 2>&1
  grep -E "jk_|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|Compute \(SM\)|Block Limit Registers" "$OUT/ncu_adstack.txt" | head -60
fi
