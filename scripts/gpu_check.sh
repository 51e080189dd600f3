#!/usr/bin/env bash
# gpu_check.sh: the device check, in one prepared script, for a fresh machine with one NVIDIA GPU
# (an H200), the CUDA toolkit, a C compiler and PyTorch, no network, and none of our Debian build
# dependencies. Phases, in the order that finds most in the least device time, each with a budget
# in seconds (printed with their sum, at most 480: the device lends 15 minutes a session, start
# included). A phase must end by the sum of the budgets up to it, so time one phase leaves is
# the next one's; one that cannot get its minimum is reported as skipped, never dropped silently.
#   deps       .gpudeps -> a private prefix, checked need by need (scripts/gpu_prefix.sh); stops
#              the check at the first missing dependency, naming it
#   build      make bin/myriad and the CUDA kernel test against the prefix (machine code for the
#              GPU's own compute capability), then ldd: every library found, ours from the prefix
#   smoke      myriad --version, myriad doctor --device cuda (cuBLASLt GEMM, device copy), three
#              training steps of the tiny GPT-2 on the GPU: is the GPU usable at all
#   kernels    build/tests/test_kernels_cuda (every kernel against the CPU backend, CPU references
#              on every core); each failing or unreported case rerun alone with
#              CUDA_LAUNCH_BLOCKING=1, so that a fault names its kernel (file:line of its launch)
#   memcheck, racecheck, synccheck   the kernel test on small shapes under compute-sanitizer
#   fixtures   tests/test_cuda_train.sh part 1: the PyTorch fixtures, fp32 and bf16, on the GPU
#   training   its part 2: dp 2 / tp 2 ranks sharing the GPU, checkpoints GPU <-> CPU
#   nccl       its part 4 (--comm nccl) and `myriad bench comm --comm nccl`; skipped, saying so,
#              while bin/myriad has no NCCL backend
#   bench      bench/gpu_bench.sh: gpt2-124m and a 1.1B Llama, myriad against PyTorch
#              (torch.compile, bf16, the same shapes, in the same run): tokens/s and MFU
#   sim probe  bench/gpu_sim_probe.py (PyTorch only), in whatever time the phases left
# Writes $OUT/gpu_check.md (the report: phases, the speed against PyTorch and the goals, every
# test case) and the logs beside it when OUT is set (the device tool's output folder), else in
# build/gpu_check/. Exit 0 when no phase failed.
#
# On the device machine (docs/GPU.md, "The device check"), after bash scripts/gpu_deps.sh here:
#   run(command="bash scripts/gpu_check.sh", carry=[".gpudeps"], timeout_s=570)
# Rehearsal on a machine without a GPU, with the build's packages installed (scripts/install-deps.sh):
#   bash scripts/gpu_deps.sh && bash scripts/gpu_check.sh --rehearse
# derives the build's needs again (scripts/gpu_needs.py) and stops if .gpudeps is stale, copies the
# tree (what the device receives: no build/), and re-runs itself in a private mount namespace where
# every file of every package .gpudeps packs is hidden (scripts/gpu_hide.sh), so only the prefix
# can serve them; then every phase runs its command line as far as a GPU is not needed: the tests
# with MYRIAD_TEST_DEVICE=cpu under the device guard, the emulated kernel test, the benchmark on
# tiny shapes on the CPU (PyTorch with --cpu-rehearse); the GPU steps report skips.
# Options: --rehearse; --deps-only (stop after the deps phase: tests/test_gpu_deps.sh).
# Env: GPUDEPS_DIR (default .gpudeps), GPU_NEEDS_MANIFEST (a rehearsal compares .gpudeps with this
# derivation instead of deriving again), GPU_CHECK_PYTHON (the python3 with PyTorch),
# GPU_CHECK_SKIP_STALE=1 (tests of the hiding itself: a .gpudeps that lacks a need on purpose),
# GPU_CHECK_SCALE (deadlines times this: default 1, 20 in a rehearsal).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
REHEARSE=${REHEARSE:-0} DEPS_ONLY=0
for a in "$@"; do
    case $a in
        --rehearse) REHEARSE=1 ;;
        --deps-only) DEPS_ONLY=1 ;;
        *) echo "gpu_check: unknown option $a (use --rehearse, --deps-only)" >&2; exit 2 ;;
    esac
