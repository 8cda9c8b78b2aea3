// Credentials end to end (docs/credentials.md): secrets set with `warden secrets` (the value on
// stdin) are injected per user at call time, into an HTTP upstream's headers (with a token
// minted for each call, checked here against /.well-known/jwks.json) and a stdio upstream's
// environment, and the agent never learns them: the upstream (fixtures/credential-server.mjs)
// hands back everything it got on every path it has (results, errors, tool descriptions,
// resources, prompts, log messages), and the agent sees only markers. What the upstream really
// received is in its own log, which the test reads directly.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto';
import { createServer } from 'node:http';
import { readFileSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  FIXTURES, NODE, auditEntries, connectHttp, eventually, makeApiKey, resultText, runWarden, startServe,
  tempDir, wardenBin, writeFile,
} from './lib/warden.mjs';

const SERVER = join(FIXTURES, 'credential-server.mjs');
const keys = { alice: makeApiKey(), bob: makeApiKey(), carol: makeApiKey() };
const bearer = (k) => ({ Authorization: `Bearer ${k.key}` });
const secrets = {
  aliceApi: `alice-api-${randomBytes(8).toString('hex')}`,
  bobApi: `bob-api-${randomBytes(8).toString('hex')}`,
  readKey: `read-key-${randomBytes(8).toString('hex')}`,
  writeKey: `write-key-${randomBytes(8).toString('hex')}`,
  aliceToken: `alice-svc-${randomBytes(8).toString('hex')}`,
  bobToken: `bob-svc-${randomBytes(8).toString('hex')}`,
  idpClient: `idp-client-${randomBytes(8).toString('hex')}`,
  sandboxToken: `alice-sbx-${randomBytes(8).toString('hex')}`,
};
let tmp, db, policyFile, keyFile, upstreamLog, upstream, upstreamUrl, warden;
// The identity provider's token endpoint (RFC 8693), started by the test on loopback: it records
// each exchange's form and answers with an opaque token, or with invalid_grant for user bob.
let idp, idpUrl;
// A plain-HTTP server the sandbox may reach as echo.test, which answers with the headers it got
// (a server that reflects the credential: the token alone, as "Bearer ..." is a shape the
// gateway's redactor hides anyway), and remembers them.
let echo, echoPort;
const echoed = [];
const exchanges = [];
let issued = 0;

function policy() {
  return `version: 1
identity:
  tenants:
    acme:
      users:
        alice: {}
        bob: {}
        carol: {}
      agents:
        alice-bot: { user: alice, keys: ["${keys.alice.hash}"] }
        bob-bot: { user: bob, keys: ["${keys.bob.hash}"] }
        carol-bot: { user: carol, keys: ["${keys.carol.hash}"] }
credentials:
  master_key: { file: ${keyFile} }
  tokens: { issuer: warden-e2e, lifetime: 2m }
  token_exchange:
    endpoint: ${idpUrl}
    client_id: warden-e2e
    client_secret: "secret:idp_client"
upstreams:
  h:
    url: ${upstreamUrl}
    credentials:
      header: { Authorization: "Bearer {token:h}", X-Api-Key: "secret:api_key" }
      read: { header: { X-Scope-Key: "secret:read_key" } }
      write: { header: { X-Scope-Key: "secret:write_key" } }
  x:
    url: ${upstreamUrl}
    credentials:
      header: { Authorization: "Bearer {exchange:x}" }
      audience: https://x.example
  s:
    command: ["${NODE}", "${SERVER}", "--stdio"]
    credentials: { env: { SERVICE_TOKEN: "secret:service_token" } }
sandbox:
  profiles:
    default:
      allow: ["echo.test:${echoPort}"]
      resolve: { echo.test: 127.0.0.1 }
      credentials: [{ env: API_TOKEN, host: echo.test, port: ${echoPort}, secret: sandbox_token }]
  pool: { size: 0 }
tools:
  - match: { tool: sandbox__exec }
    risk: low
  - match: { tool: h__whoami }
    risk: low
    access: read
  - match: { tool: h__fail }
    risk: low
    access: read
  - match: { tool: h__write_note }
    risk: low
    access: write
  - match: { tool: x__whoami }
    risk: low
    access: read
  - match: { tool: x__write_note }
    risk: low
    access: write
  - match: { server: s }
    risk: low
defaults:
  effect_by_risk: { low: allow, medium: allow, high: ask }
`;
}

