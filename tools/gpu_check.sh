#!/usr/bin/env bash
# One run of every GPU check on a lent NVIDIA machine, with no Rust there.
#
# Here (the build machine):
#   cargo build --release -p weft
#   cargo test --release -p weft-tests --test cuda --test cross_backend --no-run
#   tools/gpu_check.sh --pack        # .gpu/: weft.xz, test binaries .xz, x8 start
# There (through the device tool, carrying .gpu and .gl):
#   tools/gpu_check.sh               # writes everything to $OUT (or ./gpu_out)
#
# Steps, each under its own time limit, all logged to $OUT/log.txt:
#   1. the machine: nvidia-smi, NVRTC and Vulkan found
#   2. weft replay graphs --backend cuda (the `cpu` entries and tolerances)
#      and --backend wgpu (hardware Vulkan, the `wgpu` entries)
#   3. the CUDA test binary (examples, language corpus, edge and fault
#      cases on cuda against the VM) and the cross-backend tests (wgpu)
#   4. fault graphs through the CLI on cuda and wgpu: node and line named,
#      exit status 1, also for a fault in a frame run ahead of the host
#   5. weft bench --json of every example on cuda and wgpu ($OUT/bench.jsonl)
#   6. the peers' workloads: mpm88, mpm88 x8, mass-spring AD, julia on
#      cuda, wgpu and cpu (all cores), mpm88 checksums after 20 frames, and
#      the hand-written CUDA mpm88 (CuPy) on the same card
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = "--pack" ]; then
  set -e
  mkdir -p .gpu
  xz -T0 -6 -c target/release/weft > .gpu/weft.xz
  for t in cuda cross_backend; do
    bin=$(ls -t target/release/deps/${t}-* | grep -v '\.d$' | head -1)
    xz -T0 -6 -c "$bin" > .gpu/test_${t}.xz
  done
  python3 - <<'PY'
import numpy as np
# The peers' start (../shared/peers/README.md), for checksums comparable
# with theirs: graphs/mpm88_x0.npy is another random start.
for n, name in [(8192, "mpm88_x0"), (65536, "mpm88_x8_x0")]:
    x = (np.random.default_rng(42).random((n, 2)) * 0.4 + 0.2).astype(np.float32)
    np.save(f".gpu/{name}.npy", x)
PY
  ls -la .gpu
  du -sh .gpu
  exit 0
fi

OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }
T0=$(date +%s)

step "1. machine"
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done
ldconfig
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  if ls "$d"/libnvrtc.so* >/dev/null 2>&1; then NVRTC_DIR=$d; break; fi
done
if [ -z "${NVRTC_DIR:-}" ]; then
  NVRTC_DIR=$(dirname "$(find / -name 'libnvrtc.so*' -not -path '/proc/*' 2>/dev/null | head -1)")
fi
echo "NVRTC: $NVRTC_DIR"
export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
  for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$j" ] && export VK_DRIVER_FILES=$j
  done
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
BIN=/tmp/weftbin
mkdir -p $BIN
# Python's lzma, in case the image has no xz.
unxz_to() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
unxz_to .gpu/weft.xz $BIN/weft
for t in cuda cross_backend; do
  [ -f .gpu/test_$t.xz ] && unxz_to .gpu/test_$t.xz $BIN/test_$t
done
W=$BIN/weft
# The test binaries find graphs/ through the path they were built in.
if [ "$ROOT" != /work/main ] && [ ! -e /work/main ]; then mkdir -p /work && ln -s "$ROOT" /work/main; fi
$W --version
ldd $W | grep -i "not found"

step "2a. weft replay graphs --backend cuda"
timeout 150 $W replay graphs --backend cuda; echo "exit $?"
step "2b. weft replay graphs --backend wgpu"
timeout 150 $W replay graphs --backend wgpu; echo "exit $?"

step "3a. CUDA test binary (cuda vs the VM)"
(cd tests && timeout 200 $BIN/test_cuda --test-threads 1 2>&1 | tail -40); echo "exit $?"
step "3b. cross-backend tests (wgpu on the hardware adapter)"
# One test a process: a crash names its test.
for t in $($BIN/test_cross_backend --list 2>/dev/null | sed -n 's/: test$//p'); do
  (cd tests && timeout 120 $BIN/test_cross_backend --exact "$t" --test-threads 1 > /tmp/t.log 2>&1)
  rc=$?
  echo "$t: exit $rc"
  [ $rc -ne 0 ] && tail -25 /tmp/t.log
done

step "4. fault graphs through the CLI"
for b in cuda wgpu; do
  for g in oob_start oob_frame; do
    timeout 60 $W run tools/gpu/$g.json --backend $b --frames 12 --no-frames --out /tmp/oob_$b
    echo "$g on $b: exit $?"
  done
done

