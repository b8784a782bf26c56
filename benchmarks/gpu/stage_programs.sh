#!/usr/bin/env bash
# Fill .tiwheel/ (git-ignored) with what benchmarks/gpu/programs.sh needs on a machine
# without network: Taichi 1.7.4's wheel for the GPU machine's Python and its pure-Python
# dependencies, and the DiffTaichi programs programs.py runs (both sets) from a git directory of
# taichi-dev/difftaichi.
#   usage: bash benchmarks/gpu/stage_programs.sh DIFFTAICHI_GIT_DIR [PYTHON_VERSION (3.12)]
set -eu
SRC=${1:?a git directory of taichi-dev/difftaichi}
PYV=${2:-3.12}
mkdir -p .tiwheel/difftaichi
python3 -m pip download -q --no-deps --python-version "$PYV" --only-binary :all: \
  --platform manylinux_2_27_x86_64 -d .tiwheel taichi==1.7.4
python3 -m pip download -q --no-deps --python-version "$PYV" --only-binary :all: \
  -d .tiwheel colorama dill rich markdown-it-py mdurl pygments
for f in billiards smoke_taichi wave diffmpm diffmpm_simple diffmpm_checkpointing diffmpm3d \
    mass_spring mass_spring_robot_config mass_spring_simple rigid_body robot_config electric \
    volume_renderer; do
  git -C "$SRC" show 9f4ee52:examples/$f.py > .tiwheel/difftaichi/$f.py
done
ls .tiwheel .tiwheel/difftaichi
