#!/usr/bin/env bash
# One run of every GPU check on a lent NVIDIA machine, with no Rust there.
#
# Here (the build machine):
#   cargo build --release -p weft
#   cargo test --release -p weft-tests --test cuda --test cross_backend --no-run
#   cargo test -p weft --test gui_optimize --no-run    # step 9 only
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
#   6. the peers' workloads: mpm88 (x8), mpm3d (x8), mass-spring AD, julia
#      on cuda, wgpu and cpu (all cores), checksums after 20 frames, the
#      hand-written CUDA mpm88 (CuPy) on the same card, and launches and
#      frame times with the inter-kernel optimiser on and off
#   7. bandwidth (life, heat at 8192^2); 8. pool activation under contention
#   9. the app's input latency while a simulation plays (app/tests/latency)
#  10. workgroups: block_scan with and without shared memory, checked
# They run in order of importance under one time budget (BUDGET seconds);
# each step can be picked alone for a rerun: ONLY="2a 9".
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
  # The app's kittest crate, for step 9 (cargo test -p weft --test
  # gui_optimize --no-run; the dev profile is optimised).
  bin=$(ls -t target/debug/deps/gui_optimize-* 2>/dev/null | grep -v '\.d$' | head -1 || true)
  if [ -n "$bin" ]; then xz -T0 -6 -c "$bin" > .gpu/test_gui_optimize.xz; fi
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
for t in cuda cross_backend gui_optimize; do
  [ -f .gpu/test_$t.xz ] && unxz_to .gpu/test_$t.xz $BIN/test_$t
done
W=$BIN/weft
# The test binaries find graphs/ through the path they were built in.
if [ "$ROOT" != /work/main ] && [ ! -e /work/main ]; then mkdir -p /work && ln -s "$ROOT" /work/main; fi
$W --version
ldd $W | grep -i "not found"

# Every step's limit is cut to what is left of BUDGET seconds, so that the
# whole script ends inside one device call (10 minutes) and leaves the
# session time to rerun it; the steps are in the order of what matters most
# (CUDA correctness first, then the numbers, then the wide sweeps).
BUDGET=${BUDGET:-500}
lim() { local want=$1 left=$(( T0 + BUDGET - $(date +%s) )); [ $left -lt 5 ] && left=1; echo $(( want < left ? want : left )); }
over() { [ $(( $(date +%s) - T0 )) -ge $BUDGET ] && { echo "(budget spent: skipped)"; return 0; }; return 1; }

# ONLY="2a 9" runs just those steps (a rerun after a fix); all by default.
want() { [ -z "${ONLY:-}" ] && return 0; case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

if want 2a; then
step "2a. weft replay graphs --backend cuda"
timeout $(lim 120) $W replay graphs --backend cuda; echo "exit $?"
fi

if want 3a; then
step "3a. CUDA test binary (cuda vs the VM)"
(cd tests && timeout $(lim 180) $BIN/test_cuda --test-threads 4 2>&1 | tail -40); echo "exit $?"
fi

if want 4; then
step "4. fault graphs through the CLI"
for b in cuda wgpu; do
  for g in oob_start oob_frame; do
    timeout $(lim 40) $W run tools/gpu/$g.json --backend $b --frames 12 --no-frames --out /tmp/oob_$b
    echo "$g on $b: exit $?"
  done
done
fi

if want 6a; then
step "6a. workloads"
X8="--set particles.shape=[65536] --set grid.shape=[256,256] --set p2g.dx=0.00390625 --set p2g.p_vol=3.814697265625e-06 --set p2g.p_mass=3.814697265625e-06 --set p2g.dt=0.0001 --set g2p.dx=0.00390625 --set g2p.dt=0.0001 --set grid_update.dt=0.0001 --set grid_update.n_grid=256 --init x=.gpu/mpm88_x8_x0.npy"
wl() { # workload backend frames args...
  local w=$1 b=$2 f=$3; shift 3
  timeout $(lim 90) $W bench "$@" --backend $b --frames $f --json | sed "s/^/{\"workload\": \"$w\", \"r\": /; s/\$/}/" >> "$OUT/workloads.jsonl"
}
for b in cuda wgpu cpu; do
  over && break
  wl mpm88 $b 20 graphs/mpm88.json
  wl mpm88_x8 $b 20 graphs/mpm88.json $X8
  wl mpm3d $b 20 graphs/mpm3d.json
  wl mpm3d_x8 $b 10 graphs/mpm3d_x8.json
  wl mass_spring_ad $b 10 bench/mass_spring_ad_iter.json
  wl julia $b 31 graphs/julia.json --set paint.speed=0.2
  for w in mpm88 mpm88_x8 mpm3d; do
    over && break
    case $w in
      mpm88_x8) g=graphs/mpm88.json; s="$X8" ;;
      mpm88) g=graphs/mpm88.json; s="--init x=.gpu/mpm88_x0.npy" ;;
      mpm3d) g=graphs/mpm3d.json; s="" ;;
    esac
    t=$(date +%s%N)
    timeout $(lim 60) $W run $g --backend $b --frames 1 --no-frames --out /tmp/first_$b $s >/dev/null
    echo "first frame incl. process start $w $b: $(( ($(date +%s%N) - t) / 1000000 )) ms"
    timeout $(lim 90) $W run $g --backend $b --frames 20 --no-frames --out /tmp/ck_${w}_$b --dump x --dump v --dump J $s >/dev/null
    python3 - "$w" "$b" <<'PY2'
