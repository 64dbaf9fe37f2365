#!/usr/bin/env bash
# The GPU tier, written into gpu-bundle/ by `cargo xtask gpu-bundle`. Run it
# on a machine with an NVIDIA GPU, from the repository root:
#   gpu-bundle/run.sh
# Every step runs even when an earlier one fails, so that all logs come back;
# the exit status is non-zero if any step failed. Logs go to $OUT (the
# device machine's return folder), or gpu-bundle/logs when OUT is unset.
set -uo pipefail

bundle=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$bundle/logs}
mkdir -p "$out"

# The binaries travel packed; unpack them beside this script (once). To run
# one alone: tar -xzf gpu-bundle/binaries.tar.gz -C gpu-bundle
if [ -f "$bundle/binaries.tar.gz" ]; then
    tar -xzf "$bundle/binaries.tar.gz" -C "$bundle" || { echo "could not unpack $bundle/binaries.tar.gz" >&2; exit 1; }
    rm "$bundle/binaries.tar.gz"
fi

# cuBLAS comes from the CUDA toolkit or from pip's nvidia-cublas-cu12; cudarc
# loads it (and libcuda) at run time through the loader path.
cublas_lib=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${cublas_lib:+:$cublas_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# pip_nvidia_lib FILE: the path of FILE in a pip wheel of NVIDIA's (PyTorch's
# dependencies install them under site-packages/nvidia), or nothing.
pip_nvidia_lib() {
    python3 -c '
import glob, os, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
found = [p for d in dirs for p in glob.glob(os.path.join(d, "nvidia", "**", sys.argv[1]), recursive=True)]
print(found[0] if found else "")' "$1" 2>/dev/null || true
}
# NCCL (the runtime's nccl tests, the multi-GPU example): pip's nvidia-nccl
# wheels ship libnccl.so.2 only, and cudarc opens libnccl.so.
nccl_so=$(pip_nvidia_lib libnccl.so.2)
if [ -n "$nccl_so" ]; then
    mkdir -p "$bundle/nccl"
    ln -sf "$nccl_so" "$bundle/nccl/libnccl.so"
    export LD_LIBRARY_PATH="$bundle/nccl:$LD_LIBRARY_PATH"
fi

# cuSPARSELt, the bench's sparse baseline, where a wheel has it.
if [ -z "${WARPFORGE_CUSPARSELT:-}" ]; then
    cusparselt_so=$(pip_nvidia_lib libcusparseLt.so.0)
    [ -n "$cusparselt_so" ] && export WARPFORGE_CUSPARSELT="$cusparselt_so"
fi

echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

steps=()
statuses=()
# run_step NAME COMMAND...: runs COMMAND, tees its output into $out/NAME.log.
# With RUN_STEPS set (names, comma-separated), only those steps run: the
# whole tier takes longer than one device call allows.
run_step() {
    local name=$1
    shift
    if [ -n "${RUN_STEPS:-}" ] && [[ ",$RUN_STEPS," != *",$name,"* ]]; then
        steps+=("$name")
        statuses+=("SKIPPED (not in RUN_STEPS)")
        return
    fi
    echo
    echo "==> $name: $*"
    "$@" 2>&1 | tee "$out/$name.log"
    local status=${PIPESTATUS[0]}
    steps+=("$name")
    case "$status" in
        0) statuses+=("ok") ;;
        # The house's exit status for "no GPU (or library) to run on": not a pass.
        2) statuses+=("NOT RUN (exit 2)") ;;
        *) statuses+=("FAILED (exit $status)") ;;
    esac
}

# skip_step NAME WHY: records a step that could not run, without failing the run.
skip_step() {
    echo
    echo "==> $1: SKIPPED: $2"
    steps+=("$1")
    statuses+=("SKIPPED ($2)")
}

# The crates' own GPU tests (ignored in the CPU tier), every test binary in turn.
run_gpu_tests() {
    local failed=0
    for t in "$bundle"/test-*; do
        echo "--- $(basename "$t")"
        "$t" --include-ignored --test-threads=1 || failed=1
    done
    return "$failed"
}

run_step gpu-tests run_gpu_tests
run_step gpu-check "$bundle/gpu-check"
# The WGSL variants through wgpu on the same GPU (needs a Vulkan loader and driver).
run_step gpu-check-wgpu "$bundle/gpu-check" --wgpu
# Every check (every variant at least once) under memcheck, racecheck,
# synccheck and initcheck, a table of the counts per tool and check.
run_step sanitize "$bundle/sanitize.sh"
run_step quickstart "$bundle/example-quickstart"
# warpforge's GEMM on candle's tensors and stream, checked against candle
# (examples/candle-interop). It links the CUDA 13 libraries of
# /usr/local/cuda/lib64; gpu-bundle leaves it out when it could not build it.
if [ -x "$bundle/candle-interop" ]; then
    run_step candle-interop "$bundle/candle-interop"
else
    skip_step candle-interop "not in the bundle: cargo xtask gpu-bundle's output says why"
fi
# Every GPU of the machine as NCCL ranks (one on a one-GPU machine), checked
# against one GPU; NVLink multicast off (the device machines' rule).
run_step multi-gpu env NCCL_NVLS_ENABLE=0 "$bundle/multi-gpu"
run_step bench "$bundle/bench" --out "$out/bench"
# The autotuner: tune the stock GEMMs into a fresh database and check each
# winner against an exhaustive sweep, then dispatch from that database in a
# second process that must tune nothing (and measure the dispatch overhead).
tune_dir=$(mktemp -d)
run_step tune env WARPFORGE_TUNE_DIR="$tune_dir" "$bundle/tune" --verify-exhaustive --report "$out/tune-report.json"
# Whole problems (NN with a bias and ReLU, column-major C; then 16 strided
# batches of 1024^3, a quarter of 4096^3 in all) in the families whose
# kernels take every layout of B and C, the sparse ones included.
forms_families=gemm_f32,gemm_f16,gemm_bf16,gemm_sparse_f16,gemm_sparse_bf16
run_step tune-forms env WARPFORGE_TUNE_DIR="$tune_dir" "$bundle/tune" --verify-exhaustive --families "$forms_families" --forms nn_bias_relu,col_c --shapes 4096x4096x4096,3001x2999x1000 --report "$out/tune-forms-report.json"
run_step tune-batched env WARPFORGE_TUNE_DIR="$tune_dir" "$bundle/tune" --verify-exhaustive --families "$forms_families" --forms batched --shapes 1024x1024x1024,1000x999x1000 --report "$out/tune-batched-report.json"
run_step tune-dispatch env WARPFORGE_TUNE_DIR="$tune_dir" "$bundle/tune" --dispatch --report "$out/tune-dispatch-report.json"
cp "$tune_dir"/*.json "$out/" 2>/dev/null
# A user's workspace (examples/tuned-user): its `cargo xtask tune` tunes the
# example's two kernels and the stock GEMMs into a fresh database, and a
# second process dispatches every call from it.
user_dir=$(mktemp -d)
run_step user-tune "$bundle/user-xtask" tune --db-dir "$user_dir" --report "$out/user-tune-report.json"
run_step user-dispatch "$bundle/user-xtask" tune --dispatch --db-dir "$user_dir" --report "$out/user-dispatch-report.json"

echo
echo "==> summary"
failed=0
for i in "${!steps[@]}"; do
    printf '%-10s %s\n' "${steps[$i]}" "${statuses[$i]}"
    case "${statuses[$i]}" in ok | SKIPPED*) ;; *) failed=1 ;; esac
done
exit "$failed"
