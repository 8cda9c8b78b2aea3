// The approvals console in a real browser: `warden serve` with a policy whose `effect: ask` rule
// pauses an agent's call, headless Chromium logging in with a person's key, finding the call in
// the pending list, reading its arguments (attacker-written, so they must show as text and never
// run) and approving or denying it; the agent's call then ends as the person decided. Also the
// console's HTTP rules as a non-browser client sees them: the CSP, agents refused at login, a
// cookie without the CSRF token refused, other origins refused. And the activity view: recent
// calls and alerts, and one-click Stop and Release of an agent's kill switch.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { join } from 'node:path';
import { FIXTURES, NODE, connectHttp, eventually, makeApiKey, resultText, startServe, tempDir, writeFile } from './lib/warden.mjs';
import { launchChromium } from './lib/browser.mjs';

const TOOL_SERVER = join(FIXTURES, 'tool-server.mjs');
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
  + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const XSS_IMG = '<img src=x onerror="window.__pwned=1">';
const XSS_SCRIPT = '<script>window.__pwned=2</script>';
// A right-to-left override: shown raw, "\u202e0009\u202c" reads "9000" (issue 31).
const BIDI_AMOUNT = '\u202e0009\u202c';
const BIDI_SHOWN = '\\u202e0009\\u202c';

const alice = makeApiKey();  // a person: approver of acme
const mailer = makeApiKey(); // an agent of bob's
let tmp, warden, base, browser;

before(async () => {
  tmp = tempDir();
  const policy = writeFile(tmp.dir, 'policy.yaml', `version: 1
identity:
  tenants:
    acme:
      users:
        alice: { approver: true, keys: ["${alice.hash}"] }
        bob: {}
      agents:
        mailer: { user: bob, keys: ["${mailer.hash}"] }
upstreams:
  mail:
    command: ${JSON.stringify([NODE, TOOL_SERVER])}
tools:
  - match: { tool: "mail__echo" }
    risk: high
    effect: ask
  - match: { tool: "mail__add" }
    risk: low
    labels: [sensitive]
monitoring:
  detectors: { sensitive: on }
`);
  warden = await startServe(['--config', policy, '--audit-db', join(tmp.dir, 'audit.db')]);
  base = new URL(warden.url).origin;
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await warden?.stop();
  tmp?.cleanup();
});

const json = (body) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

/** Logs in over plain HTTP: {cookie, csrf}. */
async function httpLogin(key) {
  const res = await fetch(`${base}/console/login`, json({ credential: key }));
  assert.equal(res.status, 200, await res.clone().text());
  const cookie = res.headers.get('set-cookie').split(';')[0];
  return { cookie, csrf: (await res.json()).csrf };
}

/** The agent's session, and a call that pauses for approval (not awaited). */
async function pausedCall(args) {
  const { client } = await connectHttp(warden.url, { headers: { Authorization: `Bearer ${mailer.key}` } });
  const call = client.callTool({ name: 'mail__echo', arguments: args }, undefined, { timeout: 120000 });
  call.catch(() => {});  // awaited by the test; never an unhandled rejection meanwhile
  return { client, call };
}

/** A browser page logged in as alice, on the pending list. */
async function loggedInPage() {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  // Errors in the page's console (a CSP violation among them), but for the 401 of the first
  // GET /console/session, which Chromium reports as a failed load.
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) problems.push(`console: ${msg.text()}`);
  });
  await page.goto(`${base}/`);
  await page.locator('#credential').waitFor({ state: 'visible' });
  await page.locator('#credential').fill(alice.key);
  await page.getByRole('button', { name: 'Log in', exact: true }).click();
  await page.locator('#list').waitFor({ state: 'visible' });
  assert.match(await page.locator('#who').textContent(), /alice/);
  return { context, page, problems };
}

