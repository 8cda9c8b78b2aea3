// warden serve with a policy that declares two tenants, each with an agent holding an API key:
// each key sees only its own tenant's tools, a session belongs to the key that opened it, and a
// request without a valid key is refused before MCP. The admin API is for people: alice's own key
// (keys: on the user) works there, her agent's is refused. A policy file without tenants on a
// loopback listener serves the one local user, as the embedded default does.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import {
  FIXTURES, NODE, connectHttp, eventually, makeApiKey, resultText, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

const TOOL_SERVER = join(FIXTURES, 'tool-server.mjs');
let tmp, warden;
const keyA = makeApiKey();
const keyB = makeApiKey();
const personA = makeApiKey(); // alice's own key: a person's
const bearer = (k) => ({ Authorization: `Bearer ${k.key}` });

const initialize = (id = 1) => JSON.stringify({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const post = (headers, body) => fetch(warden.url, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
  body,
});

before(async () => {
  tmp = tempDir();
  const policy = writeFile(tmp.dir, 'policy.yaml', `version: 1
identity:
  tenants:
    acme:
      users:
        alice: { approver: true, tools: ["alpha__*"], keys: ["${personA.hash}"] }
      agents:
        alice-bot: { user: alice, keys: ["${keyA.hash}"] }
    globex:
      users:
        bob: { tools: ["beta__*"] }
      agents:
        bob-bot: { user: bob, keys: ["${keyB.hash}"] }
upstreams:
  alpha:
    command: ${JSON.stringify([NODE, TOOL_SERVER])}
  beta:
    command: ${JSON.stringify([NODE, TOOL_SERVER])}
tools:
  - match: { tool: "alpha__*" }
    risk: low
  - match: { tool: "beta__*" }
    risk: low
`);
  warden = await startServe(['--config', policy, '--audit-db', join(tmp.dir, 'audit.db')]);
});
after(async () => {
  await warden?.stop();
  tmp?.cleanup();
});

test("tenant A's key lists and calls only tenant A's tools", { timeout: 30000 }, async () => {
  const { client } = await connectHttp(warden.url, { headers: bearer(keyA) });
  try {
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['alpha__add', 'alpha__echo'], `${names}\n${warden.stderr()}`);
    const r = await client.callTool({ name: 'alpha__add', arguments: { a: 20, b: 22 } });
    assert.equal(resultText(r), '42');
    // B's tool is hidden from A: answered exactly like a tool that does not exist.
    await assert.rejects(client.callTool({ name: 'beta__echo', arguments: { text: 'x' } }), (err) => err.code === -32602);
    await assert.rejects(client.callTool({ name: 'sandbox__exec', arguments: { command: 'true' } }), (err) => err.code === -32602);
  } finally {
    await client.close();
  }
});

test("tenant B's key lists only tenant B's tools", { timeout: 30000 }, async () => {
  const { client } = await connectHttp(warden.url, { headers: bearer(keyB) });
  try {
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['beta__add', 'beta__echo']);
  } finally {
    await client.close();
  }
});

test("session hijack: tenant B's key cannot use tenant A's session id (404)", { timeout: 30000 }, async () => {
  const { client, transport } = await connectHttp(warden.url, { headers: bearer(keyA) });
  try {
    const sessionA = transport.sessionId;
    assert.ok(sessionA);
    const hijack = await post({ ...bearer(keyB), 'Mcp-Session-Id': sessionA, 'MCP-Protocol-Version': '2025-06-18' },
      JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'alpha__echo', arguments: { text: 'stolen' } } }));
    assert.equal(hijack.status, 404, await hijack.text());
    const listen = await fetch(warden.url, { method: 'GET', headers: { ...bearer(keyB), Accept: 'text/event-stream', 'Mcp-Session-Id': sessionA } });
    assert.equal(listen.status, 404, 'nor open its server-to-client stream');
    await listen.body?.cancel();
    const end = await fetch(warden.url, { method: 'DELETE', headers: { ...bearer(keyB), 'Mcp-Session-Id': sessionA } });
    assert.equal(end.status, 404, 'nor end it');
    // A's session is untouched.
    assert.equal(resultText(await client.callTool({ name: 'alpha__echo', arguments: { text: 'still mine' } })), 'still mine');
  } finally {
    await client.close();
  }
});

test('no key, an unknown key, or a malformed header: 401 before any MCP', { timeout: 30000 }, async () => {
  for (const headers of [{}, { Authorization: 'Bearer wk_not_a_key' }, { Authorization: `Basic ${keyA.key}` }]) {
    const res = await post(headers, initialize());
    assert.equal(res.status, 401, `headers ${JSON.stringify(headers)}: ${await res.text()}`);
    assert.equal(res.headers.get('mcp-session-id'), null, 'no session is created');
  }
});

test('the SDK client without a key fails to connect', { timeout: 30000 }, async () => {
  await assert.rejects(connectHttp(warden.url), (err) => err.code === 401 && /missing credentials/.test(err.message));
});

test("the admin API: an approver's agent key is refused (403), her own key works", { timeout: 30000 }, async () => {
  const api = new URL('/api/kill', warden.url);
  const agent = await fetch(api, { headers: bearer(keyA) });
  assert.equal(agent.status, 403);
  assert.match((await agent.json()).error, /agent 'alice-bot' may not use the admin API.*keys:/);
  const kill = await fetch(api, {
    method: 'POST',
    headers: { ...bearer(keyA), 'Content-Type': 'application/json' },
    body: JSON.stringify({ scope: 'agent', name: 'alice-bot', reason: 'e2e' }),
  });
  assert.equal(kill.status, 403, await kill.text());

  const person = await fetch(api, { headers: bearer(personA) });
  const listed = await person.text();
  assert.equal(person.status, 200, listed);
  assert.deepEqual(JSON.parse(listed).switches, []);
});

test('a policy file without tenants on a loopback listener serves the local user without keys', { timeout: 30000 }, async () => {
  const dir = tempDir();
  const policy = writeFile(dir.dir, 'single.yaml', `version: 1
upstreams:
  alpha:
    command: ${JSON.stringify([NODE, TOOL_SERVER])}
tools:
  - match: { tool: "alpha__*" }
    risk: low
`);
  const local = await startServe(['--config', policy, '--audit-db', join(dir.dir, 'audit.db')]);
  try {
    assert.ok(await eventually(() => /serving one local user/.test(local.stderr())), local.stderr());
    const { client } = await connectHttp(local.url);
    try {
      assert.equal(resultText(await client.callTool({ name: 'alpha__add', arguments: { a: 1, b: 2 } })), '3');
    } finally {
      await client.close();
    }
    const listed = await fetch(new URL('/api/kill', local.url));
    assert.equal(listed.status, 200, await listed.text());
  } finally {
    await local.stop();
    dir.cleanup();
  }
});
