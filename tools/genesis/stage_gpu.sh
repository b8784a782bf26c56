#!/usr/bin/env bash
# Stages what tools/genesis/gpu.sh needs on the lent GPU machine, which has no network (see
# tools/genesis/README.md, "On the GPU"). Run here, where PyPI and Debian's packages are
# reached; it writes the ignored folder .gdev:
#
#   .gdev/p1/gsite.tar.xz.aa ...   the first parts of gsite.tar.xz (split -b), at most 58 MB
#   .gdev/p2/gsite.tar.xz.ab ...   the rest, and quadrants' wheel for the reference runs
#   .gdev/p3/lib/                  the libGL/X11 libraries pygel3d and PyOpenGL load
#
#   bash tools/genesis/stage_gpu.sh           # downloads into .gdev/dl (kept: a rerun skips them)
#   then, in two device calls to one warm machine:
#     carry .gdev/p1, then carry .gdev/p2 and .gdev/p3 and run `bash tools/genesis/gpu.sh setup`
#
# gsite.tar.xz unpacks into .gdev/site: the wheels (CPython 3.12, manylinux x86_64) of
# genesis-world 1.4.5, installed without its dependencies, and of each runtime dependency
# (recursively, from the wheels' Requires-Dist, markers evaluated for Linux x86_64 and Python
# 3.12) that the GPU machine's image lacks (DEVICE below: its package list in the device
# tool's KINDS.md; numpy, torch, scipy, numba, ... are taken from there). Left out: the
# optional batch renderer gs-madrona, quadrants (its own wheel), and the dependencies Genesis
# imports only inside functions that these scenes never call (LEAVE_OUT: vtk, pymeshlab,
# moviepy, ... several hundred MB of wheels). Cut from what is kept: Genesis's assets but the
# two these scenes open (KEEP_ASSETS), C headers, static libraries, tests, and the *.data
# folders of the wheels (scripts, headers, a z3 binary). Versions are pinned (PINS) so that a
# rerun gives the same site; a dependency not pinned takes the newest version allowed.
set -eu -o pipefail
cd "$(dirname "$0")/../.."
G=.gdev
DL=$G/dl
WORK=$G/stage
PY=${PYTHON:-python3}
SPLIT=58000000                 # bytes of the archive in p1; p2 + p3 must stay under the same
GENESIS=genesis-world==1.4.5
QUADRANTS=quadrants==1.3.3
# quadrants' own requirements that the device image lacks (its others: numpy, colorama,
# pydantic, rich, setuptools are there or in the site); small wheels in p2 that gpu.sh setup
# unpacks into the site
QUADRANTS_DEPS="dill==0.4.0 cffi==2.0.0 pycparser==2.23"

# The device image's Python packages (KINDS.md, "Python packages already there", 2026-11-17)
# and the versions a session's pip list there showed. opencv-python-headless provides cv2 as
# opencv-python would.
DEVICE="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio
h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime
onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint
packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache
protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect
urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
opencv-python"
DEVICE_VERSIONS="numpy==2.5.2 torch==2.11.0 triton==3.6.0 jax==0.11.2 safetensors==0.8.0
huggingface-hub==1.33.0 onnx==1.23.1 transformers==5.17.0 tokenizers==0.23.2 torchvision==0.26.0"
# Carried although the image has it: pydantic 2.14 needs typing-extensions>=4.16.0, and the
# image's version is not known (one small module; newer versions only add names).
FORCE="typing-extensions"
SKIP="gs-madrona quadrants"
# Imported by Genesis only inside functions these scenes do not reach (checked by running
# them on the CPU with every dependency installed: none of these modules was loaded), or
# pulled in only by one of those. mujoco-studio (mujoco's viewer app) and plotly (pygel3d's
# notebook display) are not imported by `import mujoco` / `from pygel3d import hmesh`.
LEAVE_OUT="vtk pymeshlab moviepy pysplashsurf opencv-python mujoco-studio plotly"
KEEP_ASSETS="textures/checker.png xml/franka_emika_panda"
PINS="genesis-world==1.4.5 annotated-types==0.8.0 av==19.0.2 coacd==1.0.14 dataclasses-json==0.6.7
deprecated==3.0.1 dracopy==2.2.0 fast-simplification==0.2.0 freetype-py==2.5.1 frozendict==2.5.1
glfw==2.11.0 libigl==2.6.3 marshmallow==3.26.2 mujoco==4.0.0 mujoco-core==4.0.0 openexr==3.5.3
pycollada==0.9.3 pydantic==2.14.4 pydantic-core==2.50.5 pygel3d==0.8.2 pyglet==2.1.19
pygltflib==1.16.0 pyopengl==3.1.10 rtree==1.4.1 tetgen==0.8.2 trimesh==5.2.0
typing-extensions==4.16.0 typing-inspection==0.4.5 xacro==2.1.1 z3-solver==4.15.4.0
zstandard==0.25.0"
# Debian packages whose libraries pygel3d (libGL.so.1, libX11.so.6) and PyOpenGL, glfw and
# pyglet load at import, with what those need that a bare Ubuntu image lacks.
# libegl1 (glvnd's libEGL.so.1): Genesis's offscreen rasterizer, built with every scene,
# opens an EGL context through it (gpu.sh points it at the NVIDIA driver's EGL vendor file).
DEBS="libegl1 libgl1 libglx0 libglvnd0 libopengl0 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
libxext6 libxrender1 libxrandr2 libxinerama1 libxxf86vm1"
# Preferred first, as pip on the device (glibc 2.39) would: the newest manylinux tag a release has.
PLATFORMS="manylinux_2_35_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_28_x86_64
manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
manylinux_2_12_x86_64 manylinux2010_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64"