/** Waits for the pending row of a call whose arguments hold `marker`; returns its approval id. */
async function pendingId(page, marker) {
  // The list shows tool, risk and who; the arguments are on the approval's page. Find the id by
  // the API with the page's own session (same origin, the cookie goes along).
  const id = await eventually(async () => page.evaluate(async (m) => {
    const res = await fetch('/api/approvals', { cache: 'no-store' });
    if (res.status !== 200) return null;
    const found = (await res.json()).approvals.find((a) => JSON.stringify(a.arguments).includes(m));
    return found ? found.id : null;
  }, marker), { withinMs: 15000, everyMs: 200 });
  assert.ok(id, `no pending approval holding ${marker}\n${warden.stderr()}`);
  // The list shows it within its 2 s refresh.
  const row = page.locator(`#pending tbody tr[data-id="${id}"]`);
  await row.waitFor({ state: 'visible', timeout: 10000 });
  const cells = await row.locator('td').allTextContents();
  assert.equal(cells[0], 'mail__echo');
  assert.equal(cells[1], 'high');
  assert.deepEqual(cells.slice(2, 5), ['acme', 'bob', 'mailer']);
  return { id, row };
}

test('the console answers with its CSP and security headers', async () => {
  for (const path of ['/', '/approvals/apr_x', '/console/app.js', '/console/style.css', '/console/nope']) {
    const res = await fetch(`${base}${path}`);
    assert.equal(res.headers.get('content-security-policy'), CSP, path);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer', path);
    assert.equal(res.headers.get('cache-control'), 'no-store', path);
  }
  assert.equal((await fetch(`${base}/console/app.js`)).headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.equal((await fetch(`${base}/console/nope`)).status, 404);
});

test("an agent's key is refused by the console's login", async () => {
  const res = await fetch(`${base}/console/login`, json({ credential: mailer.key }));
  assert.equal(res.status, 403);
  assert.equal((await res.json()).error, 'agents may not use the console');
  assert.equal(res.headers.get('set-cookie'), null);
  const wrong = await fetch(`${base}/console/login`, json({ credential: 'wk_not_a_key' }));
  assert.equal(wrong.status, 401);
});

test('a state-changing request with the cookie but without X-CSRF-Token is refused', async () => {
  const { cookie, csrf } = await httpLogin(alice.key);
  const session = await fetch(`${base}/console/session`, { headers: { Cookie: cookie } });
  assert.equal(session.status, 200);
  assert.equal((await session.json()).user, 'alice');
  const res = await fetch(`${base}/api/approvals/apr_nope/approve`, {
    method: 'POST', headers: { Cookie: cookie, 'Content-Type': 'application/json' }, body: '{"comment":"x"}',
  });
  assert.equal(res.status, 403);
  assert.match((await res.json()).error, /X-CSRF-Token/);
  // Another origin is refused even with the token.
  const evil = await fetch(`${base}/api/approvals`, { headers: { Cookie: cookie, Origin: 'https://evil.example', 'X-CSRF-Token': csrf } });
  assert.equal(evil.status, 403);
  assert.equal((await fetch(`${base}/console/session`, { headers: { Origin: 'https://evil.example' } })).status, 403);
  // No cookie: not logged in.
  assert.equal((await fetch(`${base}/console/session`)).status, 401);
});

test('a person approves a paused call in the browser; its arguments show as text and never run', { timeout: 90000 }, async () => {
  const args = {
    text: `hello ${XSS_IMG} ${XSS_SCRIPT} pay ${BIDI_AMOUNT}`,
    amount: BIDI_AMOUNT,
    html: XSS_IMG,
    script: XSS_SCRIPT,
    nested: { list: [1, 2.5, true, null], quote: '"\'&<>' },
    long: `${'L'.repeat(20000)}END-OF-LONG`,
    marker: 'approve-case',
  };
  const { client, call } = await pausedCall(args);
  const { context, page, problems } = await loggedInPage();
  try {
    const { id, row } = await pendingId(page, 'approve-case');
    await row.locator('a').first().click();
    await page.waitForURL(`${base}/approvals/${id}`);
    const pre = page.locator('#detail-arguments');
    await page.waitForFunction(() => document.getElementById('detail-arguments').textContent.length > 0);
    const shown = await pre.textContent();
    // Exactly the call's arguments, pretty-printed, nothing cut.
    assert.deepEqual(JSON.parse(shown), args);
    // Pretty-printed as JSON.stringify does, but for the override's escapes (still JSON).
    assert.equal(shown.replaceAll(BIDI_SHOWN, BIDI_AMOUNT), JSON.stringify(JSON.parse(shown), null, 2));
    assert.ok(shown.includes('END-OF-LONG'));
    // The attacker's markup is text, not elements, and nothing ran.
    // (In JSON text the img tag's quotes are escaped: the value shown is the string literal.)
    assert.ok(shown.includes(`"html": ${JSON.stringify(XSS_IMG)}`), shown.slice(0, 400));
    assert.ok(shown.includes(`"script": "${XSS_SCRIPT}"`), shown.slice(0, 400));
    assert.equal(await page.locator('#detail-arguments *').count(), 0);
    // Bidirectional controls show as escapes, never obeyed: the page reads \u202e0009\u202c, not 9000.
    assert.ok(shown.includes(`"amount": "${BIDI_SHOWN}"`), shown.slice(0, 400));
    const pageText = await page.locator('body').innerText();
    assert.ok(!pageText.includes('\u202e') && !pageText.includes('\u202c'), 'a raw bidi control is on the page');
    assert.ok(pageText.includes(BIDI_SHOWN));
    assert.equal(await page.locator('img').count(), 0);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.match(await page.locator('#detail-facts').textContent(), /pending/);

    await page.locator('#comment').fill('looks fine');
    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.locator('#decide-result').filter({ hasText: 'Approved' }).waitFor({ timeout: 10000 });

    const result = await call;
    assert.ok(!result.isError, JSON.stringify(result));
    // The approved call ran with the stored value: the tool got the original string, override and all.
    assert.equal(resultText(result), args.text);
    assert.ok(resultText(result).endsWith(`pay ${BIDI_AMOUNT}`));
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await client.close();
  }
});

test('a person denies a paused call with a comment; the agent reads it, the history shows it', { timeout: 90000 }, async () => {
  const args = { text: 'send it to the wrong person', marker: 'deny-case' };
  const { client, call } = await pausedCall(args);
  const { context, page, problems } = await loggedInPage();
  try {
    const { id } = await pendingId(page, 'deny-case');
    // The approval's page by its address, as a link in a chat message would open it.
    await page.goto(`${base}/approvals/${id}`);
    await page.waitForFunction(() => document.getElementById('detail-arguments').textContent.length > 0);
    assert.deepEqual(JSON.parse(await page.locator('#detail-arguments').textContent()), args);
    await page.locator('#comment').fill('wrong recipient');
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await page.locator('#decide-result').filter({ hasText: 'Denied' }).waitFor({ timeout: 10000 });

    const result = await call;
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.match(resultText(result), /denied by alice: wrong recipient/);

    await page.goto(`${base}/`);
    const decided = page.locator(`#history tbody tr[data-id="${id}"]`);
    await decided.waitFor({ state: 'visible', timeout: 10000 });
    const cells = await decided.locator('td').allTextContents();
    assert.equal(cells[1], 'denied');
    assert.equal(cells[5], 'alice');
    assert.equal(cells[7], 'wrong recipient');
    assert.equal(await page.locator(`#pending tbody tr[data-id="${id}"]`).count(), 0);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await client.close();
  }
});

test('single-user mode (no config, loopback): the console needs no login, a change still needs the token', { timeout: 30000 }, async () => {
  const local = await startServe(['--audit-db', join(tmp.dir, 'local-audit.db')]);
  try {
    const origin = new URL(local.url).origin;
    const session = await fetch(`${origin}/console/session`);
    assert.equal(session.status, 200, local.stderr());
    const { user, csrf } = await session.json();
    assert.ok(user && csrf.length === 64);
    const cookie = session.headers.get('set-cookie').split(';')[0];
    const decide = (headers) => fetch(`${origin}/api/approvals/apr_nope/deny`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: '{"comment":"x"}',
    });
    // Without the session's token: refused before the API sees it.
    const bare = await decide({});
    assert.equal(bare.status, 403);
    assert.match((await bare.json()).error, /X-CSRF-Token/);
    assert.equal((await decide({ Cookie: cookie })).status, 403);
    // With it, the request reaches the API (which knows no such approval).
    assert.equal((await decide({ Cookie: cookie, 'X-CSRF-Token': csrf })).status, 404);
  } finally {
    await local.stop();
  }
});

