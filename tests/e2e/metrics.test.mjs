// /metrics end to end (docs/monitoring.md): calls through `warden serve` from the official MCP
// SDK client, then the endpoint scraped, checked by Prometheus's own parser and linter (promtool
// check metrics, Debian's prometheus package) and read by a text-format parser from npm
// (parse-prometheus-text-format; it flattens labelled histograms, so their lines are read from
// the text). The figures must say what happened: allowed and denied calls by tenant, agent, tool
// and decision, a histogram per stage, a kill switch in force, a sandbox run and its end; and a
// browser page or a scraper off this host without the policy's key gets nothing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import {
  FIXTURES, NODE, connectHttp, makeApiKey, resultText, runWarden, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

let tmp, db, warden, client;
const metricsKey = makeApiKey();

const POLICY = `version: 1
upstreams:
  tools:
    command: ["${NODE}", "${join(FIXTURES, 'tool-server.mjs')}"]
tools:
  - match: { tool: tools__add, args: { "/a": { min: 100 } } }
    effect: deny
  - match: { tool: "tools__*" }
    risk: low
  - match: { tool: sandbox__exec }
    risk: low
monitoring:
  metrics:
    keys: ["${metricsKey.hash}"]
  logs: { format: json, arguments: true }
`;

before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'warden.db');
  const policyFile = writeFile(tmp.dir, 'policy.yaml', POLICY);
  warden = await startServe(['--config', policyFile, '--audit-db', db]);
  ({ client } = await connectHttp(warden.url));
});
after(async () => {
  await client?.close();
  await warden?.stop();
  tmp?.cleanup();
});

const metricsUrl = () => new URL('/metrics', warden.url).toString();

async function scrape(url = metricsUrl(), headers = {}) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  // Prometheus's parser and its linter (names, suffixes, help texts): no complaint at all.
  const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.ifError(promtool.error);
  assert.equal(promtool.status, 0, `promtool check metrics: ${promtool.stdout}${promtool.stderr}\n${text}`);
  const families = new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
  return { text, families };
}

// A histogram series read from the text: {count, sum, buckets: {le: count}}.
function histogram(text, name, labels = {}) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const out = { buckets: {} };
  for (const line of text.split('\n')) {
    const m = /^(\w+?)(_bucket|_sum|_count)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const inner = m[3] ?? '';
    if (!want.every((w) => inner.split(',').includes(w))) continue;
    if (m[2] === '_bucket') out.buckets[/le="([^"]+)"/.exec(inner)[1]] = Number(m[4]);
    else out[m[2].slice(1)] = Number(m[4]);
  }
  return out;
}

// The value of the sample of `name` whose labels include `labels`, or undefined.
function sample(families, name, labels = {}) {
  const family = families.get(name);
  if (!family) return undefined;
  const hit = family.metrics.find((m) => Object.entries(labels).every(([k, v]) => (m.labels ?? {})[k] === v));
  if (!hit) return undefined;
  return hit.value !== undefined ? Number(hit.value) : hit;
}