mkdir -p "$DL"
pipdl() {   # pip download NAME==VERSION... into $DL for CPython 3.12, manylinux x86_64
    local plat=""
    for p in $PLATFORMS; do plat="$plat --platform $p"; done
    $PY -m pip --isolated --disable-pip-version-check -q download --no-deps --only-binary=:all: \
        --python-version 3.12 --implementation cp $plat -d "$DL" "$@"
}

# 1. quadrants' wheel (p2) and the dependency closure of Genesis (the wheels into $DL).
ls "$DL"/quadrants-1.3.3-cp312-*.whl > /dev/null 2>&1 || pipdl "$QUADRANTS"
for q in $QUADRANTS_DEPS; do
    ls "$DL/$(echo "${q%%==*}" | tr - _)-${q##*==}-"*.whl > /dev/null 2>&1 || pipdl "$q"
done
export DEVICE DEVICE_VERSIONS FORCE SKIP LEAVE_OUT PINS PLATFORMS
$PY - "$DL" "$GENESIS" <<'EOF'
"""Resolves Genesis's runtime dependencies from the wheels' metadata; writes $DL/resolved.txt
(one wheel file a line) and prints what it decided for each requirement."""
import email.parser, glob, os, subprocess, sys, zipfile
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename

dl, root = sys.argv[1], sys.argv[2]
names = lambda var: {canonicalize_name(n) for n in os.environ[var].split()}
pairs = lambda var: dict((canonicalize_name(k), v) for k, v in (x.split("==") for x in os.environ[var].split()))
device, force, skip, leave_out = names("DEVICE"), names("FORCE"), names("SKIP"), names("LEAVE_OUT")
device_versions, pins = pairs("DEVICE_VERSIONS"), pairs("PINS")
env = dict(python_version="3.12", python_full_version="3.12.3", sys_platform="linux",
           platform_system="Linux", platform_machine="x86_64", os_name="posix",
           implementation_name="cpython", platform_python_implementation="CPython",
           platform_release="", platform_version="", extra="")
pip = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", "-q"]
plat = [a for p in os.environ["PLATFORMS"].split() for a in ("--platform", p)]

platforms = os.environ["PLATFORMS"].split()
def rank(tags):   # the wheel's most preferred platform tag (pure wheels: "any", last)
    return min((platforms.index(t.platform) if t.platform in platforms else len(platforms)) for t in tags)

def in_cache(name, spec):   # the newest version in $DL that fits; of its wheels, the preferred one
    best = None
    for w in sorted(glob.glob(os.path.join(dl, "*.whl"))):
        n, v, _, tags = parse_wheel_filename(os.path.basename(w))
        if n == name and spec.contains(v, prereleases=True):
            key = (v, -rank(tags))
            if best is None or key > best[0]:
                best = (key, w)
    return best and (best[0][0], best[1])

def fetch(req):
    name, spec = canonicalize_name(req.name), req.specifier
    if name in pins:
        spec = spec & f"=={pins[name]}"
    elif name not in force:
        print(f"NOT PINNED {name}: the newest version allowed by {req}", file=sys.stderr)
    hit = in_cache(name, spec)
    if hit is None:
        got = subprocess.run(pip + ["download", "--no-deps", "--only-binary=:all:", "--python-version",
                                    "3.12", "--implementation", "cp", *plat, "-d", dl, f"{req.name}{spec}"])
        if got.returncode:   # only an sdist on PyPI (pygltflib 1.16.0): build it, pure Python only
            subprocess.run(pip + ["wheel", "--no-deps", "-w", dl, f"{req.name}{spec}"], check=True)
            hit = in_cache(name, spec)
            if hit is None or not hit[1].endswith("-none-any.whl"):
                sys.exit(f"no pure-Python wheel built for {req.name}{spec}")
        hit = in_cache(name, spec)
    return hit

def requires(whl):
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        msg = email.parser.Parser().parsestr(z.read(meta).decode())
    return [Requirement(r) for r in msg.get_all("Requires-Dist") or []]

