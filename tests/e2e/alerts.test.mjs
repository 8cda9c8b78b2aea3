// The anomaly detectors end to end (docs/monitoring.md, "Detectors and alerts"): calls from the
// official MCP SDK client through `warden serve`; a burst of denials raises an alert that is an
// audit entry (`warden alerts list`), a count in /metrics, a signed webhook POSTed to a real
// HTTP receiver, and a kill switch that stops the agent's next call. The receiver is a plain
// node:http server standing in for an operator's endpoint (a boundary we do not own).
import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import {
  FIXTURES, NODE, connectHttp, eventually, makeApiKey, resultText, runWarden, startServe, tempDir,
  writeFile,
} from './lib/warden.mjs';

const SECRET = 'whsec_e2e_alerts_secret';
let tmp, db, warden, client, receiver;
const posts = [];
const botKey = makeApiKey();

before(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      posts.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  tmp = tempDir();
  db = join(tmp.dir, 'warden.db');
  const policyFile = writeFile(tmp.dir, 'policy.yaml', `version: 1
identity:
  tenants:
    acme:
      users: { alice: {} }
      agents:
        bot: { user: alice, keys: ["${botKey.hash}"] }
upstreams:
  tools:
    command: ["${NODE}", "${join(FIXTURES, 'tool-server.mjs')}"]
tools:
  - match: { tool: tools__add, args: { "/a": { min: 100 } } }
    effect: deny
  - match: { tool: "tools__*" }
    risk: low
monitoring:
  detectors:
    denials: { window: 1m, threshold: 3, kill: agent }
  alerts:
    webhook: { url: "http://127.0.0.1:${receiver.address().port}/hooks/warden", secret: env:WARDEN_E2E_ALERT_SECRET }
`);
  warden = await startServe(['--config', policyFile, '--audit-db', db],
    { env: { WARDEN_E2E_ALERT_SECRET: SECRET } });
  ({ client } = await connectHttp(warden.url, { headers: { Authorization: `Bearer ${botKey.key}` } }));
});
after(async () => {
  await client?.close();
  await warden?.stop();
  receiver?.close();
  tmp?.cleanup();
});

function signatureValid(header, body) {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!m) return false;
  const want = createHmac('sha256', SECRET).update(`${m[1]}.${body}`).digest();
  return timingSafeEqual(want, Buffer.from(m[2], 'hex')) && Math.abs(Date.now() / 1000 - Number(m[1])) < 300;
}

test('ordinary calls and one denial raise no alert', { timeout: 30000 }, async () => {
  for (const text of ['a', 'b', 'c', 'd']) assert.equal(resultText(await client.callTool({ name: 'tools__echo', arguments: { text } })), text);
  const denied = await client.callTool({ name: 'tools__add', arguments: { a: 500, b: 1 } });
  assert.ok(denied.isError, resultText(denied));
  const list = runWarden(['alerts', 'list', '--db', db]);
  assert.equal(list.status, 0, list.stderr);
  assert.equal(list.stdout.trim(), 'no alerts');
  assert.equal(posts.length, 0);
});

test('a burst of denials alerts: audit entry, metric, signed webhook, and the agent is stopped', { timeout: 60000 }, async () => {
  for (let i = 0; i < 2; i++) {
    const denied = await client.callTool({ name: 'tools__add', arguments: { a: 100 + i, b: 1 } });
    assert.ok(denied.isError, resultText(denied));
  }
  // The third denial in the minute raised it; the webhook comes from the sender's own thread.
  assert.ok(await eventually(() => posts.length >= 1, { withinMs: 10000, everyMs: 50 }), warden.stderr());
  const post = posts[0];
  assert.equal(post.headers['x-warden-event'], 'alert.raised');
  assert.ok(signatureValid(post.headers['x-warden-signature'], post.body), post.headers['x-warden-signature']);
  const event = JSON.parse(post.body);
  assert.equal(event.event, 'alert.raised');
  assert.equal(event.data.alert.detector, 'denials');
  assert.match(event.data.alert.message, /was denied 3 calls within 60 s/);
  assert.equal(event.data.alert.kill.scope, 'agent');
  assert.equal(event.data.alert.kill.pulled, true, JSON.stringify(event.data.alert.kill));
  const agent = event.data.alert.agent;
  assert.equal(agent, 'bot', JSON.stringify(event));
  assert.equal(event.data.alert.tenant, 'acme');

  // The agent's next call, an ordinary one, is refused by the switch the alert pulled.
  const stopped = await client.callTool({ name: 'tools__echo', arguments: { text: 'after' } });
  assert.ok(stopped.isError, resultText(stopped));
  assert.match(resultText(stopped), new RegExp(`stopped by kill switch agent:${agent}: denials alert`));
  const switches = JSON.parse(runWarden(['kill', 'list', '--json', '--db', db]).stdout);
  assert.ok(switches.some((s) => s.scope === 'agent' && s.name === agent), JSON.stringify(switches));

  // `warden alerts list` reads it from the audit log, with the audit entry's id the webhook named.
  const list = runWarden(['alerts', 'list', '--json', '--db', db]);
  assert.equal(list.status, 0, list.stderr);
  const alerts = JSON.parse(list.stdout);
  assert.equal(alerts.length, 1, list.stdout);
  assert.equal(alerts[0].detector, 'denials');
  assert.equal(alerts[0].id, event.data.alert.id);
  assert.equal(alerts[0].details.kill.pulled, true);
  const text = runWarden(['alerts', 'list', '--db', db, '--detector', 'denials']);
  assert.match(text.stdout, /^#\d+ \S+ denials .*was denied 3 calls.*\[kill agent .*: pulled\]$/m);
  assert.equal(runWarden(['alerts', 'list', '--db', db, '--detector', 'volume']).stdout.trim(), 'no alerts');
  // With nothing to list, --json is still JSON: an empty array (issue 31).
  assert.deepEqual(JSON.parse(runWarden(['alerts', 'list', '--json', '--db', db, '--detector', 'volume']).stdout), []);

  // In /metrics, and the chain (alerts included) still verifies.
  const metrics = await (await fetch(new URL('/metrics', warden.url))).text();
  assert.match(metrics, /^warden_alerts_total\{detector="denials"\} 1$/m);
  const verify = runWarden(['audit', 'verify', '--db', db]);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  assert.equal(runWarden(['unkill', 'agent', agent, '--db', db]).status, 0);
});
