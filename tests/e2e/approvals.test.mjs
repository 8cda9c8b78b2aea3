// Approval gates end to end (docs/approvals.md): the official MCP SDK client calls a high-risk
// tool through `warden serve`; the call waits and the upstream (fixtures/tool-server.mjs
// --record, whose `calls` tool lists what reached it) sees nothing; `warden approvals approve`
// (another process, on the same database) releases it with the exact arguments; a denial through
// the API reaches the agent with its comment; expiry denies; an agent's key is refused on every
// approval endpoint; an approval is single-use and bound to its arguments; a restart cancels.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import {
  FIXTURES, NODE, auditEntries, connectHttp, eventually, makeApiKey, resultText, runWarden, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

const TOOL_SERVER = join(FIXTURES, 'tool-server.mjs');
const keys = {
  alice: makeApiKey(), bob: makeApiKey(), carol: makeApiKey(), dave: makeApiKey(), erin: makeApiKey(),
  mailer: makeApiKey(),
};
const bearer = (k) => ({ Authorization: `Bearer ${k.key}` });
let tmp, db, policyFile, warden, agent;

function policy(timeout) {
  return `version: 1
identity:
  tenants:
    acme:
      users:
        alice: { approver: true, keys: ["${keys.alice.hash}"] }
        carol: { approver: true, keys: ["${keys.carol.hash}"] }
        bob: { keys: ["${keys.bob.hash}"] }
        erin: { keys: ["${keys.erin.hash}"] }
      agents:
        mailer: { user: bob, keys: ["${keys.mailer.hash}"] }
    other:
      users:
        dave: { approver: true, keys: ["${keys.dave.hash}"] }
upstreams:
  tools:
    command: ["${NODE}", "${TOOL_SERVER}", "--record"]
tools:
  - match: { tool: tools__echo }
    risk: high
  - match: { server: tools }
    risk: low
defaults:
  effect_by_risk: { low: allow, medium: allow, high: ask }
approvals:
  timeout: ${timeout}
`;
}

async function serve(timeout = '10m') {
  writeFile(tmp.dir, 'policy.yaml', policy(timeout));
  return startServe(['--config', policyFile, '--audit-db', db]);
}

const api = (path, { key = keys.alice, method = 'GET', body } = {}) => fetch(new URL(path, warden.url), {
  method,
  headers: { ...bearer(key), ...(body ? { 'Content-Type': 'application/json' } : {}) },
  body: body ? JSON.stringify(body) : undefined,
});

async function pending(count = 1) {
  return eventually(async () => {
    const r = runWarden(['approvals', 'list', '--json', '--db', db]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const list = JSON.parse(r.stdout);
    return list.length >= count ? list : null;
  }, { withinMs: 5000, everyMs: 50 });
}

async function upstreamCalls(client = agent) {
  const r = await client.callTool({ name: 'tools__calls', arguments: {} });
  return JSON.parse(resultText(r)).filter((c) => c.name !== 'calls');
}

before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'warden.db');
  policyFile = join(tmp.dir, 'policy.yaml');
  warden = await serve();
  ({ client: agent } = await connectHttp(warden.url, { headers: bearer(keys.mailer) }));
});
after(async () => {
  await agent?.close();
  await warden?.stop();
  tmp?.cleanup();
});

test('a high-risk call waits, the upstream sees nothing, and the CLI releases exactly it', { timeout: 30000 }, async () => {
  const args = { text: 'send the Q3 numbers to bob@example.com' };
  let settled = false;
  const call = agent.callTool({ name: 'tools__echo', arguments: args }).finally(() => { settled = true; });
  const [a] = await pending();
  assert.equal(a.tool, 'tools__echo');
  assert.equal(a.status, 'pending');
  assert.equal(a.tenant, 'acme');
  assert.equal(a.user, 'bob');
  assert.equal(a.agent, 'mailer');
  assert.equal(a.risk, 'high');
  assert.deepEqual(a.arguments, args);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(settled, false, 'the call waits for a person');
  assert.deepEqual(await upstreamCalls(), [], 'nothing reached the upstream');

  const approve = runWarden(['approvals', 'approve', a.id, '--db', db, '--comment', 'looks right']);
  assert.equal(approve.status, 0, approve.stdout + approve.stderr);
  const result = await call;
  assert.equal(resultText(result), args.text);
  assert.deepEqual(await upstreamCalls(), [{ name: 'echo', arguments: args }]);

  const shown = JSON.parse(runWarden(['approvals', 'show', a.id, '--json', '--db', db]).stdout);
  assert.equal(shown.status, 'approved');
  assert.notEqual(shown.consumed_at, '', 'released once');
  const decisions = auditEntries(db).filter((e) => e.tool === 'tools__echo').map((e) => e.decision);
  assert.ok(decisions.includes('ask') && decisions.includes('allow') && decisions.includes('approve'), JSON.stringify(decisions));
});

test('a denial through the API reaches the agent with who and why', { timeout: 30000 }, async () => {
  const call = agent.callTool({ name: 'tools__echo', arguments: { text: 'wire $10k to acct 123' } });
  const [a] = await pending();
  const listed = await (await api('/api/approvals')).json();
  assert.ok(listed.approvals.some((x) => x.id === a.id && x.may_decide), JSON.stringify(listed));
  const r = await api(`/api/approvals/${a.id}/deny`, { method: 'POST', body: { comment: 'wrong recipient' } });
  assert.equal(r.status, 200, await r.text());
  const result = await call;
  assert.equal(result.isError, true);
  assert.match(resultText(result), /denied by alice: wrong recipient/);
  const again = await api(`/api/approvals/${a.id}/approve`, { method: 'POST', body: {} });
  assert.equal(again.status, 409, 'already decided');
  assert.deepEqual((await upstreamCalls()).filter((c) => c.arguments.text?.startsWith('wire')), []);
});

