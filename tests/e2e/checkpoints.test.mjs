// Checkpoints the gateway takes by itself (docs/audit.md, "Checkpoints the gateway takes"):
// `warden serve` with storage.checkpoints signs one after every few entries, writes it to a file
// and POSTs it to a witness. The outside verifier (tests/audit/verify_proof.py: Python and
// openssl, no warden) accepts it with the published public key, and a consistency proof between
// two of them checks too. The witness is a plain node:http server standing in for whoever keeps
// checkpoints off the machine (a boundary we do not own).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import {
  FIXTURES, NODE, REPO_ROOT, connectHttp, eventually, resultText, runWarden, startServe, tempDir, writeFile,
} from './lib/warden.mjs';

const VERIFIER = join(REPO_ROOT, 'tests', 'audit', 'verify_proof.py');
let tmp, db, out, warden, client, witness;
const received = [];

before(async () => {
  witness = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      received.push({ type: req.headers['content-type'], body });
      res.writeHead(200).end('kept');
    });
  });
  await new Promise((r) => witness.listen(0, '127.0.0.1', r));
  tmp = tempDir();
  db = join(tmp.dir, 'warden.db');
  out = join(tmp.dir, 'checkpoint.note');
  const policyFile = writeFile(tmp.dir, 'policy.yaml', `version: 1
storage:
  checkpoints:
    every_entries: 3
    every: 1h
    out: ${out}
    post: http://127.0.0.1:${witness.address().port}/checkpoints
    origin: e2e.warden.example/audit
upstreams:
  tools:
    command: ["${NODE}", "${join(FIXTURES, 'tool-server.mjs')}"]
tools:
  - match: { tool: "tools__*" }
    risk: low
`);
  warden = await startServe(['--config', policyFile, '--audit-db', db]);
  ({ client } = await connectHttp(warden.url));
});
after(async () => {
  await client?.close();
  await warden?.stop();
  witness?.close();
  tmp?.cleanup();
});

function verify(...args) {
  const r = spawnSync('python3', [VERIFIER, ...args], { encoding: 'utf8' });
  return { status: r.status, text: `${r.stdout}${r.stderr}` };
}

test('the gateway signs, writes and posts checkpoints the outside verifier accepts', { timeout: 60000 }, async () => {
  for (const text of ['one', 'two', 'three']) assert.equal(resultText(await client.callTool({ name: 'tools__echo', arguments: { text } })), text);
  // The file is written, then the note is posted; the witness has got the note the file holds
  // (a later checkpoint may replace the file meanwhile, so the one read is looked for).
  let first;
  assert.ok(await eventually(() => {
    if (!existsSync(out)) return false;
    first = readFileSync(out, 'utf8');
    return received.some((r) => r.body === first);
  }, { withinMs: 20000, everyMs: 50 }), `${warden.stderr()}\n${JSON.stringify(received)}`);
  assert.match(first, /^e2e\.warden\.example\/audit\n\d+\n/);
  assert.ok(received.every((r) => r.type === 'text/plain; charset=utf-8'), JSON.stringify(received));

  const pub = runWarden(['audit', 'public-key', '--db', db]);
  assert.equal(pub.status, 0, pub.stderr);
  const pubFile = writeFile(tmp.dir, 'pub.pem', pub.stdout);
  const checked = verify('checkpoint', pubFile, out);
  assert.equal(checked.status, 0, checked.text);
  const oldFile = writeFile(tmp.dir, 'old.note', first);
  const oldSize = Number(first.split('\n')[1]);

  // More calls: a newer checkpoint, consistent with the old one by a proof the verifier checks.
  for (const text of ['four', 'five', 'six']) await client.callTool({ name: 'tools__echo', arguments: { text } });
  // The file is replaced before the note is posted and the post counted: wait for the witness to
  // hold the newer note, as for the first.
  let second;
  assert.ok(await eventually(() => {
    second = readFileSync(out, 'utf8');
    return second !== first && received.some((r) => r.body === second);
  }, { withinMs: 20000, everyMs: 50 }), `${warden.stderr()}\n${JSON.stringify(received)}`);
  const newSize = Number(second.split('\n')[1]);
  assert.ok(newSize > oldSize, `${oldSize} -> ${newSize}`);
  const proof = runWarden(['audit', 'consistency', String(oldSize), String(newSize), '--db', db]);
  assert.equal(proof.status, 0, proof.stderr);
  const proofFile = writeFile(tmp.dir, 'consistency.json', proof.stdout);
  const consistent = verify('consistency', pubFile, oldFile, out, proofFile);
  assert.equal(consistent.status, 0, consistent.text);

  // A checkpoint is counted after its post returns, a moment after the witness has it.
  let metrics = '';
  const okCount = () => Number(/^warden_audit_checkpoints_total\{result="ok"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
  assert.ok(await eventually(async () => {
    metrics = await (await fetch(new URL('/metrics', warden.url))).text();
    return okCount() >= 2;
  }, { withinMs: 20000, everyMs: 100 }), metrics);
  assert.doesNotMatch(metrics, /^warden_audit_checkpoints_total\{result="failed"\} [1-9]/m);
});