import json, sys, numpy as np
w, b = sys.argv[1], sys.argv[2]
d = f"/tmp/ck_{w}_{b}"
try:
    x, v, J = (np.load(f"{d}/{n}.npy").astype(np.float64) for n in ("x", "v", "J"))
    print("checksum", json.dumps({"workload": w, "backend": b, "x_sum": x.sum(), "x_sqsum": (x * x).sum(),
                                  "v_sum": v.sum(), "J_sum": J.sum(), "finite": bool(np.isfinite(x).all())}))
except Exception as e:
    print("checksum", w, b, "failed:", e)
PY2
  done
done
fi

if want 6b; then
step "6b. hand-written CUDA mpm88 (CuPy), same card; with FMA (as the peers) and without (as Weft)"
for fma in "" --no-fma; do
  over && break
  timeout $(lim 60) python3 tools/gpu/peer_mpm88_cupy.py --frames 20 $fma
  timeout $(lim 60) python3 tools/gpu/peer_mpm88_cupy.py --frames 20 --particles 65536 --grid 256 $fma
done
fi

if want 6c; then
step "6c. weft bench cuda again, after the peer (same-run ratios)"
over || {
  timeout $(lim 60) $W bench graphs/mpm88.json --backend cuda --frames 20 --json | sed 's/^/{"workload": "mpm88", "again": true, "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
  timeout $(lim 60) $W bench graphs/mpm88.json --backend cuda --frames 20 --json $X8 | sed 's/^/{"workload": "mpm88_x8", "again": true, "r": /; s/$/}/' >> "$OUT/workloads.jsonl"
}
fi

if want 6d; then
step "6d. the inter-kernel optimiser on and off (launches and frame time, same run)"
for g in sparse_blob sparse3d mpm_sparse mpm88 mpm3d heat; do
  for b in cuda wgpu; do
    over && break 2
    for opt in "" --no-interkernel; do
      timeout $(lim 60) $W bench graphs/$g.json --backend $b --frames 10 --json $opt \
        | sed "s/^/{\"workload\": \"$g\", \"interkernel\": \"${opt:-on}\", \"r\": /; s/\$/}/" >> "$OUT/interkernel.jsonl"
    done
  done
done
python3 - "$OUT/interkernel.jsonl" <<'PY2'
import json, sys
for line in open(sys.argv[1]):
    try:
        w = json.loads(line)
    except Exception:
        continue
    r = w["r"]
    print(w["workload"], r["backend"], w["interkernel"], "launches/frame", r.get("launches_per_frame"), "frame median ms", r["frame_ms"]["median"])
PY2
fi

if want 2b; then
step "2b. weft replay graphs --backend wgpu (hardware Vulkan)"
over || { timeout $(lim 120) $W replay graphs --backend wgpu; echo "exit $?"; }
fi

if want 3b; then
step "3b. cross-backend tests (wgpu on the hardware adapter)"
# One test a process: a crash names its test.
for t in $($BIN/test_cross_backend --list 2>/dev/null | sed -n 's/: test$//p'); do
  over && break
  (cd tests && timeout $(lim 60) $BIN/test_cross_backend --exact "$t" --test-threads 1 > /tmp/t.log 2>&1)
  rc=$?
  echo "$t: exit $rc"
  [ $rc -ne 0 ] && tail -25 /tmp/t.log
