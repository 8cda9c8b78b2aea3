#!/usr/bin/env bash
# Runs warden's benchmarks. usage: bench/run.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-200}
cmake --build "$BUILD" --target startup_bench >/dev/null
"$BUILD/bench/startup_bench" "$ROUNDS"