done
GPUDEPS=${GPUDEPS_DIR:-.gpudeps}
KBIN=build/tests/test_kernels_cuda
case $GPUDEPS in /*) ;; *) GPUDEPS=$ROOT/$GPUDEPS ;; esac

# ---------------------------------------------------------------- rehearsal: the host's part
if [ "$REHEARSE" = 1 ] && [ -z "${GPU_CHECK_IN_NS:-}" ]; then
    [ -s "$GPUDEPS/MANIFEST" ] || { echo "gpu_check: no $GPUDEPS/MANIFEST: run bash scripts/gpu_deps.sh first" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "gpu_check: the rehearsal needs root (a mount namespace that hides this machine's libraries)" >&2; exit 1; }
    copy=$(mktemp -d /tmp/myriad-rehearse-XXXXXX)
    derived=${GPU_NEEDS_MANIFEST:-$copy.derived}
    if [ -z "${GPU_NEEDS_MANIFEST:-}" ]; then
        echo "gpu_check: deriving the build's needs again (scripts/gpu_needs.py) to compare with $GPUDEPS/MANIFEST" >&2
        python3 scripts/gpu_needs.py >"$derived" || { rm -rf "$copy" "$derived"; echo "gpu_check: deriving the build's needs failed (above)" >&2; exit 1; }
    fi
    # stale: a need of today's build that .gpudeps was not made for
    stale=$(awk 'NR == FNR {if ($1 == "need") have[$2 " " $3] = 1; next} $1 == "need" && !have[$2 " " $3] {print $2 " " $3 " (" ($2 == "file" ? $4 : $2 == "data" ? $3 : $5) ")"; exit}' \
        "$GPUDEPS/MANIFEST" "$derived")
    if [ -n "$stale" ] && [ -z "${GPU_CHECK_SKIP_STALE:-}" ]; then
        rm -rf "$copy" "$copy.derived"
        echo "gpu_check: stale $GPUDEPS: the build now needs $stale, which its MANIFEST lacks: run bash scripts/gpu_deps.sh again" >&2
        exit 1
    fi
    # a package missing from .gpudeps stops the rehearsal here already, as it would stop the device check
    . scripts/gpu_prefix.sh
    if ! prefix_packages "$GPUDEPS" >/dev/null; then
        rm -rf "$copy" "$copy.derived"
        echo "gpu_check: $DEPS_ERROR" >&2
        exit 1
    fi
    . scripts/gpu_hide.sh
    hide_list "$GPUDEPS/MANIFEST" "$derived" >"$copy.hide"
    rm -f "$copy.derived"
    mkdir -p build/gpu_check
    if [ $DEPS_ONLY = 1 ]; then # the deps phase builds nothing: it runs in this tree, on GPUDEPS as it is
        rmdir "$copy"
        exec unshare -m --propagation private env GPU_CHECK_IN_NS=1 REHEARSE=1 GPU_CHECK_HIDE="$copy.hide" \
            GPUDEPS_DIR="$GPUDEPS" OUT="${OUT:-$ROOT/build/gpu_check}" bash "$ROOT/scripts/gpu_check.sh" --rehearse --deps-only
    fi
    git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$copy" 2>/dev/null
    mkdir -p "$copy/.gpudeps" && cp -r "$GPUDEPS/." "$copy/.gpudeps/" || { rm -rf "$copy" "$copy.hide"; exit 1; }
    exec unshare -m --propagation private env GPU_CHECK_IN_NS=1 REHEARSE=1 REHEARSE_TREE="$copy" \
        GPU_CHECK_HIDE="$copy.hide" GPUDEPS_DIR="$copy/.gpudeps" OUT="${OUT:-$ROOT/build/gpu_check}" \
        bash "$copy/scripts/gpu_check.sh" --rehearse
fi

# ---------------------------------------------------------------- budgets
PH_NAMES=(deps build smoke kernels memcheck racecheck synccheck fixtures training nccl "bench gpt2-124m" "bench llama-1.1b")
PH_BUDGET=(15 85 30 45 35 25 20 20 45 15 55 90)
TOTAL=0
for b in "${PH_BUDGET[@]}"; do TOTAL=$((TOTAL + b)); done
# budgets are for the 16-core GPU machine; a rehearsal on 2 busy cores gets 20 times as long
SCALE=${GPU_CHECK_SCALE:-$([ "$REHEARSE" = 1 ] && echo 20 || echo 1)}
START=$(date +%s)
END=$((START + SCALE * TOTAL))
NPROC=$(nproc)
RESULT_DIR=${OUT:-$ROOT/build/gpu_check}
mkdir -p "$RESULT_DIR"
LOG=$RESULT_DIR/gpu_check.log
MD=$RESULT_DIR/gpu_check.md
: >"$LOG"
W=$(mktemp -d /tmp/myriad-gpucheck-XXXXXX)
cleanup() { rm -rf "$W" ${REHEARSE_TREE:+"$REHEARSE_TREE"} ${GPU_CHECK_HIDE:+"$GPU_CHECK_HIDE"}; }
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=
export OMP_NUM_THREADS=$NPROC # the CPU references of the kernel test use every core

log() { echo "[$(($(date +%s) - START))s] $*" | tee -a "$LOG" >&2; }
PHASES=()
FAILED=0
phase_row() { # NAME STATUS SECONDS NOTE
    local b=- i
    for i in "${!PH_NAMES[@]}"; do [ "${PH_NAMES[$i]}" = "$1" ] && b=${PH_BUDGET[$i]}; done
    PHASES+=("| $1 | $b | $2 | $3 | $4 |")
    case $2 in FAILED* | TIMEOUT*) FAILED=1 ;; esac
}
checkpoint() { # NAME: when the phase must be done (the budgets' sum up to it), else the end
    local i sum=0
    for i in "${!PH_NAMES[@]}"; do
        sum=$((sum + PH_BUDGET[i]))
        [ "${PH_NAMES[$i]}" = "$1" ] && { echo $((START + SCALE * sum)); return; }
    done
    echo $END
}

# run_phase NAME MIN_SECONDS OUTFILE CMD...: CMD under the phase's deadline; skipped when less than
# MIN_SECONDS is left. A phase whose output has FAIL lines failed, whatever its exit status.
run_phase() {
    local name=$1 min=$2 outfile=$3; shift 3
    local t=$(( $(checkpoint "$name") - $(date +%s) ))
    if [ $t -lt "$min" ]; then
        log "$name: skipped (${t}s left, it needs ${min}s)"
        phase_row "$name" "skipped: no time" 0 "${t}s were left, it needs ${min}s"
        return 2
    fi
    log "$name: start (deadline ${t}s)"
    local t0=$(date +%s)
    timeout -k 10 $t "$@" >"$outfile" 2>&1
    local rc=$? dt=$(( $(date +%s) - t0 ))
    cat "$outfile" >>"$LOG"
    local fails=$(grep -c '^FAIL ' "$outfile") oks=$(grep -c '^ok ' "$outfile") skips=$(grep -c '^skip ' "$outfile")
    local note=""
    [ $((oks + fails + skips)) -gt 0 ] && note="$oks ok, $fails failed, $skips skipped"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        log "$name: stopped at its deadline (${dt}s)"; phase_row "$name" "TIMEOUT" $dt "stopped after ${t}s${note:+; $note}"; return 1
    fi
    log "$name: exit $rc (${dt}s)"
    if [ $rc -eq 0 ] && [ $fails -eq 0 ]; then phase_row "$name" done $dt "$note"
    else phase_row "$name" "FAILED (exit $rc)" $dt "${note:-$(grep -v -e '^\s*$' -e '^+ ' "$outfile" | tail -1 | cut -c1-160)}"; rc=1; fi
    return $rc
}

# ---------------------------------------------------------------- the machine
# the python3 with PyTorch: the PATH's (the GPU machine's image), else /usr/bin's (Debian's, here)
has_torch() { "$1" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; }
PY=${GPU_CHECK_PYTHON:-}
if [ -z "$PY" ]; then
    for c in $([ "$REHEARSE" = 1 ] && echo /usr/bin/python3) $(command -v python3) /usr/bin/python3; do
        has_torch "$c" && PY=$c && break
    done
    PY=${PY:-$(command -v python3 || echo /usr/bin/python3)}
fi
MYRIAD_PYTHON=$PY
[ -x /usr/bin/python3 ] && MYRIAD_PYTHON=/usr/bin/python3
export MYRIAD_PYTHON
CC_CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME"), $NPROC cores, $(free -g 2>/dev/null | awk '/Mem:/ {print $2}') GiB"
    echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)${CC_CAP:+, compute capability $CC_CAP}"
    echo "nvcc: $( (command -v nvcc || ls /usr/local/cuda/bin/nvcc) 2>/dev/null | head -1) $( (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | grep -o 'release [0-9.]*')"
    echo "python: $PY; compiler: $(gcc --version 2>/dev/null | head -1)"
} >"$W/facts"
cat "$W/facts" >>"$LOG"
budgets=$(for i in "${!PH_NAMES[@]}"; do printf '%s %s, ' "${PH_NAMES[$i]}" "${PH_BUDGET[$i]}"; done)
log "gpu_check $([ "$REHEARSE" = 1 ] && echo "REHEARSAL (no GPU steps; deadlines x$SCALE)") in $ROOT"
log "budgets (s): ${budgets%, }; sum $TOTAL s (limit 480)"

summary() { # writes the report (every exit after this point goes through it)
    . scripts/gpu_report.sh
    write_report >"$MD"
    for f in deps.txt build.txt smoke.txt kernels.txt train.txt nccl.txt sanitizer.txt bench.jsonl; do
        [ -s "$W/$f" ] && tail -c 8000000 "$W/$f" >"$RESULT_DIR/$f"
    done
    log "report: $MD"
    cat "$MD"
}

# ---------------------------------------------------------------- rehearsal: hide this machine's copies
if [ "$REHEARSE" = 1 ] && [ -n "${GPU_CHECK_HIDE:-}" ]; then
    . scripts/gpu_hide.sh
    if hide_apply "$GPU_CHECK_HIDE" "$W"; then
        log "rehearsal: $(wc -l <"$GPU_CHECK_HIDE") files of the packages .gpudeps packs are hidden in this namespace"
        phase_row "hide (rehearsal)" done 0 "$(wc -l <"$GPU_CHECK_HIDE") files of $(grep -c ' packed$' "$GPUDEPS/MANIFEST") packages hidden; base ones left"
    else
        log "rehearsal: $HIDE_ERROR"
        phase_row "hide (rehearsal)" "FAILED" 0 "$HIDE_ERROR"
        summary; exit 1
    fi
fi

# ---------------------------------------------------------------- deps
. scripts/gpu_prefix.sh
t0=$(date +%s)
prefix_setup "$GPUDEPS" "${GPU_DEPS_PREFIX:-$W/prefix}" >"$W/deps.txt" 2>&1
deps_rc=$?
cat "$W/deps.txt" >>"$LOG"
if [ $deps_rc -ne 0 ]; then
    log "deps: ${DEPS_ERROR:-failed}"
    phase_row deps "FAILED" $(( $(date +%s) - t0 )) "${DEPS_ERROR:-see deps.txt}"
    phase_row "(all later phases)" "not run" 0 "the dependency check stopped the device check"
    summary
    echo "gpu_check: ${DEPS_ERROR:-the dependency phase failed}" >&2
    exit 1
fi
phase_row deps done $(( $(date +%s) - t0 )) "$(tail -1 "$W/deps.txt" | cut -c1-120); $(grep -m1 '^sonames' "$W/deps.txt")"
log "deps: $(grep -c . "$W/deps.txt") checks passed"
if [ $DEPS_ONLY = 1 ]; then summary; exit $FAILED; fi
# the rehearsal's PyTorch is Debian's, linked with libraries hidden here: every folder of the prefix
# that holds shared libraries, after ours
[ "$REHEARSE" = 1 ] && REHEARSE_TORCH_LIBPATH=$LD_LIBRARY_PATH:$(find "$R" -name '*.so*' -printf '%h\n' | sort -u | tr '\n' ':')

# ---------------------------------------------------------------- build
NVCC_BIN=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null | head -1)
CUDA_HOME_GUESS=${NVCC_BIN%/bin/nvcc}
extra="--threads 2"
if [ -n "$NVCC_BIN" ] && [ ! -f "$CUDA_HOME_GUESS/include/cublasLt.h" ]; then
    inc=$(env -u LD_LIBRARY_PATH "$PY" -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "include"))' 2>/dev/null)
    [ -n "$inc" ] && extra="$extra -I$inc"
fi
if [ ! -e "$CUDA_HOME_GUESS/lib64/libcublasLt.so.13" ] && [ -z "${MYRIAD_CUBLASLT:-}" ]; then
    lib=$(env -u LD_LIBRARY_PATH "$PY" -c 'import nvidia.cublas, os, glob; print(sorted(glob.glob(os.path.join(list(nvidia.cublas.__path__)[0], "lib", "libcublasLt.so.*")))[-1])' 2>/dev/null)
    [ -n "$lib" ] && export MYRIAD_CUBLASLT=$lib && log "cuBLASLt from PyTorch's wheel: $lib"
fi
# libnccl for --comm nccl: PyTorch's nvidia-nccl wheel where the system has none
if [ -z "${MYRIAD_NCCL:-}" ]; then
    lib=$(env -u LD_LIBRARY_PATH "$PY" -c 'import nvidia.nccl, os, glob; print(sorted(glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*")))[-1])' 2>/dev/null)
    [ -n "$lib" ] && export MYRIAD_NCCL=$lib && log "libnccl from PyTorch's wheel: $lib"
fi
arch=()
# machine code for this GPU alone (half the CUDA compile of the default sm_80 + sm_90)
if [[ "$CC_CAP" =~ ^[0-9]+\.[0-9]$ ]]; then
    sm=${CC_CAP/./}
    arch=("CUDA_ARCH=-gencode arch=compute_$sm,code=[sm_$sm,compute_$sm]")
fi
build_targets="bin/myriad build/tests/test_kernels_cuda"
[ "$REHEARSE" = 1 ] && build_targets="all"
run_phase build 20 "$W/build.txt" make -j"$NPROC" CC="$P/bin/mpicc" NVCC_EXTRA="$extra" "${arch[@]}" $build_targets
build_ok=$?
grep -E ": error|: fatal|\*\*\* |undefined reference|cannot find" "$W/build.txt" | head -20 >"$W/build_errors.txt"
if [ $build_ok -eq 0 ]; then
    # every library of every program found, and each of ours (MANIFEST class packed) from the prefix
    progs="bin/myriad build/tests/test_kernels_cuda"
    [ "$REHEARSE" = 1 ] && progs="bin/myriad $(ls build/tests/test_* | grep -v '\.')"
    for p in $progs; do echo "== $p"; ldd "$p"; done >"$W/ldd.txt" 2>&1
    ours=$(awk 'NR == FNR {if ($1 == "package" && $5 == "packed") pk[$2] = 1; next} $1 == "need" && $2 == "soname" && pk[$5] {print $3}' \
        "$GPUDEPS/MANIFEST" "$GPUDEPS/MANIFEST" | sort -u)
    missing=$(grep "not found" "$W/ldd.txt" | awk '{print $1}' | sort -u | tr '\n' ' ')
    outside=$(for s in $ours; do grep -E "^\s$s => " "$W/ldd.txt" | grep -v " => $P/" | awk '{print $1 " => " $3}'; done | sort -u | head -3 | tr '\n' ' ')
    nours=$(for s in $ours; do grep -qE "^\s$s => $P/" "$W/ldd.txt" && echo $s; done | grep -c .)
    if [ -z "$missing" ] && [ -z "$outside" ]; then
        phase_row "libraries (ldd)" done 0 "$(echo $progs | wc -w) programs; $nours of our libraries, all from the prefix"
    else
        phase_row "libraries (ldd)" FAILED 0 "${missing:+not found: $missing}${outside:+ from outside the prefix: $outside}"
    fi
    cat "$W/ldd.txt" >>"$LOG"
    if [ "$REHEARSE" = 1 ]; then
        run_phase "cpu tests on the prefix (rehearsal)" 60 "$W/cputests.txt" bash tests/run.sh kernels
    fi
fi

# ---------------------------------------------------------------- the GPU phases
KT=$W/kernels.txt
TRAIN_LOGS=$W/train-logs
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
if [ "$REHEARSE" = 1 ]; then
    DEVENV="MYRIAD_TEST_DEVICE=cpu MYRIAD_DEVICE_GUARD=1" DEV=cpu
    KBIN=build/tests/test_kernels_cuda_emu # the same test on the emulated device (the real one skips)
else
    DEVENV="MYRIAD_TEST_DEVICE=cuda" DEV=cuda KBIN=build/tests/test_kernels_cuda
fi
export SAN KBIN

smoke() {
    set -x
    bin/myriad --version || return 1
    if [ "$REHEARSE" = 1 ]; then MYRIAD_DEVICE_GUARD=1 bin/myriad doctor --reps 2 --gemm-n 128 --triad-mb 8 || return 1
    else bin/myriad doctor --device cuda --reps 2 --out "$RESULT_DIR/doctor.json" || return 1; fi
    local F=tests/fixtures/gpt2-tiny
    env $DEVENV bin/myriad train --init $F --data $F/tokens.bin --batch 2 --seq 8 --steps 3 --device $DEV --dtype bf16
}
# one case a process, with CUDA_LAUNCH_BLOCKING=1: a device fault then stops at its own kernel's launch
rerun_cases() { # CASE...
    local c rc
    for c in "$@"; do
        echo "# rerun $c alone with CUDA_LAUNCH_BLOCKING=1"
        CUDA_LAUNCH_BLOCKING=1 timeout -k 5 60 $KBIN "$c" >"$W/case.txt" 2>&1
        rc=$?
        sed 's/^\(ok\|FAIL\|skip\) /rerun-\1 /' "$W/case.txt"
        grep -qE "^(ok|FAIL|skip) $c( |\$)" "$W/case.txt" ||
            echo "rerun-FAIL $c (exit $rc before reporting: $(grep -v '^  ' "$W/case.txt" | grep -v '^\s*$' | tail -1 | cut -c1-300))"
    done
}
kernels() {
    $KBIN >"$KT.main" 2>&1
    local rc=$? cases again
    cat "$KT.main"
    [ "$REHEARSE" = 1 ] && build/tests/test_kernels_cuda 2>&1 | sed 's/^/device test: /' # every case skips: no device
    cases=$(grep -o 'CASE(test_[a-z0-9_]*)' tests/test_kernels_cuda.c | sed 's/CASE(\(.*\))/\1/')
    again=$(for c in $cases; do grep -qE "^(ok|skip) $c( |\$)" "$KT.main" || echo $c; done)
    [ "$REHEARSE" = 1 ] && [ -z "$again" ] && again=test_memory # exercise the rerun on the CPU
    [ -n "$again" ] && rerun_cases $again
    return $rc
}
sanitize() { # TOOL
    MYRIAD_TEST_SMALL=1 "$SAN" --tool "$1" --error-exitcode 9 build/tests/test_kernels_cuda
}
nccl() {
    env $DEVENV CUDA_TRAIN_PART=nccl CUDA_TRAIN_LOGS="$TRAIN_LOGS" bash tests/test_cuda_train.sh
    if bin/myriad bench comm --help 2>&1 | grep -qE -- '--comm[ =][^ ]*nccl'; then
        mpirun --oversubscribe --bind-to none -np 1 bin/myriad bench comm --comm nccl -c all -b 8 -e 256M -f 8 -n 5 -w 2 &&
            echo "ok bench_comm_nccl" || echo "FAIL bench_comm_nccl"
    else
        echo "skip bench_comm_nccl (bin/myriad bench comm has no --comm nccl yet)"
    fi
}
export -f smoke rerun_cases kernels sanitize nccl
export REHEARSE DEVENV DEV RESULT_DIR W KT TRAIN_LOGS

if [ $build_ok -eq 0 ]; then
    run_phase smoke 10 "$W/smoke.txt" bash -c smoke
    run_phase kernels 15 "$KT" bash -c kernels
    for tool in memcheck racecheck synccheck; do
        if [ "$REHEARSE" = 1 ] || [ -z "$SAN" ]; then
            phase_row $tool skipped 0 "$([ -z "$SAN" ] && echo "no compute-sanitizer on this machine; " )on the GPU: MYRIAD_TEST_SMALL=1 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_kernels_cuda"
            [ -n "$SAN" ] && [ "$REHEARSE" = 1 ] && run_phase $tool 10 "$W/san-$tool.txt" bash -c "sanitize $tool"
            continue
        fi
        run_phase $tool 10 "$W/san-$tool.txt" bash -c "sanitize $tool"
        if grep -qiE "device not supported|not supported on this" "$W/san-$tool.txt"; then
            unset 'PHASES[${#PHASES[@]}-1]'
            phase_row $tool "unsupported" 0 "compute-sanitizer does not support this device here ($(grep -m1 -iE 'not supported' "$W/san-$tool.txt" | cut -c1-100))"
        fi
        { echo "== $tool"; cat "$W/san-$tool.txt"; } >>"$W/sanitizer.txt"
    done
    run_phase fixtures 10 "$W/train-fixtures.txt" env $DEVENV CUDA_TRAIN_PART=fixtures CUDA_TRAIN_LOGS="$TRAIN_LOGS" bash tests/test_cuda_train.sh
    run_phase training 15 "$W/train-parallel.txt" env $DEVENV CUDA_TRAIN_PART=parallel CUDA_TRAIN_LOGS="$TRAIN_LOGS" bash tests/test_cuda_train.sh
    cat "$W/train-fixtures.txt" "$W/train-parallel.txt" >"$W/train.txt" 2>/dev/null
    run_phase nccl 5 "$W/nccl.txt" bash -c nccl
    bench_env="MYRIAD_PY=$MYRIAD_PYTHON PY=$PY STEPS=20 WARMUP=3"
    # the rehearsal's PyTorch (Debian's) loads libraries hidden here: it takes them from the prefix
    [ "$REHEARSE" = 1 ] && bench_env="MYRIAD_PY=$MYRIAD_PYTHON PY=$PY REHEARSE=1 STEPS=3 WARMUP=1 TORCH_KEEP_LIBPATH=1
        LD_LIBRARY_PATH=$REHEARSE_TORCH_LIBPATH"
    : >"$W/bench.jsonl"
    run_phase "bench gpt2-124m" 30 "$W/bench_gpt2.txt" env $bench_env MODELS=gpt2 bash bench/gpu_bench.sh "$W/bench.jsonl"
    run_phase "bench llama-1.1b" 40 "$W/bench_llama.txt" env $bench_env MODELS=llama bash bench/gpu_bench.sh "$W/bench.jsonl"
else
    phase_row "(GPU phases)" "not run" 0 "the build failed (Build errors below)"
fi

# ---------------------------------------------------------------- sim probe: PyTorch alone, in the time left
probe_budget=$(( END - $(date +%s) - 25 )) # 25 s for torch's import and the last measurement
[ $probe_budget -gt 75 ] && probe_budget=75
rm -f "$RESULT_DIR/sim_probe.md" "$RESULT_DIR/sim_probe.jsonl" # a report must not show an older run's
if [ $probe_budget -lt 15 ]; then
    phase_row "sim probe" "skipped: no time" 0 "runs only in what the budgeted phases left"
else
    probe_args="--out $RESULT_DIR --budget $probe_budget" probe_env="-u LD_LIBRARY_PATH -u OPAL_PREFIX"
    [ "$REHEARSE" = 1 ] && probe_args="$probe_args --small" probe_env="LD_LIBRARY_PATH=${REHEARSE_TORCH_LIBPATH:-$LD_LIBRARY_PATH}"
    run_phase "sim probe" 15 "$W/sim_probe.txt" env $probe_env "$PY" bench/gpu_sim_probe.py $probe_args
fi

summary
exit $FAILED
