#!/usr/bin/env bash
# Runs warden's benchmarks (figures and how to read them: bench/README.md).
# usage: bench/run.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-200}
cmake --build "$BUILD" --target gvisor_bench startup_bench egress_bench policy_bench audit_bench gateway_bench >/dev/null
echo "== sandbox start-up: warden run against bare exec, unshare and bubblewrap =="
"$BUILD/bench/startup_bench" "$ROUNDS"
echo
echo "== pre-warmed pools: /bin/true through warden run --pool and in-process against cold and bare =="
cmake --build "$BUILD" --target pool_bench >/dev/null
"$BUILD/bench/pool_bench" "$ROUNDS"
echo
echo "== egress proxy: throughput and added latency against direct =="
"$BUILD/bench/egress_bench"
echo
echo "== policy decisions with 1,000 rules =="
"$BUILD/bench/policy_bench" --benchmark_min_time=0.5
echo
echo "== audit appends (on /var/tmp: /tmp may be tmpfs, where fsync is free) =="
WARDEN_BENCH_DIR=/var/tmp "$BUILD/bench/audit_bench"
echo
echo "== gateway: a tools/call through warden serve against direct, supergateway and mcp-proxy =="
WARDEN_BENCH_DIR=/var/tmp "$BUILD/bench/gateway_bench"
echo
echo "== microvm: /bin/true boot to exit through warden run --backend microvm (TCG where KVM does not work) =="
bench/microvm_bench.sh "$BUILD" 10
echo
echo "== gVisor: /bin/true through warden run --backend gvisor against bare runsc =="
"$BUILD/bench/gvisor_bench" 40