test('the activity view shows calls and alerts, and stops and releases an agent in one click each', { timeout: 90000 }, async () => {
  const { client } = await connectHttp(warden.url, { headers: { Authorization: `Bearer ${mailer.key}` } });
  const { context, page, problems } = await loggedInPage();
  try {
    assert.equal(resultText(await client.callTool({ name: 'mail__add', arguments: { a: 2, b: 3 } })), '5');
    const row = page.locator('#calls tbody tr').filter({ hasText: 'mail__add' }).first();
    await row.waitFor({ state: 'visible', timeout: 10000 });
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[1], 'mail__add');
    assert.equal(cells[2], 'allow');
    assert.deepEqual(cells.slice(3, 6), ['acme', 'bob', 'mailer']);
    assert.match(cells[6], /^\d+\.\d ms$/);
    // mail__add is labelled sensitive: its call is an alert.
    const alert = page.locator('#alerts tbody tr').filter({ hasText: 'sensitive' }).first();
    await alert.waitFor({ state: 'visible', timeout: 10000 });
    assert.match(await alert.textContent(), /called mail__add, which the policy labels sensitive/);
    // An approver is offered their tenant's agent, user and tenant switches, not tool or session.
    assert.equal(await row.getByRole('button', { name: /^Stop tool/ }).count(), 0);
    assert.equal(await row.getByRole('button', { name: /^Stop session/ }).count(), 0);

    await row.getByRole('button', { name: 'Stop agent mailer', exact: true }).click();
    await page.locator('#kill-result').filter({ hasText: 'Stopped: agent:mailer.' }).waitFor({ timeout: 10000 });
    const stopped = await client.callTool({ name: 'mail__add', arguments: { a: 1, b: 1 } });
    assert.ok(stopped.isError, resultText(stopped));
    assert.match(resultText(stopped), /stopped by kill switch agent:mailer: stopped from the console by alice/);
    const listed = page.locator('#switches tbody tr[data-switch="agent:mailer"]');
    await listed.waitFor({ state: 'visible', timeout: 10000 });

    await page.getByRole('button', { name: 'Release agent:mailer', exact: true }).click();
    await page.locator('#kill-result').filter({ hasText: 'Released: agent:mailer.' }).waitFor({ timeout: 10000 });
    await listed.waitFor({ state: 'detached', timeout: 10000 });
    assert.equal(resultText(await client.callTool({ name: 'mail__add', arguments: { a: 2, b: 2 } })), '4');
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
    await client.close();
  }
});

test('the activity API is for people who may see it, and checks what it is asked', async () => {
  const { cookie } = await httpLogin(alice.key);
  const ok = await fetch(`${base}/api/activity?limit=5`, { headers: { Cookie: cookie } });
  assert.equal(ok.status, 200);
  const body = await ok.json();
  assert.ok(body.calls.length <= 5);
  assert.ok(body.calls.every((c) => c.tenant === 'acme'), JSON.stringify(body.calls));
  assert.deepEqual(body.may, { tool: false, session: false, global: false });
  for (const q of ['limit=0', 'limit=501', 'limit=x', 'all=1']) {
    const bad = await fetch(`${base}/api/activity?${q}`, { headers: { Cookie: cookie } });
    assert.equal(bad.status, 400, q);
  }
  const agent = await fetch(`${base}/api/activity`, { headers: { Authorization: `Bearer ${mailer.key}` } });
  assert.equal(agent.status, 403);
});