test('calls, stages, kill switches and sandbox runs are in /metrics as a real parser reads them', { timeout: 90000 }, async () => {
  for (const text of ['one', 'two', 'three']) {
    const r = await client.callTool({ name: 'tools__echo', arguments: { text } });
    assert.equal(resultText(r), text);
  }
  const denied = await client.callTool({ name: 'tools__add', arguments: { a: 1000, b: 2 } });
  assert.ok(denied.isError, resultText(denied));
  const exec = await client.callTool({ name: 'sandbox__exec', arguments: { command: 'echo hi' } });
  assert.ok(!exec.isError, resultText(exec));
  const kill = runWarden(['kill', 'tool', 'tools__nothing', '--db', db, '--reason', 'e2e']);
  assert.equal(kill.status, 0, kill.stdout + kill.stderr);

  // The kill switch reaches the gateway within a second (it polls the store); a loaded machine
  // gets ten.
  let families, text;
  for (let i = 0; i < 100; i++) {
    ({ families, text } = await scrape());
    if (sample(families, 'warden_kill_switches_active', { scope: 'tool' }) === 1) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const calls = (tool, decision) => sample(families, 'warden_tool_calls_total', { tool, decision });
  assert.equal(calls('tools__echo', 'allow'), 3, warden.stderr());
  assert.equal(calls('tools__add', 'deny'), 1);
  assert.equal(calls('sandbox__exec', 'allow'), 1);
  assert.equal(families.get('warden_tool_calls_total').type, 'COUNTER');

  // Every stage has a histogram; the policy stage ran for every call.
  assert.equal(families.get('warden_stage_duration_seconds').type, 'HISTOGRAM');
  const policyStage = histogram(text, 'warden_stage_duration_seconds', { stage: 'policy' });
  assert.ok(policyStage.count >= 5, JSON.stringify(policyStage));
  assert.equal(policyStage.buckets['+Inf'], policyStage.count);
  assert.ok(policyStage.buckets['0.001'] <= policyStage.buckets['+Inf']);
  for (const name of ['identity', 'kill_switches', 'policy', 'execute', 'audit', 'monitor'])
    assert.ok(histogram(text, 'warden_stage_duration_seconds', { stage: name }).count > 0, `stage ${name} in /metrics`);
  assert.ok(histogram(text, 'warden_audit_write_seconds').count >= 5);
  assert.ok(histogram(text, 'warden_tool_call_duration_seconds', { decision: 'allow' }).count >= 4);

  assert.equal(sample(families, 'warden_kill_switches_active', { scope: 'tool' }), 1);
  assert.equal(sample(families, 'warden_kill_switches_active', { scope: 'agent' }), 0);
  assert.equal(sample(families, 'warden_sandbox_starts_total', { backend: 'native' }), 1);
  assert.equal(sample(families, 'warden_sandbox_runs_total', { backend: 'native', reason: 'exited' }), 1);
  assert.equal(sample(families, 'warden_approvals_pending'), 0);
  assert.ok(sample(families, 'warden_sessions_open') >= 1);
  assert.equal(sample(families, 'warden_upstream_instances', { upstream: 'tools' }), 1);
});

test('with monitoring.logs, each call is a JSON line on stderr naming its audit entry', { timeout: 30000 }, async () => {
  const r = await client.callTool({ name: 'tools__echo', arguments: { text: 'logged', api_key: 'sk-live-not-for-logs' } });
  assert.ok(!r.isError, resultText(r));
  const lines = warden.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const line = lines.find((l) => l['gen_ai.tool.name'] === 'tools__echo' && l['gen_ai.tool.call.arguments']?.text === 'logged');
  assert.ok(line, warden.stderr());
  assert.equal(line['gen_ai.operation.name'], 'execute_tool');
  assert.equal(line['mcp.method.name'], 'tools/call');
  assert.equal(line['warden.decision'], 'allow');
  assert.ok(line['mcp.session.id'], 'the MCP session is named');
  assert.ok(Number.isInteger(line['warden.audit.id']));
  assert.ok(!JSON.stringify(line).includes('sk-live-not-for-logs'), 'the key is redacted as in the audit log');
  const prove = runWarden(['audit', 'prove', String(line['warden.audit.id']), '--db', db]);
  assert.equal(prove.status, 0, prove.stdout + prove.stderr);
});

test('a tool name the agent invents does not grow /metrics past its limit', { timeout: 90000 }, async () => {
  // 80 unknown tools: refused, and counted under their own names only up to the per-tenant
  // limit (64), the rest as "other".
  for (let i = 0; i < 80; i++) {
    await client.callTool({ name: `made_up_${i}`, arguments: {} }).catch(() => {});
  }
  const { families } = await scrape();
  const series = families.get('warden_tool_calls_total').metrics;
  const madeUp = series.filter((m) => m.labels.tool.startsWith('made_up_'));
  assert.ok(madeUp.length <= 64, `${madeUp.length} series of invented names`);
  const other = series.find((m) => m.labels.tool === 'other');
  assert.ok(other, 'the names past the limit are counted as other');
  const total = series.filter((m) => m.labels.tool === 'other' || m.labels.tool.startsWith('made_up_'))
    .reduce((n, m) => n + Number(m.value), 0);
  assert.equal(total, 80, 'every refused call is still counted');
});

test('a browser page gets nothing; a method other than GET is refused', { timeout: 30000 }, async () => {
  const page = await fetch(metricsUrl(), { headers: { Origin: 'http://127.0.0.1:9' } });
  assert.equal(page.status, 403, await page.text());
  const post = await fetch(metricsUrl(), { method: 'POST', body: '' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET');
});

// A scraper on another host: warden listening on this machine's own non-loopback address, so the
// peer is not loopback. Machines without such an address cannot try it (said in the output).
const outside = Object.values(networkInterfaces()).flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;

test('off this host, /metrics needs the policy\'s metrics key, and only that key', { timeout: 60000, skip: outside ? false : 'no non-loopback IPv4 address on this machine' }, async () => {
  const agentKey = makeApiKey();
  const policyFile = writeFile(tmp.dir, 'outside.yaml', `version: 1
identity:
  tenants:
    acme:
      users: { alice: {} }
      agents:
        bot: { user: alice, keys: ["${agentKey.hash}"] }
monitoring:
  metrics:
    keys: ["${metricsKey.hash}"]
`);
  const far = await startServe(['--config', policyFile, '--audit-db', join(tmp.dir, 'outside.db'), '--listen', `${outside}:0`]);
  try {
    const url = new URL('/metrics', far.url).toString();
    const none = await fetch(url);
    assert.equal(none.status, 401, await none.text());
    assert.match(none.headers.get('www-authenticate'), /^Bearer/);
    const wrong = await fetch(url, { headers: { Authorization: `Bearer ${makeApiKey().key}` } });
    assert.equal(wrong.status, 401);
    // An agent's key is for calls, not for metrics.
    const agent = await fetch(url, { headers: { Authorization: `Bearer ${agentKey.key}` } });
    assert.equal(agent.status, 401);
    const { families } = await scrape(url, { Authorization: `Bearer ${metricsKey.key}` });
    assert.ok(families.has('warden_tool_calls_total'));
    assert.ok(families.has('warden_stage_duration_seconds'));
  } finally {
    await far.stop();
  }
});
