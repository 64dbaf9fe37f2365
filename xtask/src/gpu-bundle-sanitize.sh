#!/usr/bin/env bash
# The GPU tier under compute-sanitizer, written into gpu-bundle/ by `cargo
# xtask gpu-bundle`: every check of gpu-check (`gpu-check --list`) in its
# quick form, which runs every variant of every stock kernel at least once,
# under each tool (memcheck, racecheck, synccheck, initcheck), one process
# per tool and check so that each row of the table counts alone.
#   gpu-bundle/sanitize.sh
#   SANITIZE_TOOLS="racecheck" SANITIZE_CHECKS="gemm_wgmma_s8 tma" gpu-bundle/sanitize.sh
# (a subset, for a machine that limits how long one command runs). Logs and
# the table go to $OUT/sanitize (or gpu-bundle/logs/sanitize). The exit
# status is non-zero if any check failed or any tool reported an error; a
# check that ran nothing on this GPU (the Hopper proofs elsewhere) is listed
# as not run, never as passed.
set -uo pipefail

bundle=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$bundle/logs}/sanitize
mkdir -p "$out"
if [ ! -x "$bundle/gpu-check" ]; then
    echo "no $bundle/gpu-check: unpack the binaries first (tar -xzf $bundle/binaries.tar.gz -C $bundle, as run.sh does)" >&2
    exit 1
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
tools=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}
checks=${SANITIZE_CHECKS:-$("$bundle/gpu-check" --list)}

table="$out/table.txt"
printf '%-10s %-18s %7s %7s %7s  %s\n' tool check passed failed errors result | tee "$table"
failed=0
not_run=0
for tool in $tools; do
    for check in $checks; do
        log="$out/$tool-$check.log"
        "$sanitizer" --tool "$tool" --error-exitcode 3 "$bundle/gpu-check" --quick --only "$check" >"$log" 2>&1
        status=$?
        # gpu-check ends with "N passed, M failed"; the tool with
        # "ERROR SUMMARY: E errors" (racecheck: "RACECHECK SUMMARY: H hazards
        # displayed (E errors, W warnings)").
        counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
        passed=$(echo "$counts" | sed -E 's/^([0-9]+) passed.*/\1/')
        fails=$(echo "$counts" | sed -E 's/.* ([0-9]+) failed.*/\1/')
        errors=$(grep -oE '(ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard)' "$log" | tail -n 1 | grep -oE '[0-9]+')
        passed=${passed:-?} fails=${fails:-?} errors=${errors:-?}
        if [ "$status" -eq 0 ] && [ "$passed" = 0 ] && [ "$fails" = 0 ]; then
            result="not run (nothing of it applies on this GPU)"
            not_run=$((not_run + 1))
        elif [ "$status" -eq 0 ] && [ "$errors" = 0 ] && [ "$fails" = 0 ]; then
            result=ok
        else
            result="FAILED (exit $status; log $log)"
            failed=1
        fi
        printf '%-10s %-18s %7s %7s %7s  %s\n' "$tool" "$check" "$passed" "$fails" "$errors" "$result" | tee -a "$table"
    done
done
echo "sanitize: $([ "$failed" = 0 ] && echo 'no errors' || echo FAILED), $not_run not run; table in $table"
exit "$failed"
