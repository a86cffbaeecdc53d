#!/usr/bin/env bash
# The cluster's fault scenarios, again and again, for a longer soak than
# CI's one pass: every test of t36 (faults under writers and linearizable
# readers, each DN's history checked), t37 (membership), t38 (reads) and
# t39 (a follower's full disk; root only), in release mode, until
# MINUTES have passed or a run fails.
#
#     scripts/cluster-soak.sh [MINUTES]     # default 60
#
# A failed run stops the soak; its test output is in
# target/soak/run-<n>.log, and the failing test's cluster directory
# (every node's config, data and serve.log) is kept where the output
# says ("cluster files kept in ...").
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-60}"
mkdir -p target/soak
cargo build --release --tests -p meridian >/dev/null
end=$(( $(date +%s) + minutes * 60 ))
run=0
while [ "$(date +%s)" -lt "$end" ]; do
    run=$((run + 1))
    log="target/soak/run-$run.log"
    if ! cargo test --release -p meridian \
        --test t36_cluster --test t37_cluster_membership \
        --test t38_cluster_reads --test t39_cluster_full_disk \
        >"$log" 2>&1; then
        echo "run $run failed: $log"
        grep -E "panicked|FAILED|kept in" "$log" | head -20
        exit 1
    fi
    echo "run $run passed ($(grep -c '\.\.\. ok' "$log") tests)"
done
echo "soak: $run runs in $minutes minutes, all passed"
