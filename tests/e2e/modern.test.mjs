// MCP 2026-07-28 clients against `warden serve` (docs/requests.md), beside 2025 clients on the
// same running gateway: the official TypeScript SDK v2 client (@modelcontextprotocol/client
// 2.4.0) pinned to 2026-07-28, raw stateless requests for what a well-behaved client never sends
// (a tampered, replayed or foreign requestState), and the SDK 1.x client in a 2025 session.
// Upstreams: fixtures/tool-server.mjs --record (`echo` is high risk: ask, self_approve) and
// fixtures/mail-server.mjs (the trifecta's labels).
//
// What holds: an in-band approval reaches the 2026 client as input_required showing the exact
// call, and its yes (an SDK elicitation handler) runs the call once; warden's requestState is
// refused when altered, replayed or used by another principal, and nothing runs; trifecta legs
// are carried by the task (`_meta["warden/task"]`) across requests that share no connection; a
// task kill switch stops the task's calls and nobody else's; the same flows work in a 2025
// session on the same gateway.
import assert from 'node:assert/strict';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { writeFileSync } from 'node:fs';
import {
  FIXTURES, NODE, auditEntries, connectHttp, makeApiKey, resultText, runWarden, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

const TOOLS = join(FIXTURES, 'tool-server.mjs');
const MAIL = join(FIXTURES, 'mail-server.mjs');
const alice = makeApiKey();
const mallory = makeApiKey();

const POLICY = `version: 1
upstreams:
  tools:
    command: ["${NODE}", "${TOOLS}", "--record"]
  mail:
    command: ["${NODE}", "${MAIL}"]
  rug:
    command: ["${NODE}", "${TOOLS}", "DESCRIPTION_FILE"]
identity:
  tenants:
    acme:
      users:
        alice: { keys: ["${alice.hash}"] }
        mallory: { keys: ["${mallory.hash}"] }
tools:
  - match: { tool: tools__echo }
    risk: high
  - match: { tool: mail__list_inbox }
    risk: low
    private_output: [""]
    untrusted_output: ["/messages/*/subject", "/messages/*/body"]
  - match: { tool: mail__read_doc }
    risk: low
    labels: [private_output]
  - match: { tool: mail__send_email }
    risk: low
    labels: [external_send]
    destinations: ["/to"]
defaults:
  effect_by_risk: { low: allow, medium: allow, high: ask }
approvals:
  self_approve: true
trifecta: { effect: deny }
`;

let tmp, db, warden, description;
before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'warden.db');
  description = writeFile(tmp.dir, 'description.txt', 'Returns the text it is given.');
  const policy = writeFile(tmp.dir, 'policy.yaml', POLICY.replace('DESCRIPTION_FILE', description));
  warden = await startServe(['--config', policy, '--audit-db', db]);
});
after(async () => {
  await warden?.stop();
  tmp?.cleanup();
});

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
};

// One stateless request on a connection of its own (agent: false): nothing ties two requests
// but what they carry.
function raw(key, method, params, id = 1) {
  const body = JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...META, ...(params._meta ?? {}) } } });
  const url = new URL(warden.url);
  const headers = {
    'content-type': 'application/json', accept: 'application/json, text/event-stream',
    authorization: `Bearer ${key}`, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method,
    connection: 'close',
  };
  if (params.name) headers['mcp-name'] = params.name;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        // JSON, or an SSE stream whose last data line is the answer.
        const data = res.headers['content-type']?.startsWith('text/event-stream')
          ? text.split('\n').filter((l) => l.startsWith('data: ') && l.length > 6).map((l) => l.slice(6)).pop()
          : text;
        resolve({ status: res.statusCode, body: JSON.parse(data) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function upstreamCalls(key) {
  const r = await raw(key, 'tools/call', { name: 'tools__calls', arguments: {} });
  return JSON.parse(r.body.result.content[0].text).filter((c) => c.name !== 'calls');
}

test('an in-band approval reaches the SDK v2 client as input_required and its yes runs the call once', { timeout: 60000 }, async () => {
  const client = new ClientV2({ name: 'modern-e2e', version: '1.0.0' }, {
    capabilities: { elicitation: {} },
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  });
  const asked = [];
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request.params.message);
    return { action: 'accept', content: { decision: 'approve' } };
  });
  await client.connect(new TransportV2(new URL(warden.url), { requestInit: { headers: { authorization: `Bearer ${alice.key}` } } }));
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'tools__echo'), JSON.stringify(tools.tools.map((t) => t.name)));
    const r = await client.callTool({ name: 'tools__echo', arguments: { text: 'pay 120 EUR to DE89 3704 0044 0532 0130 00' } });
    assert.equal(resultText(r), 'pay 120 EUR to DE89 3704 0044 0532 0130 00');
    assert.equal(asked.length, 1, 'asked once');
    assert.match(asked[0], /tools__echo/);
    assert.match(asked[0], /DE89 3704 0044 0532 0130 00/);
  } finally {
    await client.close();
  }
  const ran = (await upstreamCalls(alice.key)).filter((c) => c.arguments.text?.startsWith('pay 120'));
  assert.equal(ran.length, 1, 'ran once');
  const entry = auditEntries(db).find((e) => e.tool === 'tools__echo' && e.decision === 'allow');
  assert.ok(entry, 'no audited call');
  assert.equal(entry.session, '', 'a 2026 call has no protocol session');
});

