// warden mcp (MCP over stdio) driven by the official SDK's StdioClientTransport: the built-in
// sandbox__exec, an upstream (server-everything, itself over stdio in a sandbox) behind it, and the
// audit log of the session.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import {
  EVERYTHING_JS, NODE, auditEntries, connectStdio, resultText, runWarden, stdioUpstream, tempDir,
} from './lib/warden.mjs';

let tmp;
before(() => { tmp = tempDir(); });
after(() => tmp?.cleanup());

test('built-ins over stdio: initialize, list, call, audited', { timeout: 30000 }, async () => {
  const db = join(tmp.dir, 'builtins.db');
  const { client, stderr } = await connectStdio(['--audit-db', db]);
  try {
    assert.equal(client.getServerVersion()?.name, 'warden');
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'sandbox__exec'), `tools: ${tools.map((t) => t.name)}`);
    const result = await client.callTool({ name: 'sandbox__exec', arguments: { argv: ['echo', 'over', 'stdio'] } });
    assert.equal(result.isError, false, resultText(result) + stderr());
    assert.equal(result.structuredContent.stdout, 'over stdio\n');
    await assert.rejects(client.callTool({ name: 'sandbox__nosuch', arguments: {} }), (err) => err.code === -32602);
  } finally {
    await client.close();
  }
  const verify = runWarden(['audit', 'verify', '--db', db]);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  const entries = auditEntries(db, ['--tool', 'sandbox__exec']);
  assert.ok(entries.some((e) => e.kind === 'call' && e.arguments?.argv?.join(' ') === 'echo over stdio'),
    `audit entries: ${JSON.stringify(entries)}`);
});

test('an upstream over stdio behind warden mcp: prefixed tools, a call, a resource', { timeout: 45000 }, async () => {
  const db = join(tmp.dir, 'everything.db');
  const { client, stderr } = await connectStdio([
    '--audit-db', db, '--upstream', stdioUpstream('everything', [NODE, EVERYTHING_JS, 'stdio']),
  ]);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('everything__echo'), `tools: ${names.join(', ')}\n${stderr()}`);
    assert.ok(names.includes('sandbox__exec'), 'the built-ins stay listed beside the upstream');
    assert.ok(names.every((n) => /^[a-z]+__/.test(n)), `every tool carries its server prefix: ${names}`);

    const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'via warden mcp' } });
    assert.equal(echo.isError ?? false, false, resultText(echo));
    assert.equal(resultText(echo), 'Echo: via warden mcp');

    const sum = await client.callTool({ name: 'everything__get-sum', arguments: { a: 2, b: 40 } });
    assert.match(resultText(sum), /42/);

    const { resources } = await client.listResources();
    assert.ok(resources.length > 0, 'server-everything resources are listed through warden');
    const read = await client.readResource({ uri: resources[0].uri });
    assert.equal(read.contents[0].uri, resources[0].uri);
  } finally {
    await client.close();
  }
  const entries = auditEntries(db, ['--tool', 'everything__echo']);
  assert.ok(entries.some((e) => e.arguments?.message === 'via warden mcp'), `audit: ${JSON.stringify(entries)}`);
});