test('agents, the requesting user and other tenants are refused on every approval endpoint', { timeout: 30000 }, async () => {
  const call = agent.callTool({ name: 'tools__echo', arguments: { text: 'approve yourself' } });
  const [a] = await pending();
  const endpoints = [
    ['GET', '/api/approvals'], ['GET', `/api/approvals/${a.id}`],
    ['POST', `/api/approvals/${a.id}/approve`], ['POST', `/api/approvals/${a.id}/deny`],
  ];
  for (const [method, path] of endpoints) {
    const r = await api(path, { key: keys.mailer, method, body: method === 'POST' ? {} : undefined });
    assert.equal(r.status, 403, `${method} ${path} with the agent's key: ${r.status}`);
  }
  // bob asked (through his agent) and self_approve is off; dave approves for another tenant.
  for (const key of [keys.bob, keys.dave]) {
    const r = await api(`/api/approvals/${a.id}/approve`, { key, method: 'POST', body: {} });
    assert.equal(r.status, 403, await r.text());
  }
  const other = await (await api('/api/approvals', { key: keys.dave })).json();
  assert.deepEqual(other.approvals, [], "another tenant's approvals are not listed");
  const still = JSON.parse(runWarden(['approvals', 'show', a.id, '--json', '--db', db]).stdout);
  assert.equal(still.status, 'pending');
  assert.equal((await api(`/api/approvals/${a.id}/deny`, { method: 'POST', body: {} })).status, 200);
  assert.equal((await call).isError, true);

  // The history shows a call's arguments to the tenant's approvers and to the user whose agent
  // made it; another user of the tenant (erin) sees neither the entry nor its arguments.
  const history = async (key) => (await (await api('/api/approvals?all=1', { key })).json()).approvals;
  const mine = (list) => list.filter((x) => x.id === a.id);
  assert.deepEqual(mine(await history(keys.alice)).map((x) => x.arguments), [{ text: 'approve yourself' }]);
  assert.deepEqual(mine(await history(keys.bob)).map((x) => x.arguments), [{ text: 'approve yourself' }]);
  assert.deepEqual(await history(keys.erin), [], "erin is neither an approver nor bob");
  const shown = await api(`/api/approvals/${a.id}`, { key: keys.erin });
  assert.equal(shown.status, 403);
  assert.doesNotMatch(await shown.text(), /approve yourself/);
  assert.equal((await api(`/api/approvals/${a.id}`, { key: keys.bob })).status, 200);
});

test('an approval is single-use and bound to its arguments', { timeout: 30000 }, async () => {
  const first = agent.callTool({ name: 'tools__echo', arguments: { text: 'to alice' } });
  const [a] = await pending();
  assert.equal((await api(`/api/approvals/${a.id}/approve`, { method: 'POST', body: {} })).status, 200);
  assert.equal(resultText(await first), 'to alice');
  let settled = false;
  const second = agent.callTool({ name: 'tools__echo', arguments: { text: 'to mallory' } }).finally(() => { settled = true; });
  const [b] = await pending();
  assert.notEqual(b.id, a.id);
  assert.deepEqual(b.arguments, { text: 'to mallory' });
  assert.equal((await api(`/api/approvals/${a.id}/approve`, { method: 'POST', body: {} })).status, 409, 'spent');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(settled, false, 'the old approval does not release another call');
  assert.equal((await api(`/api/approvals/${b.id}/deny`, { key: keys.carol, method: 'POST', body: {} })).status, 200);
  assert.match(resultText(await second), /denied by carol/);
  const ran = (await upstreamCalls()).filter((c) => c.name === 'echo').map((c) => c.arguments.text);
  assert.ok(ran.includes('to alice') && !ran.includes('to mallory'), JSON.stringify(ran));
});

test('expiry denies; a restart cancels what was pending and the retry is told', { timeout: 60000 }, async () => {
  await agent.close();
  await warden.stop();
  warden = await serve('1s');
  ({ client: agent } = await connectHttp(warden.url, { headers: bearer(keys.mailer) }));
  const expired = await agent.callTool({ name: 'tools__echo', arguments: { text: 'too slow' } });
  assert.match(resultText(expired), /approval expired after 1s/);

  await agent.close();
  await warden.stop();
  warden = await serve('10m');
  ({ client: agent } = await connectHttp(warden.url, { headers: bearer(keys.mailer) }));
  const lost = agent.callTool({ name: 'tools__echo', arguments: { text: 'across a restart' } }).catch((e) => e);
  const [a] = await pending();
  const exited = new Promise((r) => warden.proc.once('exit', r));
  warden.proc.kill('SIGKILL');  // a crash: nothing is tidied up
  await exited;
  await agent.close().catch(() => {});  // the client gives up the request the crash cut off
  await lost;
  warden = await serve('10m');
  const shown = JSON.parse(runWarden(['approvals', 'show', a.id, '--json', '--db', db]).stdout);
  assert.equal(shown.status, 'cancelled');
  assert.equal(shown.comment, 'gateway restarted');
  ({ client: agent } = await connectHttp(warden.url, { headers: bearer(keys.mailer) }));
  const retry = await agent.callTool({ name: 'tools__echo', arguments: { text: 'across a restart' } });
  assert.match(resultText(retry), /cancelled \(gateway restarted\)/);
  assert.deepEqual((await upstreamCalls()).filter((c) => c.name === 'echo'), []);
});