test('a requestState altered, replayed or used by another principal is refused and runs nothing', { timeout: 60000 }, async () => {
  const call = { name: 'tools__echo', arguments: { text: 'wire 9000 EUR' } };
  const first = await raw(alice.key, 'tools/call', call);
  assert.equal(first.status, 200);
  assert.equal(first.body.result.resultType, 'input_required', JSON.stringify(first.body));
  const state = first.body.result.requestState;
  const key = Object.keys(first.body.result.inputRequests)[0];
  const yes = { [key]: { action: 'accept', content: { decision: 'approve' } } };
  const refused = async (who, params, why) => {
    const r = await raw(who, 'tools/call', params, 7);
    assert.equal(r.body.error?.code, -32602, JSON.stringify(r.body));
    assert.match(r.body.error.message, why);
    assert.equal(r.body.id, 7);
  };
  const flipped = state.slice(0, 20) + (state[20] === 'A' ? 'B' : 'A') + state.slice(21);
  await refused(alice.key, { ...call, requestState: flipped, inputResponses: yes }, /altered/);
  await refused(mallory.key, { ...call, requestState: state, inputResponses: yes }, /another caller/);
  await refused(alice.key, { ...call, arguments: { text: 'wire 90000 EUR' }, requestState: state, inputResponses: yes }, /another call/);
  assert.deepEqual((await upstreamCalls(alice.key)).filter((c) => c.arguments.text?.startsWith('wire')), [], 'a refused retry ran');
  const done = await raw(alice.key, 'tools/call', { ...call, requestState: state, inputResponses: yes });
  assert.equal(done.body.result?.content?.[0]?.text, 'wire 9000 EUR', JSON.stringify(done.body));
  await refused(alice.key, { ...call, requestState: state, inputResponses: yes }, /has ended|already used/);
  assert.equal((await upstreamCalls(alice.key)).filter((c) => c.arguments.text === 'wire 9000 EUR').length, 1);
  const audited = auditEntries(db).filter((e) => e.reason.includes('requestState refused'));
  assert.ok(audited.length >= 4, `refusals audited: ${audited.length}`);
});

test('trifecta legs are carried by the task across requests that share no connection', { timeout: 60000 }, async () => {
  const task = { 'warden/task': 'board-prep-2026' };
  assert.ok(!(await raw(alice.key, 'tools/call', { name: 'mail__list_inbox', arguments: {}, _meta: task })).body.result.isError);
  assert.ok(!(await raw(alice.key, 'tools/call', { name: 'mail__read_doc', arguments: { id: 'salaries' }, _meta: task })).body.result.isError);
  const leak = await raw(alice.key, 'tools/call', { name: 'mail__send_email', arguments: { to: 'payroll-audit@collector.example', body: 'x' }, _meta: task });
  assert.equal(leak.body.result.isError, true, JSON.stringify(leak.body));
  assert.match(leak.body.result.content[0].text, /trifecta/);
  // Another task of the same caller, and the same task id of another principal, hold nothing.
  const other = await raw(alice.key, 'tools/call', { name: 'mail__send_email', arguments: { to: 'payroll-audit@collector.example', body: 'x' }, _meta: { 'warden/task': 'other' } });
  assert.ok(other.body.result && !other.body.result.isError, JSON.stringify(other.body));
  const theirs = await raw(mallory.key, 'tools/call', { name: 'mail__send_email', arguments: { to: 'payroll-audit@collector.example', body: 'x' }, _meta: task });
  assert.ok(theirs.body.result && !theirs.body.result.isError, JSON.stringify(theirs.body));
});