todo, chosen = [(Requirement(root), "-")], {}
while todo:
    req, by = todo.pop(0)
    if req.marker is not None and not req.marker.evaluate(env):
        continue
    name = canonicalize_name(req.name)
    if name in skip or name in leave_out:
        print(f"left out  {req} (for {by})"); continue
    if name in device and name not in force:
        have = device_versions.get(name)
        if have is None or req.specifier.contains(have, prereleases=True):
            print(f"device    {req} (for {by}){' has ' + have if have else ''}"); continue
        print(f"carried   {req} (for {by}): the device's {have} does not fit")
    if name in chosen:
        if not req.specifier.contains(chosen[name][0], prereleases=True):
            sys.exit(f"CONFLICT: {name} {chosen[name][0]} does not fit {req} (for {by})")
        continue
    v, whl = fetch(req)
    chosen[name] = (v, whl)
    print(f"carried   {name}=={v} (for {by})")
    todo += [(r, f"{name} {v}") for r in requires(whl)]
with open(os.path.join(dl, "resolved.txt"), "w") as out:
    out.writelines(os.path.basename(w) + "\n" for _, w in sorted(chosen.values(), key=lambda x: x[1]))
EOF

# 2. The site: each wheel unpacked as pip would lay it out (a wheel's .data/purelib and
# platlib into the site, the rest of .data dropped), then the cuts.
rm -rf "$WORK" && mkdir -p "$WORK/site"
while read -r whl; do
    $PY -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$DL/$whl" "$WORK/site"
done < "$DL/resolved.txt"
(
    cd "$WORK/site"
    for d in *.data; do
        [ -d "$d" ] || continue
        for sub in purelib platlib; do [ -d "$d/$sub" ] && cp -a "$d/$sub/." . ; done
        rm -rf "$d"
    done
    # top-level entries that hold no Python module: libigl's C++ headers, static libraries,
    # cmake files and shell scripts (include/, lib64/, share/, embree-vars.*)
    for e in *; do
        case "$e" in *.dist-info|*.libs|*.py|*.so|*.pth) continue ;; esac
        if [ -d "$e" ] && [ -n "$(find "$e" \( -name '*.py' -o -name '*.so' -o -name '*.so.*' \) -print -quit)" ]; then continue; fi
        rm -rf "$e"
    done
    find . -depth -type d \( -name tests -o -name testdata -o -name __pycache__ \) -exec rm -rf {} +
    rm -rf mujoco/include mujoco/*_test.py z3/include
    # Genesis's assets: only those the scenes open (the plane's texture, the Franka's MJCF)
    mkdir ../assets-kept
    for a in $KEEP_ASSETS; do mkdir -p "../assets-kept/$(dirname "$a")"; cp -a "genesis/assets/$a" "../assets-kept/$a"; done
    rm -rf genesis/assets && mv ../assets-kept genesis/assets
)

# 3. The archive, reproducible (sorted names, fixed times and owners), split over p1 and p2.
rm -rf $G/p1 $G/p2 $G/p3 && mkdir -p $G/p1 $G/p2 $G/p3/lib
tar c -C "$WORK/site" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner . \
    | xz -9 -T"$(nproc)" > "$WORK/gsite.tar.xz"
split -b $SPLIT -a 2 "$WORK/gsite.tar.xz" "$G/p1/gsite.tar.xz."
for f in $G/p1/gsite.tar.xz.*; do case "$f" in *.aa) ;; *) mv "$f" $G/p2/ ;; esac; done
cp "$DL"/quadrants-1.3.3-cp312-*.whl $G/p2/
for q in $QUADRANTS_DEPS; do cp "$DL/$(echo "${q%%==*}" | tr - _)-${q##*==}-"*.whl $G/p2/; done

# 4. p3: the shared libraries of the Debian packages (dpkg -x into a scratch folder, nothing
# installed), each under its soname as a plain file.
mkdir -p "$DL/deb" "$WORK/deb"
(
    cd "$DL/deb"
    missing=""
    for p in $DEBS; do ls "${p}"_*.deb > /dev/null 2>&1 || missing="$missing $p"; done
    if [ -n "$missing" ]; then   # apt's package lists are needed: update them once if it fails
        apt-get download $missing 2>/dev/null || { apt-get update -qq && apt-get download $missing 2>/dev/null; }
    fi
)
for d in "$DL"/deb/*.deb; do dpkg -x "$d" "$WORK/deb"; done
for f in "$WORK"/deb/usr/lib/x86_64-linux-gnu/*.so.*; do
    [ -f "$f" ] || continue
    soname=$(readelf -d "$f" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ -n "$soname" ] && cp -L "$f" "$G/p3/lib/$soname"
done

p1=$(du -cb $G/p1/* | tail -1 | cut -f1)
p23=$(du -cb $G/p2/* $G/p3/lib/* | tail -1 | cut -f1)
echo "gsite.tar.xz: $(du -b "$WORK/gsite.tar.xz" | cut -f1) bytes ($(du -sh "$WORK/site" | cut -f1) unpacked)"
echo "p1: $p1 bytes; p2 + p3: $p23 bytes (p2 $(du -cb $G/p2/* | tail -1 | cut -f1), p3 $(du -cb $G/p3/lib/* | tail -1 | cut -f1))"
ls $G/p1 $G/p2 $G/p3/lib
rm -rf "$WORK"
if [ "$p1" -gt $SPLIT ] || [ "$p23" -gt $SPLIT ]; then
    echo "too big for two device calls (64 MiB each, the repo's tracked files included): cut more" >&2
    exit 1
fi
