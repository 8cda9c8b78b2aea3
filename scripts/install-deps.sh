#!/usr/bin/env bash
# Installs every Debian package warden's build, tests and benchmarks need.
# Idempotent: quiet and fast when everything is already present.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config
  # the linker for the executables (cmake/WardenBuildTime.cmake): about half of GNU ld's link time
  lld
  # libraries
  libseccomp-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev
  libboost1.81-dev libssl-dev libsqlite3-dev libre2-dev
  # registrable domains (the first_domain detector): libpsl and the public suffix list it reads
  libpsl-dev publicsuffix
  libgtest-dev libgmock-dev libbenchmark-dev
  # the fuzz targets (scripts/fuzz.sh): clang and its libFuzzer and sanitizer runtimes
  clang libclang-rt-14-dev
  # tests and benchmarks: real peers and tools the tests drive
  python3 curl iproute2 util-linux bubblewrap hyperfine procps
  # the outside audit verifier (tests/audit/verify_proof.py) checks Ed25519 signatures with the openssl command
  openssl
  # --backend microvm: QEMU's microvm machine; xz unpacks its kernel (scripts/install-microvm.sh)
  qemu-system-x86 xz-utils
  # --backend gvisor: gVisor's OCI runtime (docs/backends.md)
  runsc
  # the e2e tests: the official MCP SDK and reference servers run on Node.js (scripts/install-node-deps.sh)
  nodejs
  # the console's browser tests (tests/e2e/console.test.mjs): headless Chromium driven by playwright-core
  chromium
  # /metrics is checked by promtool, Prometheus's own parser and linter (tests/e2e/metrics.test.mjs);
  # the server in the package is never started (see below)
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's nodejs comes without npm (a separate package); NodeSource's nodejs bundles it.
command -v npm >/dev/null 2>&1 || dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q 'install ok installed' || missing+=(npm)
node_deps() {  # tests/e2e: MCP SDK, reference servers, conformance suite (after node is there)
  "$(dirname "${BASH_SOURCE[0]}")/install-node-deps.sh"
  "$(dirname "${BASH_SOURCE[0]}")/install-microvm.sh"  # the microvm backend's guest kernel
}
if [ ${#missing[@]} -eq 0 ]; then node_deps; exit 0; fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root (or with sudo)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packages with a daemon (prometheus) must not start it here: a policy-rc.d that refuses every
# start for the install, unless the machine has one of its own.
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  guard=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\n# install-deps.sh: no service starts while it installs\nexit 101\n' > "$guard"
  chmod 0755 "$guard"
  trap 'rm -f "$guard"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
node_deps