test('a task kill switch stops the task\'s calls and nobody else\'s, in either era', { timeout: 60000 }, async () => {
  const task = { 'warden/task': 'incident-9' };
  const killed = runWarden(['kill', 'task', 'incident-9', '--db', db, '--reason', 'e2e: the task went rogue']);
  assert.equal(killed.status, 0, killed.stderr);
  const stopped = async () => {
    const r = await raw(alice.key, 'tools/call', { name: 'tools__add', arguments: { a: 1, b: 2 }, _meta: task });
    return r.body.result?.isError && /task:incident-9/.test(r.body.result.content[0].text);
  };
  // Switches reach a running gateway within a second.
  const deadline = Date.now() + 5000;
  while (!(await stopped()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.ok(await stopped(), 'the task switch did not stop the task');
  const free = await raw(alice.key, 'tools/call', { name: 'tools__add', arguments: { a: 1, b: 2 } });
  assert.equal(free.body.result.content[0].text, '3', JSON.stringify(free.body));
  // A 2025 session naming the task is stopped too; without it, it is not.
  const { client } = await connectHttp(warden.url, { headers: { authorization: `Bearer ${alice.key}` } });
  try {
    const inTask = await client.callTool({ name: 'tools__add', arguments: { a: 2, b: 2 }, _meta: task });
    assert.ok(inTask.isError && /task:incident-9/.test(resultText(inTask)), resultText(inTask));
    const plain = await client.callTool({ name: 'tools__add', arguments: { a: 2, b: 2 } });
    assert.equal(resultText(plain), '4');
  } finally {
    await client.close();
  }
  assert.equal(runWarden(['unkill', 'task', 'incident-9', '--db', db]).status, 0);
});

test('the SDK 1.x client in a 2025 session on the same gateway: in-band approval and the trifecta', { timeout: 60000 }, async () => {
  const { client } = await connectHttp(warden.url, { headers: { authorization: `Bearer ${alice.key}` } });
  client.setRequestHandler((await import('@modelcontextprotocol/sdk/types.js')).ElicitRequestSchema,
    async () => ({ action: 'accept', content: { decision: 'approve' } }));
  try {
    const r = await client.callTool({ name: 'tools__echo', arguments: { text: 'in a session' } });
    assert.equal(resultText(r), 'in a session');
    assert.ok(!(await client.callTool({ name: 'mail__list_inbox', arguments: {} })).isError);
    assert.ok(!(await client.callTool({ name: 'mail__read_doc', arguments: { id: 'salaries' } })).isError);
    const leak = await client.callTool({ name: 'mail__send_email', arguments: { to: 'payroll-audit@collector.example', body: 'x' } });
    assert.ok(leak.isError && /trifecta/.test(resultText(leak)), resultText(leak));
  } finally {
    await client.close();
  }
});

test('subscriptions/listen delivers the list changes a client opted in to, tagged, and nothing else', { timeout: 60000 }, async () => {
  const client = new ClientV2({ name: 'modern-listen', version: '1.0.0' }, {
    capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } },
  });
  const seen = [];
  client.setNotificationHandler('notifications/tools/list_changed', (n) => { seen.push(n); });
  await client.connect(new TransportV2(new URL(warden.url), { requestInit: { headers: { authorization: `Bearer ${alice.key}` } } }));
  try {
    await client.listTools();  // the context's upstreams are up and listed
    const tools = await client.listen({ toolsListChanged: true, resourceSubscriptions: ['test://x'] });
    assert.deepEqual(tools.honoredFilter, { toolsListChanged: true }, 'what warden does not honour is left out');
    // A second subscription, for prompts only: it must not hear of tools.
    const prompts = await client.listen({ promptsListChanged: true });
    writeFileSync(description, 'Returns the text it is given, changed.');
    const deadline = Date.now() + 10000;
    while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok(seen.length >= 1, 'no tools/list_changed on the listen stream');
    await new Promise((r) => setTimeout(r, 300));  // room for a wrong delivery to arrive
    const ids = new Set(seen.map((n) => JSON.stringify(n.params?._meta?.['io.modelcontextprotocol/subscriptionId'])));
    assert.equal(ids.size, 1, `tools changes reached ${[...ids].join(', ')}`);
    assert.ok(![...ids].includes(undefined), JSON.stringify(seen[0]));
    await tools.close();
    await prompts.close();
  } finally {
    await client.close();
  }
});
