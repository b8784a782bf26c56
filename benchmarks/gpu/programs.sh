#!/usr/bin/env bash
# Published programs on the GPU machine, end to end: the DiffTaichi programs billiards, smoke
# and wave and the diffsim workloads (MPM 2-D with gradient, mass-spring) on jitrt CUDA,
# jitrt CPU and Taichi 1.7.4 CUDA, in fresh processes with cold compile caches; first losses
# checked; logs under $OUT; one table printed last (benchmarks/gpu/programs.py says what is
# run and how). About 6-8 minutes on an H200 (iterations capped, a time budget per process
# and for the whole).
#   usage, from the repository root:  bash benchmarks/gpu/programs.sh
# (JITRT_TAPE_GRAPH=1 in the environment: the jitrt runs replay repeated reverse passes as
# CUDA graphs, jr.init(tape_graph=True); docs/gpu.md, "Graphs")
# Needs .tiwheel/ (git-ignored; `bash benchmarks/gpu/stage_programs.sh` fills it): Taichi's
# wheel and its pure-Python dependencies (colorama, dill, rich, markdown-it-py, mdurl,
# pygments; numpy comes from the machine), and the DiffTaichi programs in difftaichi/
# (taichi-dev/difftaichi at 9f4ee52, examples/, unchanged). No network is needed.
set -u
OUT=${OUT:-/tmp/jitrt-programs-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
TI=${TAICHI_DIR:-/tmp/taichi-1.7.4}
WHEELS=${WHEELS:-.tiwheel}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import sys; print('Python', sys.version.split()[0])"
  git rev-parse --short HEAD 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ ! -d "$TI/taichi" ]; then
  # pip when the machine's Python has it, else the wheels unpacked (a wheel is a zip file)
  $PY -m pip install -q --no-deps --no-index --target "$TI" "$WHEELS"/*.whl \
    > "$OUT/taichi_install.log" 2>&1 || for w in "$WHEELS"/*.whl; do
      $PY -m zipfile -e "$w" "$TI" >> "$OUT/taichi_install.log" 2>&1
    done
fi
PYTHONPATH=$TI $PY -c "import taichi" > "$OUT/taichi_import.log" 2>&1 \
  && echo "Taichi: $(head -1 "$OUT/taichi_import.log")" \
  || { echo "Taichi does not import:"; tail -3 "$OUT/taichi_import.log"; }
# PROGRAM_SET=held-out: the collection's other programs (programs.py, HELD_OUT), about 8 min
SET=${PROGRAM_SET:-tuned}
BUDGET=$([ "$SET" = tuned ] && echo 330 || echo 440)
timeout 560 $PY benchmarks/gpu/programs.py table --programs "$(cd "$WHEELS" && pwd)/difftaichi" \
  --taichi-path "$TI" --out "$OUT" --set "$SET" --budget "$BUDGET" --limit 120 2>&1 | tee "$OUT/programs.txt"