done
fi

if want 5; then
step "5. weft bench, every example, cuda and wgpu"
for g in graphs/*.json; do
  case $g in *.expect.json) continue ;; esac
  over && break
  for b in cuda wgpu; do
    timeout $(lim 30) $W bench "$g" --backend $b --frames 10 --json >> "$OUT/bench.jsonl" \
      || echo "bench $g $b: exit $?"
  done
done
echo "bench lines: $(wc -l < "$OUT/bench.jsonl" 2>/dev/null)"
fi

if want 7; then
step "7. bandwidth: life and heat at 8192^2"
for b in cuda wgpu; do
  over && break
  timeout $(lim 60) $W bench graphs/life.json --backend $b --frames 10 --json --set board.shape=[8192,8192] --set step.n=8192 \
    | sed 's/^/{"workload": "life_8192", "r": /; s/$/}/' >> "$OUT/workloads.jsonl" || echo "life 8192 $b failed"
  timeout $(lim 60) $W bench graphs/heat.json --backend $b --frames 5 --json --set grid.shape=[8192,8192] --set diffuse.n=8192 \
    | sed 's/^/{"workload": "heat_8192", "r": /; s/$/}/' >> "$OUT/workloads.jsonl" || echo "heat 8192 $b failed"
done
fi

if want 8; then
step "8. pointer pool activation under GPU contention: sparse_blob 10 starts each"
for b in cuda wgpu; do
  over && break
  bad=0
  for r in $(seq 10); do
    timeout $(lim 30) $W run graphs/sparse_blob.json --backend $b --frames 3 --no-frames --out /tmp/sb_$b >/dev/null 2>/tmp/sb_err || { bad=$((bad+1)); tail -1 /tmp/sb_err; }
  done
  echo "sparse_blob on $b: $bad of 10 runs failed"
done
fi

if want 9; then
step "9. app input latency: a click on a node while the simulation plays, until the inspector shows it"
# The app's own test binary (egui_kittest, rendered by wgpu on this GPU):
# see app/tests/latency/mod.rs for what is timed.
if [ -x $BIN/test_gui_optimize ]; then
  (cd app && WEFT_LATENCY_GRAPHS=mpm_quant.json,smoke3d.json,mpm3d_x8.json timeout $(lim 150) $BIN/test_gui_optimize --nocapture --exact latency::click_to_inspector_latency_while_playing 2>&1 | grep -E "^latency|panicked|test result|skipping" | tee -a "$OUT/latency.jsonl")
fi
fi

if want 10; then
step "10. workgroups: block_scan (shared memory, #[block(256)]) against the same sums without it, same run"
# 8192 x 1024 cells (8 Mi invocations, 32768 blocks); per-kernel times
# in the bench output (scan vs scan_plain), results checked against the
# cpu backend's dump (integers in f32: the sums are exact everywhere).
S="--set cells.shape=[8192,1024] --set scan.range=[8192,1024] --set scan_plain.range=[8192,1024] --set fill.range=[8192,1024]"
for b in cpu cuda wgpu; do
  over && break
  timeout $(lim 60) $W run graphs/block_scan.json --backend $b --frames 1 --no-frames $S --dump y --dump y_plain --out /tmp/bs_$b >/dev/null 2>/tmp/bs_err || tail -2 /tmp/bs_err
done
python3 - <<'PY'
import numpy as np
ref = np.load("/tmp/bs_cpu/y.npy")
for b in ["cuda", "wgpu"]:
    try:
        y, yp = np.load(f"/tmp/bs_{b}/y.npy"), np.load(f"/tmp/bs_{b}/y_plain.npy")
        print(f"block_scan {b}: y equal to cpu: {np.array_equal(y, ref)}, y_plain equal: {np.array_equal(yp, ref)}")
    except Exception as e:
        print(f"block_scan {b}: {e}")
PY
for b in cuda wgpu; do
  over && break
  timeout $(lim 60) $W bench graphs/block_scan.json --backend $b --frames 10 $S 2>&1 | grep -E "^(backend|frame|kernel)" | tee -a "$OUT/block_scan.txt"
done
fi

echo "done in $(( $(date +%s) - T0 )) s"
