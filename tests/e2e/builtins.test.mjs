// warden serve with no config (one local user, embedded default policy): the official SDK client
// over Streamable HTTP lists and calls the built-in sandbox__exec, and the call lands in an audit
// log whose hash chain verifies.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import { auditEntries, connectHttp, resultText, runWarden, startServe, tempDir } from './lib/warden.mjs';

let tmp, warden, db;

before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'audit.db');
  warden = await startServe(['--audit-db', db]);
});
after(async () => {
  await warden?.stop();
  tmp?.cleanup();
});

test('the endpoint announced on stderr is a loopback /mcp URL', () => {
  assert.match(warden.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
});

test('sandbox__exec is listed and runs a command in the sandbox', { timeout: 30000 }, async () => {
  const { client, transport } = await connectHttp(warden.url);
  try {
    assert.ok(transport.sessionId, 'warden gives the session an Mcp-Session-Id');
    const { tools } = await client.listTools();
    const exec = tools.find((t) => t.name === 'sandbox__exec');
    assert.ok(exec, `sandbox__exec listed; got ${tools.map((t) => t.name).join(', ')}`);
    assert.equal(exec.inputSchema.type, 'object');

    const result = await client.callTool({ name: 'sandbox__exec', arguments: { command: 'echo hello-from-sandbox' } });
    assert.equal(result.isError, false, resultText(result));
    assert.equal(result.structuredContent.exit_code, 0);
    assert.equal(result.structuredContent.stdout, 'hello-from-sandbox\n');
    assert.equal(resultText(result), 'hello-from-sandbox\n');

    const failing = await client.callTool({ name: 'sandbox__exec', arguments: { argv: ['/bin/sh', '-c', 'echo oops >&2; exit 3'] } });
    assert.equal(failing.isError, true);
    assert.equal(failing.structuredContent.exit_code, 3);
    assert.equal(failing.structuredContent.stderr, 'oops\n');
  } finally {
    await client.close();
  }
});

test('a tool that does not exist is a JSON-RPC -32602 error', { timeout: 30000 }, async () => {
  const { client } = await connectHttp(warden.url);
  try {
    await assert.rejects(client.callTool({ name: 'nosuch__tool', arguments: {} }), (err) => err.code === -32602);
  } finally {
    await client.close();
  }
});

test('the audit log records the call and its hash chain verifies', { timeout: 30000 }, async () => {
  const verify = runWarden(['audit', 'verify', '--db', db]);
  assert.equal(verify.status, 0, `audit verify: ${verify.stdout}${verify.stderr}`);
  assert.match(verify.stdout, /^ok: \d+ entries/);

  const calls = auditEntries(db, ['--tool', 'sandbox__exec']);
  const echo = calls.find((e) => e.arguments?.command === 'echo hello-from-sandbox');
  assert.ok(echo, `the echo call is in the audit log: ${JSON.stringify(calls)}`);
  assert.equal(echo.kind, 'call');
  assert.equal(echo.decision, 'allow');
  assert.equal(echo.result.excerpt, 'hello-from-sandbox\n');
  assert.ok(echo.session, 'the entry names the session');
});
