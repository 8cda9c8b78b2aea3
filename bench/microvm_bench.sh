#!/usr/bin/env bash
# microVM boot to exit: `/bin/true` through `warden run --backend microvm` (a QEMU microvm booting
# its own kernel; TCG where KVM does not work), with bare exec and `warden run` (native) in the same
# run for scale. Figures: bench/README.md, "microvm".
# usage: bench/microvm_bench.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-10}
WARDEN="$BUILD/src/cli/warden"
[ -x "$WARDEN" ] || { echo "microvm_bench: no $WARDEN: build the warden target first" >&2; exit 1; }
if ! "$WARDEN" run --backend microvm -- /bin/true; then
  echo "microvm_bench: warden run --backend microvm failed (qemu or the guest kernel missing? scripts/install-microvm.sh)" >&2
  exit 1
fi
ACCEL="$("$WARDEN" run --backend microvm --json - -- /bin/true 2>&1 >/dev/null | grep -o 'microvm: [a-z]*' | head -1)"
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
hyperfine -N --warmup 1 --runs "$ROUNDS" --export-json "$OUT" \
  -n bare /bin/true \
  -n native "$WARDEN run -- /bin/true" \
  -n microvm "$WARDEN run --backend microvm -- /bin/true" >/dev/null
python3 - "$OUT" "$ACCEL" <<'PY'
import json, statistics, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
print(f"accelerator: {sys.argv[2] or 'unknown'}; load average: {open('/proc/loadavg').read().split()[0]}")
print("| launcher | median (ms) | min (ms) | max (ms) |")
print("|---|---|---|---|")
for name in ("bare", "native", "microvm"):
    t = res[name]["times"]
    print(f"| {name} | {statistics.median(t) * 1000:.1f} | {min(t) * 1000:.1f} | {max(t) * 1000:.1f} |")
PY
