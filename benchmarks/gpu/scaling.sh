#!/usr/bin/env bash
# Data-parallel scaling on the GPUs of one host, in one call (docs/scaling.md): the
# mass-spring training step of benchmarks/scaling/ddp_mass_spring.py as a plain process on
# GPU 0, then under `torchrun --standalone --nproc_per_node=N` (NCCL) for each size, which
# checks the averaged gradient against one process over all environments and times 1 GPU
# (E and N*E environments) against N GPUs (E each). Logs, every run's figures (results.json)
# and the table go under $OUT (7 files with the three default sizes); the table is printed last.
#   usage, from the repository root:  bash benchmarks/gpu/scaling.sh
#   environment: SCALING_ENVS (environments per GPU, default "4096 16384 32768"), SCALING_STEPS
#   (time steps of a rollout, 128), SCALING_ITERS (timed steps, 5), NPROC (GPUs, default all),
#   SCALING_ARCH (cuda; `SCALING_ARCH=cpu NPROC=2` is a smoke run of this script on the CPU,
#   gloo instead of NCCL)
set -u
OUT=${OUT:-/tmp/jitrt-scaling-out}
mkdir -p "$OUT"
# NVLink multicast stays off (the machine's defaults, kept here for programs with their own
# environment)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export JITRT_CACHE_DIR=${JITRT_CACHE_DIR:-/tmp/jitrt-scaling-cache}   # one cache, every process
PY=${PYTHON:-python3}
SCRIPT=benchmarks/scaling/ddp_mass_spring.py
STEPS=${SCALING_STEPS:-128}
ITERS=${SCALING_ITERS:-5}
ENVS=${SCALING_ENVS:-4096 16384 32768}
ARCH=${SCALING_ARCH:-cuda}
NPROC=${NPROC:-$($PY -c "import torch; print(torch.cuda.device_count())")}
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  $PY -c "import sys, torch, llvmlite; print(sys.version.split()[0], 'torch', torch.__version__, \
'cuda', torch.version.cuda, 'llvmlite', llvmlite.__version__)"
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
FIRST=${ENVS%% *}
# a plain process (no torch.distributed) on GPU 0; it also fills the offline cache, so that
# the torchrun processes below load their kernels instead of compiling them
timeout 240 $PY $SCRIPT --arch $ARCH --envs "$FIRST" --steps "$STEPS" --iters "$ITERS" \
  > "$OUT/plain.log" 2>&1
echo "plain run, 1 device, $FIRST environments: $(tail -1 "$OUT/plain.log")"
RESULTS=()
for E in $ENVS; do
  rm -rf "/tmp/jitrt-ddp-$E"
  timeout 240 $PY -m torch.distributed.run --standalone --nproc_per_node="$NPROC" $SCRIPT \
    --arch $ARCH --envs "$E" --steps "$STEPS" --iters "$ITERS" --save "/tmp/jitrt-ddp-$E" \
    > "$OUT/ddp_$E.log" 2>&1
  echo "torchrun, $NPROC devices, $E environments each: rc $?, $(tail -1 "$OUT/ddp_$E.log")"
  [ -f "/tmp/jitrt-ddp-$E/result.json" ] && RESULTS+=("/tmp/jitrt-ddp-$E/result.json")
done
$PY benchmarks/scaling/summarize.py --write "$OUT/results.json" "${RESULTS[@]}" \
  | tee "$OUT/summary.txt"
