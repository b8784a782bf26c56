#!/usr/bin/env bash
# Genesis scenes on the lent GPU machine, which has no network (see tools/genesis/README.md).
#
# Genesis's dependencies for Python 3.12 that the machine lacks travel as ignored folders in
# two device calls (each carries at most 64 MiB): .gdev/p1 and .gdev/p2 hold the parts of
# gsite.tar.xz (the wheels unpacked, Genesis's assets cut to the ones these scenes open) and
# p2 also holds quadrants' wheel for the reference runs. Later calls carry nothing: ignored
# folders stay on a warm machine.
#
#   bash tools/genesis/gpu.sh setup                       # unpack (once per warm machine)
#   bash tools/genesis/gpu.sh run jitrt|quadrants SCENE N_ENVS STEPS TIMED_STEPS
#   bash tools/genesis/gpu.sh table                       # every run so far: RESULT lines, and
#       with PROFILE the device time a step and its three largest kernels
#   PROFILE=K bash tools/genesis/gpu.sh run ...           # then K steps under torch's profiler:
#       each kernel's (memset's, copy's) device time a step, the PROFILE lines
#   NCU=REGEX bash tools/genesis/gpu.sh run ...     # one kernel matching REGEX under Nsight
#       Compute (after NCU_SKIP=20 matching launches): its report beside the log (.ncu-rep),
#       as text (.ncu.txt) and per SASS instruction with its stall samples (.sass.csv)
#   TREE=.gdev/tree-X bash tools/genesis/gpu.sh run jitrt ...   # jitrt from another tree (its log
#       is jitrt-X-...): two commits side by side in one call, on one machine. Stage it here with
#       `git worktree add .gdev/tree-X REV` (ignored; carry it: about 5 MB)
#
# Each run's whole output goes to $OUT/<mode>-<scene>-<n_envs>.log; the script prints the
# STAGE/RESULT/FAILED lines. `import quadrants` is jitrt in the jitrt runs (the alias package
# of run.py) and quadrants 1.3.3 in the reference runs.
set -u
cd "$(dirname "$0")/../.."
G=.gdev
OUT=${OUT:-/tmp/genesis-out}
mkdir -p "$OUT"
case "${1:-}" in
setup)
    if [ ! -f $G/site/.unpacked ]; then
        mkdir -p $G/site
        cat $G/p1/gsite.tar.xz.* $G/p2/gsite.tar.xz.* | xz -d | tar x -C $G/site && touch $G/site/.unpacked
        for w in $G/p2/*.whl; do   # small wheels added after the archive was made
            case "$w" in *quadrants-*) ;; *) python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" $G/site ;; esac
        done
    fi
    if [ ! -d $G/ref/quadrants ]; then
        mkdir -p $G/ref
        python3 -c "import glob, zipfile; zipfile.ZipFile(glob.glob('$G/p2/quadrants-*.whl')[0]).extractall('$G/ref')"
    fi
    mkdir -p $G/alias/quadrants
    python3 -c "import sys; sys.path.insert(0, 'tools/genesis'); import run; open('$G/alias/quadrants/__init__.py', 'w').write(run.ALIAS)"
    du -sh $G/site $G/ref
    ;;
run)
    mode=$2 scene=$3 nenvs=$4 steps=$5 timed=$6
    tree=${TREE:-}
    if [ "$mode" = jitrt ]; then pp="${tree:+$PWD/$tree:}$PWD:$PWD/$G/alias:$PWD/$G/site"; else pp="$PWD/$G/ref:$PWD/$G/site"; fi
    log="$OUT/$mode${tree:+-$(basename "$tree")}-$scene-$nenvs.log"
    start=$(date +%s.%N)
    # Genesis's offscreen rasterizer opens an EGL context: glvnd's libEGL (p3) finds the
    # NVIDIA driver's EGL library through its vendor file, which this image keeps outside
    # glvnd's default folders
    vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    [ -f $vendor ] && export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-$vendor}
    # NCU=REGEX: the first kernel whose name matches REGEX after NCU_SKIP (default 20)
    # matching launches, under Nsight Compute
    ncu=()
    [ -n "${NCU:-}" ] && ncu=(ncu --kernel-name "regex:$NCU" --launch-skip "${NCU_SKIP:-20}" --launch-count 1
        --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats
        --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters
        --import-source no -f -o "${log%.log}")
    LD_LIBRARY_PATH="$PWD/$G/p3/lib:${LD_LIBRARY_PATH:-}" PYTHONPATH="$pp" ${ncu[@]+"${ncu[@]}"} python3 tools/genesis/scene.py --backend gpu --scene "$scene" \
        --n-envs "$nenvs" --steps "$steps" --timed-steps "$timed" ${PROFILE:+--profile-steps "$PROFILE"} ${GENESIS_ARGS:-} > "$log" 2>&1
    rc=$?
    if [ -n "${NCU:-}" ] && [ -f "${log%.log}.ncu-rep" ]; then    # the report as text: every
        # section's details, and each SASS instruction with its samples of stalled warps
        ncu -i "${log%.log}.ncu-rep" --page details --print-details all > "${log%.log}.ncu.txt" 2>&1
        ncu -i "${log%.log}.ncu-rep" --page source --print-source sass --csv > "${log%.log}.sass.csv" 2>&1
    fi
    echo "== $mode $scene n_envs=$nenvs rc=$rc wall=$(python3 -c "import time; print(round(time.time() - $start, 1))") s"
    grep -E "^(STAGE|RESULT|FAILED|INFO|PROFILE)" "$log" | grep -v "RESULT state" | head -${LINES_SHOWN:-60}
    if [ $rc -ne 0 ]; then tail -25 "$log"; fi
    ;;
table)
    # per run: the build, synced and median step times, and with PROFILE the device time a
    # step (the sum of its kernels, memsets and copies) and its three largest kernels
    for f in "$OUT"/*.log; do
        echo "$(basename "$f" .log): $(grep -E '^STAGE build|synced_ms|median_step' "$f" | tr '\n' ' ')"
        grep -E '^PROFILE' "$f" | sed -n '1p;2,4s/^PROFILE */    /p' | sed 's/^PROFILE total/    device:/' | cut -c1-140
    done
    ;;
*)
    echo "usage: $0 setup | run MODE SCENE N_ENVS STEPS TIMED | table" >&2; exit 2 ;;
esac
