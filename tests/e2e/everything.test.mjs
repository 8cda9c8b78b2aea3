// warden serve fronting the reference server "everything" (@modelcontextprotocol/server-everything,
// over stdio in warden's sandbox), driven by the official SDK client over Streamable HTTP: every MCP
// feature the server has must work through warden, with the server's names behind everything__.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  EVERYTHING_JS, NODE, auditEntries, connectHttp, newClient, resultText, startServe, stdioUpstream, tempDir,
} from './lib/warden.mjs';

let tmp, warden, db, client;

before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'audit.db');
  warden = await startServe(['--audit-db', db, '--upstream', stdioUpstream('everything', [NODE, EVERYTHING_JS, 'stdio'])]);
  const c = newClient();
  // The "LLM" of this client: answers every sampling request with a fixed text, recording it.
  c.samplingRequests = [];
  c.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    c.samplingRequests.push(request.params);
    return { role: 'assistant', model: 'e2e-fake-model', stopReason: 'endTurn', content: { type: 'text', text: 'sampled by the e2e client' } };
  });
  c.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { color: 'blue', number: 7, pets: 'cats' } }));
  ({ client } = await connectHttp(warden.url, { client: c }));
});
after(async () => {
  await client?.close();
  await warden?.stop();
  tmp?.cleanup();
});

test('tools are listed under the everything__ prefix beside the built-ins', { timeout: 30000 }, async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of ['everything__echo', 'everything__get-sum', 'everything__trigger-long-running-operation',
    'everything__trigger-sampling-request', 'sandbox__exec']) {
    assert.ok(names.includes(want), `${want} listed; got ${names.join(', ')}\n${warden.stderr()}`);
  }
  assert.ok(!names.includes('echo'), 'no unprefixed upstream names');
  const echo = tools.find((t) => t.name === 'everything__echo');
  assert.equal(echo.inputSchema.properties.message.type, 'string', 'the upstream schema is passed on');
});

test('tools/call reaches the upstream and returns its result', { timeout: 30000 }, async () => {
  const result = await client.callTool({ name: 'everything__echo', arguments: { message: 'hello through warden' } });
  assert.equal(result.isError ?? false, false, resultText(result));
  assert.equal(resultText(result), 'Echo: hello through warden');
  const entries = auditEntries(db, ['--tool', 'everything__echo']);
  assert.ok(entries.some((e) => e.arguments?.message === 'hello through warden' && e.decision === 'allow'),
    `the upstream call is audited: ${JSON.stringify(entries)}`);
});

test('resources/list and resources/read', { timeout: 30000 }, async () => {
  const { resources } = await client.listResources();
  assert.ok(resources.length >= 1, 'resources listed');
  const text = resources.find((r) => r.mimeType?.startsWith('text/')) ?? resources[0];
  const read = await client.readResource({ uri: text.uri });
  assert.equal(read.contents.length, 1);
  assert.equal(read.contents[0].uri, text.uri);
  assert.ok(read.contents[0].text || read.contents[0].blob, 'the resource has content');

  const { resourceTemplates } = await client.listResourceTemplates();
  const dynamic = resourceTemplates.find((t) => t.uriTemplate.includes('{resourceId}') && t.uriTemplate.includes('/text/'));
  assert.ok(dynamic, `templates: ${JSON.stringify(resourceTemplates)}`);
  const uri = dynamic.uriTemplate.replace('{resourceId}', '3');
  const fromTemplate = await client.readResource({ uri });
  assert.equal(fromTemplate.contents[0].uri, uri);
});

test('prompts/list and prompts/get', { timeout: 30000 }, async () => {
  const { prompts } = await client.listPrompts();
  const names = prompts.map((p) => p.name);
  assert.ok(names.includes('everything__simple-prompt'), `prompts carry the prefix: ${names.join(', ')}`);
  const simple = await client.getPrompt({ name: 'everything__simple-prompt' });
  assert.ok(simple.messages.length >= 1);
  const withArgs = await client.getPrompt({ name: 'everything__args-prompt', arguments: { city: 'Lisbon', state: 'none' } });
  assert.match(JSON.stringify(withArgs.messages), /Lisbon/);
});

test('completion/complete for a prompt argument', { timeout: 30000 }, async () => {
  const result = await client.complete({
    ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
    argument: { name: 'department', value: 'Eng' },
  });
  assert.deepEqual(result.completion.values, ['Engineering']);
});

test('logging/setLevel is accepted', { timeout: 30000 }, async () => {
  assert.deepEqual(await client.setLoggingLevel('debug'), {});
});

test('a long-running tool reports progress to the caller', { timeout: 30000 }, async () => {
  const progress = [];
  const result = await client.callTool(
    { name: 'everything__trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
    undefined,
    { onprogress: (p) => progress.push(p), timeout: 20000 },
  );
  assert.match(resultText(result), /Long running operation completed/);
  assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3, 4], `progress: ${JSON.stringify(progress)}`);
  assert.ok(progress.every((p) => p.total === 4));
});

test('sampling: the upstream asks this client for sampling/createMessage through warden', { timeout: 30000 }, async () => {
  const before = client.samplingRequests.length;
  const result = await client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'say hi', maxTokens: 20 } });
  assert.equal(client.samplingRequests.length, before + 1, 'the client answered one sampling request');
  const asked = client.samplingRequests.at(-1);
  assert.match(asked.messages[0].content.text, /say hi/);
  assert.equal(asked.maxTokens, 20);
  assert.match(resultText(result), /sampled by the e2e client/);
  assert.match(resultText(result), /e2e-fake-model/);
});
