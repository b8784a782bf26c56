#!/usr/bin/env bash
# The GPU acceptance matrix of one scene on a warm GPU machine (after `gpu.sh setup`):
# Genesis's default (ndarray) mode at n_envs 1, 1024 and 8192 on jitrt and Quadrants 1.3.3.
# Six short runs in parallel fill both runtimes' caches, then the timed runs go one at a time
# (PROFILE=20: device time a step under torch's profiler), then compare_runs.py prints one
# table with the ratios to Quadrants and the final-state differences. About 250-280 s a scene
# on an H200.
#   usage, from the repository root:  bash tools/genesis/matrix.sh box|franka
set -u
S=${1:-box}
OUT=${OUT:-/tmp/genesis-out}
export LINES_SHOWN=0
for n in 1 1024 8192; do for m in jitrt quadrants; do
  JITRT_CACHE_DIR=/tmp/jc-default OUT=/tmp/genesis-warm timeout 300 \
    bash tools/genesis/gpu.sh run $m "$S" $n 2 0 > /dev/null 2>&1 &
done; done; wait; echo warmed
for n in 1 1024 8192; do for m in jitrt quadrants; do
  JITRT_CACHE_DIR=/tmp/jc-default OUT=$OUT/default PROFILE=20 timeout 100 \
    bash tools/genesis/gpu.sh run $m "$S" $n 100 50
done; done
python3 tools/genesis/compare_runs.py "$OUT/default"