step "5. weft bench, every example, cuda and wgpu"
for g in graphs/*.json; do
  case $g in *.expect.json) continue ;; esac
  for b in cuda wgpu; do
    timeout 60 $W bench "$g" --backend $b --frames 20 --json >> "$OUT/bench.jsonl" \
      || echo "bench $g $b: exit $?"
  done
done
echo "bench lines: $(wc -l < "$OUT/bench.jsonl")"

step "6a. workloads"
X8="--set particles.shape=[65536] --set grid.shape=[256,256] --set p2g.dx=0.00390625 --set p2g.p_vol=3.814697265625e-06 --set p2g.p_mass=3.814697265625e-06 --set p2g.dt=0.0001 --set g2p.dx=0.00390625 --set g2p.dt=0.0001 --set grid_update.dt=0.0001 --set grid_update.n_grid=256 --init x=.gpu/mpm88_x8_x0.npy"
for b in cuda wgpu cpu; do
  timeout 60 $W bench graphs/mpm88.json --backend $b --frames 20 --json | sed 's/^/{"workload": "mpm88", "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
  timeout 120 $W bench graphs/mpm88.json --backend $b --frames 20 --json $X8 | sed 's/^/{"workload": "mpm88_x8", "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
  timeout 120 $W bench bench/mass_spring_ad_iter.json --backend $b --frames 10 --json | sed 's/^/{"workload": "mass_spring_ad", "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
  timeout 60 $W bench graphs/julia.json --backend $b --frames 31 --json --set paint.speed=0.2 | sed 's/^/{"workload": "julia", "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
  for w in mpm88 mpm88_x8; do
    s=$( [ $w = mpm88_x8 ] && echo "$X8" || echo "--init x=.gpu/mpm88_x0.npy" )
    t=$(date +%s%N)
    timeout 60 $W run graphs/mpm88.json --backend $b --frames 1 --no-frames --out /tmp/first_$b $s >/dev/null
    echo "first frame incl. process start $w $b: $(( ($(date +%s%N) - t) / 1000000 )) ms"
    timeout 120 $W run graphs/mpm88.json --backend $b --frames 20 --no-frames --out /tmp/ck_${w}_$b --dump x --dump v --dump J $s >/dev/null
    python3 - "$w" "$b" <<'PY'
import json, sys, numpy as np
w, b = sys.argv[1], sys.argv[2]
d = f"/tmp/ck_{w}_{b}"
x, v, J = (np.load(f"{d}/{n}.npy").astype(np.float64) for n in ("x", "v", "J"))
print("checksum", json.dumps({"workload": w, "backend": b, "x_sum": x.sum(), "x_sqsum": (x * x).sum(),
                              "v_sum": v.sum(), "J_sum": J.sum(), "finite": bool(np.isfinite(x).all())}))
PY
  done
done
step "6b. hand-written CUDA mpm88 (CuPy), same card; with FMA (as the peers) and without (as Weft)"
for r in 1 2; do
  for fma in "" --no-fma; do
    timeout 120 python3 tools/gpu/peer_mpm88_cupy.py --frames 20 $fma
    timeout 120 python3 tools/gpu/peer_mpm88_cupy.py --frames 20 --particles 65536 --grid 256 $fma
  done
done
step "6c. weft bench cuda again, after the peer (same-run ratios)"
timeout 60 $W bench graphs/mpm88.json --backend cuda --frames 20 --json | sed 's/^/{"workload": "mpm88", "again": true, "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
timeout 120 $W bench graphs/mpm88.json --backend cuda --frames 20 --json $X8 | sed 's/^/{"workload": "mpm88_x8", "again": true, "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
step "7. bandwidth: life and heat at 8192^2 (copy kernels move whole AoS trees)"
for b in cuda wgpu; do
  timeout 120 $W bench graphs/life.json --backend $b --frames 10 --json --set board.shape=[8192,8192] --set step.n=8192 \
    | sed 's/^/{"workload": "life_8192", "r": /; s/$/}/' >> "$OUT/workloads.jsonl" || echo "life 8192 $b failed"
  timeout 120 $W bench graphs/heat.json --backend $b --frames 5 --json --set grid.shape=[8192,8192] --set diffuse.n=8192 \
    | sed 's/^/{"workload": "heat_8192", "r": /; s/$/}/' >> "$OUT/workloads.jsonl" || echo "heat 8192 $b failed"
done

step "8. pointer pool activation under GPU contention: sparse_blob 20 starts each"
for b in cuda wgpu; do
  bad=0
  for r in $(seq 20); do
    timeout 30 $W run graphs/sparse_blob.json --backend $b --frames 3 --no-frames --out /tmp/sb_$b >/dev/null 2>/tmp/sb_err || { bad=$((bad+1)); tail -1 /tmp/sb_err; }
  done
  echo "sparse_blob on $b: $bad of 20 runs failed"
done
echo "done in $(( $(date +%s) - T0 )) s"