// `warden secrets ARGS` with `input` on stdin.
function secretsCli(args, input = '') {
  const r = spawnSync(wardenBin(), ['secrets', ...args, '--config', policyFile, '--db', db],
    { input, encoding: 'utf8', timeout: 30000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function setSecret(name, value, scope) {
  const r = secretsCli(['set', name, ...scope], `${value}\n`);
  assert.equal(r.status, 0, r.stderr);
}

// The upstream's log: one object per line.
const logLines = () => (existsSync(upstreamLog)
  ? readFileSync(upstreamLog, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);

function assertNoSecret(text, where) {
  for (const [name, value] of Object.entries(secrets)) {
    assert.ok(!text.includes(value), `${where} holds secret ${name}: ${text}`);
    assert.ok(!text.includes(Buffer.from(value).toString('base64').slice(0, 16)), `${where} holds ${name} in base64`);
    assert.ok(!text.includes(Buffer.from(value).toString('hex')), `${where} holds ${name} in hex`);
  }
  assert.ok(!/eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}/.test(text), `${where} holds a JWT: ${text}`);
}

const connect = (who) => connectHttp(`${warden.url}`, { headers: bearer(keys[who]) });

// Verifies a compact ES256 JWS against the JWKS warden serves; returns its claims.
async function verifiedClaims(jwt) {
  const jwks = await (await fetch(new URL('/.well-known/jwks.json', warden.url))).json();
  const [h, p, s] = jwt.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  assert.equal(header.alg, 'ES256');
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  assert.ok(jwk, `kid ${header.kid} is published`);
  assert.equal(jwk.d, undefined, 'no private part is published');
  const ok = verify('sha256', Buffer.from(`${h}.${p}`), { key: createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
    Buffer.from(s, 'base64url'));
  assert.ok(ok, 'the token verifies with the published key');
  return JSON.parse(Buffer.from(p, 'base64url'));
}

before(async () => {
  tmp = tempDir('warden-e2e-credentials-');
  db = join(tmp.dir, 'warden.db');
  keyFile = join(tmp.dir, 'master.key');
  writeFileSync(keyFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  upstreamLog = join(tmp.dir, 'upstream.log');
  upstream = spawn(NODE, [SERVER, '--http', upstreamLog], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    upstream.stdout.setEncoding('utf8');
    upstream.stdout.on('data', (d) => { const m = /credential-server: (\d+)/.exec(d); if (m) resolve(m[1]); });
    upstream.on('exit', (c) => reject(new Error(`upstream exited ${c}`)));
  });
  upstreamUrl = `http://127.0.0.1:${port}/mcp`;
  idp = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const form = Object.fromEntries(new URLSearchParams(body));
    exchanges.push({ form, authorization: req.headers.authorization, type: req.headers['content-type'] });
    const subject = JSON.parse(Buffer.from(form.subject_token.split('.')[1], 'base64url'));
    if (subject.sub === 'bob') {
      res.writeHead(400, { 'Content-Type': 'application/json' })
        .end(JSON.stringify({ error: 'invalid_grant', error_description: 'bob may not use x' }));
      return;
    }
    issued += 1;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
      access_token: `xchg-${issued}-${randomBytes(8).toString('hex')}`, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      token_type: 'Bearer', expires_in: 300,
    }));
  });
  await new Promise((r) => idp.listen(0, '127.0.0.1', r));
  idpUrl = `http://127.0.0.1:${idp.address().port}/token`;
  echo = createServer((req, res) => {
    echoed.push(req.headers.authorization);
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end(`you sent: ${String(req.headers.authorization).split(' ')[1]}\n`);
  });
  await new Promise((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = echo.address().port;
  policyFile = writeFile(tmp.dir, 'policy.yaml', policy());
  setSecret('api_key', secrets.aliceApi, ['--tenant', 'acme', '--user', 'alice']);
  setSecret('api_key', secrets.bobApi, ['--tenant', 'acme', '--user', 'bob']);
  setSecret('read_key', secrets.readKey, ['--tenant', 'acme']);
  setSecret('write_key', secrets.writeKey, ['--tenant', 'acme']);
  setSecret('service_token', secrets.aliceToken, ['--tenant', 'acme', '--user', 'alice']);
  setSecret('service_token', secrets.bobToken, ['--tenant', 'acme', '--user', 'bob']);
  setSecret('idp_client', secrets.idpClient, ['--tenant', 'acme']);
  setSecret('sandbox_token', secrets.sandboxToken, ['--tenant', 'acme', '--user', 'alice']);
  warden = await startServe(['--config', policyFile, '--audit-db', db]);
});

after(async () => {
  await warden?.stop();
  upstream?.kill();
  idp?.close();
  echo?.close();
  tmp?.cleanup();
});

test('secrets list shows names and scopes, never values', () => {
  const r = secretsCli(['list', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const list = JSON.parse(r.stdout);
  assert.deepEqual(list.map((s) => `${s.name}/${s.user}`).sort(),
    ['api_key/alice', 'api_key/bob', 'idp_client/', 'read_key/', 'sandbox_token/alice', 'service_token/alice', 'service_token/bob',
      'write_key/']);
  assertNoSecret(r.stdout, 'secrets list');
  // A name that no policy user has is refused before anything is stored.
  const typo = secretsCli(['set', 'api_key', '--tenant', 'acme', '--user', 'alcie'], 'x-value-123\n');
  assert.equal(typo.status, 2);
  assert.match(typo.stderr, /--user alcie: no such user in tenant acme/);
});

test('an HTTP upstream gets each user\'s secret and a token minted for the call; the agent sees markers', async () => {
  const { client } = await connect('alice');
  const before = logLines().length;
  const result = await client.callTool({ name: 'h__whoami', arguments: {} });
  const seen = resultText(result);
  assertNoSecret(seen, 'the whoami result');
  assert.match(seen, /\[REDACTED:api_key\]/);
  assert.match(seen, /\[REDACTED:read_key\]/);

  const got = logLines().slice(before).find((l) => l.tool === 'whoami');
  assert.ok(got, 'the upstream logged the call');
  assert.equal(got.x_api_key, secrets.aliceApi);
  assert.equal(got.x_scope_key, secrets.readKey, 'a read call gets the read credential');
  const jwt = got.authorization.replace(/^Bearer /, '');
  const claims = await verifiedClaims(jwt);
  assert.equal(claims.iss, 'warden-e2e');
  assert.equal(claims.sub, 'alice');
  assert.deepEqual(claims.act, { sub: 'alice-bot' });
  assert.equal(claims.aud, upstreamUrl);
  assert.equal(claims.scope, 'read');
  assert.equal(claims.tool, 'h__whoami');
  assert.equal(claims.tenant, 'acme');
  assert.equal(claims.exp - claims.iat, 120);
  assert.match(claims.jti, /^[0-9a-f]{32}$/);

  // A write call gets the write credential and a write scope; a new jti.
  await client.callTool({ name: 'h__write_note', arguments: { note: 'hi' } });
  const wrote = logLines().reverse().find((l) => l.tool === 'write_note');
  assert.equal(wrote.x_scope_key, secrets.writeKey);
  const writeClaims = await verifiedClaims(wrote.authorization.replace(/^Bearer /, ''));
  assert.equal(writeClaims.scope, 'read write');
  assert.notEqual(writeClaims.jti, claims.jti);
  await client.close();

  // Another user's agent: that user's secret.
  const bob = await connect('bob');
  await bob.client.callTool({ name: 'h__whoami', arguments: {} });
  const bobGot = logLines().reverse().find((l) => l.tool === 'whoami');
  assert.equal(bobGot.x_api_key, secrets.bobApi);
  assert.equal((await verifiedClaims(bobGot.authorization.slice(7))).sub, 'bob');
  await bob.client.close();
});

test('a kill switch revokes the tokens warden minted for the callers it stops', async () => {
  const bob = await connect('bob');
  const alice = await connect('alice');
  try {
    await bob.client.callTool({ name: 'h__whoami', arguments: {} });
    const bobJti = (await verifiedClaims(logLines().reverse().find((l) => l.tool === 'whoami').authorization.slice(7))).jti;
    await alice.client.callTool({ name: 'h__whoami', arguments: {} });
    const aliceJti = (await verifiedClaims(logLines().reverse().find((l) => l.tool === 'whoami').authorization.slice(7))).jti;
    const revokedUrl = new URL('/.well-known/warden-revoked.json', warden.url);
    const listed = async () => (await (await fetch(revokedUrl)).json()).revoked.map((r) => r.jti);
    assert.ok(!(await listed()).includes(bobJti), 'nothing is revoked before the switch');

    assert.equal(runWarden(['kill', 'agent', 'bob-bot', '--db', db, '--reason', 'e2e revoke']).status, 0);
    // The gateway sees the switch within a second (it polls the store), then revokes.
    const revoked = await eventually(async () => ((await listed()).includes(bobJti) ? await listed() : null),
      { withinMs: 5000, everyMs: 100 });
    assert.ok(revoked, 'bob-bot\'s token is listed as revoked');
    assert.ok(!revoked.includes(aliceJti), 'another agent\'s token is not');
    const entry = (await (await fetch(revokedUrl)).json()).revoked.find((r) => r.jti === bobJti);
    assert.ok(entry.exp > Date.now() / 1000, 'listed until it would have expired');
    const stopped = await bob.client.callTool({ name: 'h__whoami', arguments: {} });
    assert.ok(stopped.isError, resultText(stopped));
  } finally {
    assert.equal(runWarden(['unkill', 'agent', 'bob-bot', '--db', db]).status, 0);
    await bob.client.close();
    await alice.client.close();
  }
  // Released: bob-bot's next call works, with a new token that is not revoked.
  const back = await connect('bob');
  try {
    const ok = await eventually(async () => {
      const r = await back.client.callTool({ name: 'h__whoami', arguments: {} });
      return r.isError ? null : r;
    }, { withinMs: 5000, everyMs: 100 });
    assert.ok(ok, 'bob-bot works again once released');
  } finally {
    await back.client.close();
  }
});

test('an upstream error that repeats the credentials reaches the agent redacted', async () => {
  const { client } = await connect('alice');
  let text;
  try {
    const r = await client.callTool({ name: 'h__fail', arguments: {} });
    text = JSON.stringify(r);
  } catch (err) {
    text = String(err.message);
  }
  assert.match(text, /refused/);
  assertNoSecret(text, 'the error');
  await client.close();
});

test('a secret that is not set fails that user\'s calls, naming the secret', async () => {
  const before = logLines().filter((l) => l.tool).length;
  const { client } = await connect('carol');
  const r = await client.callTool({ name: 'h__whoami', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(resultText(r), /secret 'api_key' is not set for user 'carol' of tenant 'acme'/);
  assert.match(resultText(r), /warden secrets set api_key --tenant acme --user carol/);
  assert.equal(logLines().filter((l) => l.tool).length, before, 'nothing reached the upstream');
  await client.close();
});

test('a rotated secret is used from the next call on', async () => {
  const fresh = `alice-api-rotated-${randomBytes(6).toString('hex')}`;
  setSecret('api_key', fresh, ['--tenant', 'acme', '--user', 'alice']);
  secrets.aliceApiRotated = fresh;
  const { client } = await connect('alice');
  const r = await client.callTool({ name: 'h__whoami', arguments: {} });
  assertNoSecret(resultText(r), 'the result after rotation');
  assert.equal(logLines().reverse().find((l) => l.tool === 'whoami').x_api_key, fresh);
  await client.close();
});

test('a stdio upstream gets the user\'s secret in its environment; every path it tries is redacted', async () => {
  // Bob's instance lists first: its tools are pinned as every client sees them (redacted), so
  // alice's instance, whose description held another value, lists the same tools.
  const first = await connect('bob');
  assert.ok((await first.client.listTools()).tools.some((t) => t.name === 's__env'), 'bob sees s__env');
  await first.client.close();
  const { client } = await connect('alice');
  const logged = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logged.push(JSON.stringify(n.params)));
  const tools = await client.listTools();
  const env = tools.tools.find((t) => t.name === 's__env');
  assert.ok(env, JSON.stringify(tools));
  assert.match(env.description, /The token is \[REDACTED:service_token\]/, 'the server had the value, the agent a marker');
  assertNoSecret(JSON.stringify(tools), 'tools/list');

  const result = await client.callTool({ name: 's__env', arguments: {} });
  const text = resultText(result);
  assert.match(text, /\[REDACTED:service_token\]/);
  assertNoSecret(text, 'the env result');

  let failed;
  try { failed = JSON.stringify(await client.callTool({ name: 's__fail', arguments: {} })); } catch (err) { failed = err.message; }
  assert.match(failed, /cannot use/);
  assertNoSecret(failed, 'the stdio error');

  const resource = await client.readResource({ uri: 'env://token' });
  assert.match(JSON.stringify(resource), /token=\[REDACTED:service_token\]/);
  assertNoSecret(JSON.stringify(resource), 'the resource');
  const prompt = await client.getPrompt({ name: 's__token' });
  assertNoSecret(JSON.stringify(prompt), 'the prompt');
  assertNoSecret(logged.join('\n'), 'log messages');

  // The value never was in any process's argv (world-readable in /proc).
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout;
  assertNoSecret(ps, 'the process list');
  await client.close();
});

test('a stdio instance in use is restarted with the new value when its secret rotates', async () => {
  const sha = (v) => createHash('sha256').update(v).digest('hex');
  const { client } = await connect('alice');
  const held = async () => JSON.parse(resultText(await client.callTool({ name: 's__env', arguments: {} })));
  const before = await held();
  assert.equal(before.sha256, sha(secrets.aliceToken));
  const fresh = `alice-svc-rotated-${randomBytes(6).toString('hex')}`;
  secrets.aliceTokenRotated = fresh;
  setSecret('service_token', fresh, ['--tenant', 'acme', '--user', 'alice']);
  // The gateway notices at its next call (at most every 100 ms) and restarts the instance; the
  // session's calls then reach a server holding the new value.
  let after = before;
  for (let i = 0; i < 50 && after.sha256 !== sha(fresh); i += 1) {
    await new Promise((r) => setTimeout(r, 150));
    try { after = await held(); } catch { /* a call in flight on the old server fails */ }
  }
  // A process's environment is fixed at its start: a new value means a new server process.
  assert.equal(after.sha256, sha(fresh), 'the same session now reaches a server with the new secret');
  assertNoSecret(JSON.stringify(after), 'the result after the restart');
  await client.close();
});

test('sandboxed code uses the user\'s credential through the egress proxy and never holds it', async () => {
  const { client } = await connect('alice');
  const command = 'echo "seen=$API_TOKEN"; cat /proc/self/environ | tr "\\0" "\\n" | grep -c alice-sbx; '
    + `curl -sS -H "Authorization: Bearer $API_TOKEN" http://echo.test:${echoPort}/`;
  const r = await client.callTool({ name: 'sandbox__exec', arguments: { command } });
  const text = resultText(r);
  assertNoSecret(text, 'the sandbox\'s output');
  assertNoSecret(JSON.stringify(r), 'the sandbox__exec result');
  const seen = /seen=([A-Za-z0-9]+)/.exec(text);
  assert.ok(seen, text);
  assert.equal(seen[1].length, secrets.sandboxToken.length, 'the placeholder is as long as the value');
  assert.match(text, /^0$/m, 'the value is nowhere in the sandbox\'s environment');
  assert.ok(text.includes(`you sent: ${seen[1]}`), `the echo comes back with the placeholder: ${text}`);
  assert.deepEqual(echoed.slice(-1), [`Bearer ${secrets.sandboxToken}`], 'the server got alice\'s value');
  await client.close();

  // Bob has no such secret: his call fails naming it, and nothing ran.
  const b = await connect('bob');
  const before = echoed.length;
  const failed = await b.client.callTool({ name: 'sandbox__exec', arguments: { command } });
  assert.equal(failed.isError, true);
  assert.match(resultText(failed), /secret 'sandbox_token' is not set for user 'bob'/);
  assert.equal(echoed.length, before);
  await b.client.close();
});

test('the audit log and warden\'s own output hold no secret', async () => {
  const entries = auditEntries(db);
  assert.ok(entries.some((e) => e.tool === 'h__whoami'), 'the calls are audited');
  assert.ok(entries.some((e) => e.decision === 'secret_set'), 'setting a secret is audited');
  assertNoSecret(JSON.stringify(entries), 'the audit log');
  assertNoSecret(warden.stderr(), 'warden\'s stderr');
});

test('a wrong master key refuses to start, saying so', async () => {
  const other = join(tmp.dir, 'other.key');
  writeFileSync(other, randomBytes(32).toString('base64'), { mode: 0o600 });
  const text = policy().replace(keyFile, other);
  const file = writeFile(tmp.dir, 'wrong-key.yaml', text);
  await assert.rejects(startServe(['--config', file, '--audit-db', db]),
    /is encrypted under master key [0-9a-f]{16}, which is not configured/);
  // A key file others can read is refused too.
  chmodSync(other, 0o644);
  await assert.rejects(startServe(['--config', file, '--audit-db', db]), /mode|readable/);
});

test('token exchange: the user as subject, the agent as actor, a cached downscoped token for the upstream', async () => {
  const { client } = await connect('alice');
  // Exchanges for a call carry an actor; warden's own requests (listing) exchange without one.
  const forCalls = () => exchanges.filter((e) => e.form.actor_token);
  const before = forCalls().length;
  const r = await client.callTool({ name: 'x__whoami', arguments: {} });
  assertNoSecret(resultText(r), 'the exchanged call');
  assert.doesNotMatch(resultText(r), /xchg-/, 'the exchanged token is redacted');
  const x = forCalls()[before];
  assert.ok(x, 'the token endpoint was asked');
  assert.equal(x.type, 'application/x-www-form-urlencoded');
  assert.equal(x.form.grant_type, 'urn:ietf:params:oauth:grant-type:token-exchange');
  assert.equal(x.form.audience, 'https://x.example');
  assert.equal(x.form.scope, 'read');
  assert.equal(x.authorization, `Basic ${Buffer.from(`warden-e2e:${secrets.idpClient}`).toString('base64')}`);
  const subject = await verifiedClaims(x.form.subject_token);
  assert.equal(subject.sub, 'alice');
  assert.equal(subject.aud, idpUrl);
  assert.equal(x.form.actor_token_type, 'urn:ietf:params:oauth:token-type:jwt');
  assert.equal((await verifiedClaims(x.form.actor_token)).sub, 'alice-bot');
  // The agent's own credential never leaves warden: not to the provider, not to the upstream.
  assert.ok(!JSON.stringify(exchanges).includes(keys.alice.key));
  assert.ok(!readFileSync(upstreamLog, 'utf8').includes(keys.alice.key));
  const got = logLines().reverse().find((l) => l.tool === 'whoami');
  assert.match(got.authorization, /^Bearer xchg-\d+-/);

  // The same user, agent and scope: the cached token, no second exchange; a write: a new one.
  await client.callTool({ name: 'x__whoami', arguments: {} });
  assert.equal(forCalls().length, before + 1);
  await client.callTool({ name: 'x__write_note', arguments: {} });
  assert.equal(forCalls().length, before + 2);
  assert.equal(forCalls()[before + 1].form.scope, 'read write');
  await client.close();

  // A refusal by the provider fails that call, saying why.
  const bob = await connect('bob');
  const refused = await bob.client.callTool({ name: 'x__whoami', arguments: {} });
  assert.equal(refused.isError, true);
  assert.match(resultText(refused), /the token endpoint refused the exchange: HTTP 400: invalid_grant \(bob may not use x\)/);
  await bob.client.close();
});

test('the JWKS is printable offline, and a new signing key keeps the old one published', async () => {
  const served = await (await fetch(new URL('/.well-known/jwks.json', warden.url))).json();
  const printed = secretsCli(['jwks']);
  assert.equal(printed.status, 0, printed.stderr);
  assert.deepEqual(JSON.parse(printed.stdout).keys.map((k) => k.kid), served.keys.map((k) => k.kid));
  const rotated = secretsCli(['rotate', '--signing-key']);
  assert.equal(rotated.status, 0, rotated.stderr);
  const after = JSON.parse(secretsCli(['jwks']).stdout).keys.map((k) => k.kid);
  assert.equal(after.length, served.keys.length + 1);
  for (const k of served.keys) assert.ok(after.includes(k.kid), 'the old key stays published');
  assertNoSecret(printed.stdout + rotated.stdout, 'jwks and rotate output');
});

test('the master key rotates: previous_keys decrypt, rotate re-encrypts, then the old key is refused', () => {
  const newKey = join(tmp.dir, 'new.key');
  writeFileSync(newKey, randomBytes(32).toString('hex'), { mode: 0o600 });
  const both = writeFile(tmp.dir, 'both.yaml', policy().replace(`master_key: { file: ${keyFile} }`,
    `master_key: { file: ${newKey} }\n  previous_keys: [ { file: ${keyFile} } ]`));
  const run = (file, args) => spawnSync(wardenBin(), ['secrets', ...args, '--config', file, '--db', db], { encoding: 'utf8' });
  const r = run(both, ['rotate']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /re-encrypted under master key [0-9a-f]{16}/);
  const onlyNew = writeFile(tmp.dir, 'new.yaml', policy().replace(keyFile, newKey));
  const listed = run(onlyNew, ['list', '--json']);
  assert.equal(listed.status, 0, listed.stderr);
  assert.ok(JSON.parse(listed.stdout).length >= 6);
  const old = run(policyFile, ['list']);
  assert.equal(old.status, 2);
  assert.match(old.stderr, /which is not configured/);
});
