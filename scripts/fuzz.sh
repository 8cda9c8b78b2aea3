#!/usr/bin/env bash
# Runs every libFuzzer target for a bounded time (docs/testing-fuzz.md). What `make fuzz` and
# `make test` run.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# SECONDS per target (default 15); TARGETs are names of tests/fuzz/corpus/ folders (default all).
# Builds build-fuzz/ with clang (-DWARDEN_FUZZ=ON: libFuzzer, ASan, UBSan), only the fuzz targets
# and the libraries they link, then fuzzes each target on a copy of its seed corpus (the checked-in
# corpus is never written to), FUZZ_JOBS (default 2) targets at a time. Fails when any target
# crashes, leaks, times out on an input or breaks an invariant; the input that did it is kept in
# build-fuzz/artifacts/TARGET/ and its log in build-fuzz/logs/TARGET.log.
# Environment: BUILD_FUZZ (build-fuzz), FUZZ_JOBS (2), JOBS (build jobs, nproc),
# FUZZ_RSS_MB (2048), FUZZ_TIMEOUT (10: seconds one input may take), FUZZ_CCACHE (1: compile
# through ccache, if installed; off by default).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-15}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
shift $(($# > 0 ? 1 : 0))
build=${BUILD_FUZZ:-build-fuzz}
fuzz_jobs=${FUZZ_JOBS:-2}
jobs=${JOBS:-$(nproc)}
corpus_root=tests/fuzz/corpus

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for dir in "$corpus_root"/*/; do targets+=("$(basename "$dir")"); done
fi
for t in "${targets[@]}"; do
  [ -d "$corpus_root/$t" ] || { echo "fuzz: no corpus $corpus_root/$t (unknown target $t)" >&2; exit 2; }
done

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

start=$(date +%s)
mkdir -p "$build"
# ccache only when asked (FUZZ_CCACHE=1): it is not a dependency of the project, and `make test`
# must take the same time on a clean CI machine as on one with a warm cache.
launcher=()
if [ "${FUZZ_CCACHE:-0}" = 1 ] && command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# -O1 and line tables only: they compile faster than -O2 -g, and stack traces still name lines.
CC=clang CXX=clang++ cmake -S . -B "$build" -DWARDEN_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" "${launcher[@]}" \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
build_targets=()
for t in "${targets[@]}"; do build_targets+=("${t}_fuzz"); done
if ! cmake --build "$build" -j "$jobs" --target "${build_targets[@]}" >"$build/build.log" 2>&1; then
  grep -E 'error|Error' "$build/build.log" | head -40 >&2
  echo "fuzz: build failed (log: $build/build.log)" >&2
  exit 1
fi
built=$(date +%s)
echo "fuzz: built ${#targets[@]} targets in $((built - start)) s; fuzzing each for ${seconds} s"

mkdir -p "$build/logs" "$build/artifacts" "$build/work"
# One target: fuzz a fresh copy of its corpus; the exit status is libFuzzer's.
run_one() {
  local t=$1
  local work="$build/work/$t"
  rm -rf "$work" "$build/artifacts/$t"
  mkdir -p "$work" "$build/artifacts/$t"
  cp -r "$corpus_root/$t" "$work/corpus"
  ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$build/fuzz/${t}_fuzz" -max_total_time="$seconds" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" \
    -timeout="${FUZZ_TIMEOUT:-10}" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" "$work/corpus" >"$build/logs/$t.log" 2>&1
}

declare -A status=()
running=()
for t in "${targets[@]}"; do
  run_one "$t" & running+=("$!:$t")
  if [ ${#running[@]} -ge "$fuzz_jobs" ]; then
    entry=${running[0]}; running=("${running[@]:1}")
    if wait "${entry%%:*}"; then status[${entry#*:}]=0; else status[${entry#*:}]=$?; fi
  fi
done
for entry in "${running[@]}"; do
  if wait "${entry%%:*}"; then status[${entry#*:}]=0; else status[${entry#*:}]=$?; fi
done

failed=0
for t in "${targets[@]}"; do
  log="$build/logs/$t.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  corp=$(grep -oE 'corp: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  if [ "${status[$t]}" -eq 0 ]; then
    printf 'fuzz: %-14s ok  %9s runs  cov %5s  corpus %4s -> %4s inputs\n' "$t" "${runs:-?}" \
      "${cov:-?}" "$(find "$corpus_root/$t" -type f | wc -l)" "$(find "$build/work/$t/corpus" -type f | wc -l)"
  else
    failed=1
    printf 'fuzz: %-14s FAIL  exit %s; input: %s; log: %s\n' "$t" "${status[$t]}" \
      "$(ls "$build/artifacts/$t" 2>/dev/null | head -1 | sed "s|^|$build/artifacts/$t/|")" "$log"
    grep -E 'ERROR|invariant broken|SUMMARY|Test unit written' "$log" | head -5 | sed 's/^/fuzz:     /'
  fi
done
echo "fuzz: done in $(($(date +%s) - start)) s"
fails=0
for t in "${targets[@]}"; do [ "${status[$t]}" -eq 0 ] || fails=$((fails + 1)); done
echo "fuzz: $((${#targets[@]} - fails)) passed, ${fails} failed"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a target failed; reproduce with $build/fuzz/TARGET_fuzz INPUT, then add the input to $corpus_root/TARGET/ with the fix" >&2
  exit 1
fi
