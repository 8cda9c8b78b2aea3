// warden serve fronting the reference server "filesystem" (@modelcontextprotocol/server-filesystem)
// on a temporary directory, with a policy file: reads go through, and write_file is refused by a
// policy rule before it reaches the server, with the reason in the tool result.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  FILESYSTEM_JS, NODE, auditEntries, connectHttp, makeApiKey, resultText, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

let tmp, warden, db, data, client;
const key = makeApiKey();

before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'audit.db');
  data = join(tmp.dir, 'data');
  mkdirSync(data);
  writeFileSync(join(data, 'notes.txt'), 'first line\nsecond line\n');
  mkdirSync(join(data, 'sub'));
  // warden serve with a config file always asks for credentials, so the policy names one tenant
  // with one agent and its API key. The first matching rule decides: any write_file with a path is denied (a conditional rule, so
  // the tool stays listed and the refusal says why), the rest of the server's tools are allowed.
  const policy = writeFile(tmp.dir, 'policy.yaml', `version: 1
identity:
  tenants:
    home:
      users:
        me: {}
      agents:
        me-bot: { user: me, keys: ["${key.hash}"] }
upstreams:
  files:
    command: ${JSON.stringify([NODE, FILESYSTEM_JS, data])}
tools:
  - match: { tool: "files__write_file", args: { "/path": { exists: true } } }
    risk: high
    effect: deny
  - match: { tool: "files__*" }
    risk: low
    access: read
`);
  warden = await startServe(['--config', policy, '--audit-db', db]);
  ({ client } = await connectHttp(warden.url, { headers: { Authorization: `Bearer ${key.key}` } }));
});
after(async () => {
  await client?.close();
  await warden?.stop();
  tmp?.cleanup();
});

test('the filesystem tools are listed as files__*', { timeout: 30000 }, async () => {
  const names = (await client.listTools()).tools.map((t) => t.name);
  for (const want of ['files__list_directory', 'files__read_text_file', 'files__write_file']) {
    assert.ok(names.includes(want), `${want} listed; got ${names.join(', ')}\n${warden.stderr()}`);
  }
});

test('list_directory and read_file see the directory through the sandbox', { timeout: 30000 }, async () => {
  const listing = await client.callTool({ name: 'files__list_directory', arguments: { path: data } });
  assert.equal(listing.isError ?? false, false, resultText(listing));
  assert.match(resultText(listing), /\[FILE\] notes\.txt/);
  assert.match(resultText(listing), /\[DIR\] sub/);

  const read = await client.callTool({ name: 'files__read_file', arguments: { path: join(data, 'notes.txt') } });
  assert.equal(read.isError ?? false, false, resultText(read));
  assert.equal(resultText(read), 'first line\nsecond line\n');
});

test('write_file is denied by the policy, with the reason, and nothing is written', { timeout: 30000 }, async () => {
  const target = join(data, 'written.txt');
  const result = await client.callTool({ name: 'files__write_file', arguments: { path: target, content: 'should not land' } });
  assert.equal(result.isError, true);
  const text = resultText(result);
  assert.ok(text.startsWith('warden denied this call: '), text);
  assert.match(text, /tools\[0\]/, 'the refusal names the rule that decided it');
  assert.equal(existsSync(target), false, 'the file was not written');
  assert.equal(readFileSync(join(data, 'notes.txt'), 'utf8'), 'first line\nsecond line\n');

  const entries = auditEntries(db, ['--tool', 'files__write_file']);
  assert.ok(entries.some((e) => e.decision === 'deny' && e.arguments?.path === target), `audit: ${JSON.stringify(entries)}`);
});
