#!/usr/bin/env bash
# Runs warden's benchmarks (figures and how to read them: bench/README.md).
# usage: bench/run.sh [BUILD_DIR] [ROUNDS]   (ROUNDS: start-up rounds, default 40)
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-40}
cmake --build "$BUILD" --target startup_bench egress_bench policy_bench audit_bench gateway_bench sessions_bench paused_calls_bench parked_calls_bench approvals_bench >/dev/null
echo "== sandbox start-up: cold, pooled, gvisor and microvm against bare exec, unshare, bubblewrap and runsc =="
"$BUILD/bench/startup_bench" "$ROUNDS"
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
echo "== gateway: a tools/call through warden serve (2025 session and 2026 stateless) against direct, supergateway and mcp-proxy =="
WARDEN_BENCH_DIR=/var/tmp "$BUILD/bench/gateway_bench"
echo
echo "== gateway sessions: memory and processes with many MCP sessions held, against supergateway =="
WARDEN_BENCH_DIR=/var/tmp "$BUILD/bench/sessions_bench"
echo
echo "== paused calls: memory per call held by a stage, and release-to-upstream latency =="
"$BUILD/bench/paused_calls_bench" 10000 10
echo
echo "== parked calls (MCP 2026-07-28): memory per call waiting for its retry, request state costs =="
"$BUILD/bench/parked_calls_bench" 10000 200
"$BUILD/bench/approvals_bench" 10000 10 50
