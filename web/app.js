// The approvals console (docs/approvals.md "The console"). One page: the pending list, the
// history and the activity (recent calls, alerts, kill switches, with one-click Stop and Release)
// at /, one approval at /approvals/ID, a login form when there is no session.
//
// Everything shown comes from the API and much of it (the arguments above all) was written by an
// agent, so by an attacker: it reaches the page only through textContent and createElement, never
// as HTML. The CSP forbids inline script, so nothing here may rely on it either.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const state = { csrf: '', timer: null, approvalId: null };

  const byId = (id) => document.getElementById(id);

  // What a person reads of a record's field: the server's KEY_display (docs/approvals.md "What
  // people see": bidirectional controls, other format characters and controls made visible
  // escapes, \u202e), never the raw KEY, which is for machines (ids in requests). A field the
  // server sent no display text for shows as empty.
  function shown(record, key) {
    const text = record ? record[`${key}_display`] : undefined;
    if (Array.isArray(text)) return text.map(String);
    return text === undefined || text === null ? '' : String(text);
  }

  // An element with text (never parsed as HTML) and an optional class.
  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function showError(message) {
    const node = byId('error');
    node.textContent = message || '';
    node.hidden = !message;
  }

  function showSection(name) {
    for (const section of ['login', 'list', 'detail']) byId(section).hidden = section !== name;
  }

  function stopRefresh() {
    if (state.timer !== null) clearInterval(state.timer);
    state.timer = null;
  }

  function errorOf(reply) {
    if (reply.data && typeof reply.data.error === 'string') return reply.data.error;
    return `HTTP ${reply.status}`;
  }

  // A JSON request to this server. State-changing ones carry the session's CSRF token.
  async function request(method, path, body) {
    const init = { method, headers: {}, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    if (method !== 'GET' && state.csrf) init.headers['X-CSRF-Token'] = state.csrf;
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      return { status: 0, data: { error: `cannot reach warden: ${err.message}` } };
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (response.status === 401 && !path.startsWith('/console/')) showLogin();
    return { status: response.status, data };
  }

  // "42 s", "3 min", "2 h 5 min", "1 d 4 h" since an RFC 3339 time.
  function ageOf(time) {
    const then = Date.parse(time);
    if (Number.isNaN(then)) return '';
    const s = Math.max(0, Math.floor((Date.now() - then) / 1000));
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  function approvalHref(approval) {
    return `/approvals/${encodeURIComponent(approval.id)}`;
  }

  // A table cell holding a link to the approval's page.
  function linkCell(approval, text, className) {
    const cell = el('td', undefined, className);
    const link = el('a', text === '' ? '-' : text);
    link.href = approvalHref(approval);
    cell.append(link);
    return cell;
  }

  // ---- Session ----

  function showLogin() {
    stopRefresh();
    state.csrf = '';
    byId('who').textContent = '';
    byId('logout').hidden = true;
    showSection('login');
    byId('credential').focus();
  }

  function startSession(session) {
    state.csrf = session.csrf;
    const who = session.tenant ? `${session.user} (${session.tenant})` : session.user;
    byId('who').textContent = who;
    byId('logout').hidden = false;
    showError('');
    route();
  }

  async function login(event) {
    event.preventDefault();
    const field = byId('credential');
    const reply = await request('POST', '/console/login', { credential: field.value });
    if (reply.status !== 200) {
      showError(`login refused: ${errorOf(reply)}`);
      return;
    }
    field.value = '';
    startSession(reply.data);
  }

  async function logout() {
    await request('POST', '/console/logout');
    showLogin();
  }

  // ---- The list: pending approvals and the history ----

  function pendingRow(approval) {
    const row = el('tr');
    row.dataset.id = approval.id;
    row.append(
      linkCell(approval, shown(approval, 'tool'), 'tool'),
      linkCell(approval, approval.risk, `risk risk-${approval.risk}`),
      linkCell(approval, shown(approval, 'tenant'), 'tenant'),
      linkCell(approval, shown(approval, 'user'), 'user'),
      linkCell(approval, shown(approval, 'agent'), 'agent'),
      linkCell(approval, ageOf(approval.created), 'age'),
    );
    return row;
  }

  function historyRow(approval) {
    const row = el('tr');
    row.dataset.id = approval.id;
    row.append(
      linkCell(approval, shown(approval, 'tool'), 'tool'),
      el('td', approval.status, 'status'),
      el('td', shown(approval, 'tenant'), 'tenant'),
      el('td', shown(approval, 'user'), 'user'),
      el('td', shown(approval, 'agent'), 'agent'),
      el('td', shown(approval, 'decided_by'), 'decided-by'),
      el('td', approval.decided_at, 'decided-at'),
      el('td', shown(approval, 'comment'), 'comment'),
    );
    return row;
  }

  async function refreshList() {
    refreshActivity();
    const [pending, all] = await Promise.all([
      request('GET', '/api/approvals'),
      request('GET', '/api/approvals?all=1'),
    ]);
    if (pending.status !== 200 || !pending.data || !Array.isArray(pending.data.approvals)) {
      if (pending.status !== 401) showError(`cannot list approvals: ${errorOf(pending)}`);
      return;
    }
    showError('');
    const waiting = pending.data.approvals.filter((a) => a.status === 'pending');
    byId('pending').tBodies[0].replaceChildren(...waiting.map(pendingRow));
    byId('pending-empty').hidden = waiting.length > 0;
    if (all.status === 200 && all.data && Array.isArray(all.data.approvals)) {
      const decided = all.data.approvals.filter((a) => a.status !== 'pending');
      byId('history').tBodies[0].replaceChildren(...decided.map(historyRow));
      byId('history-empty').hidden = decided.length > 0;
    }
  }

  // ---- One approval ----

  function fact(list, name, value) {
    list.append(el('dt', name), el('dd', value === undefined || value === '' ? '-' : value));
  }

  function renderApproval(approval) {
    byId('detail-id').textContent = approval.id;
    byId('detail-tool').textContent = shown(approval, 'tool');
    const status = byId('detail-status');
    status.textContent = approval.status;
    status.className = `badge status-${approval.status}`;
    const facts = byId('detail-facts');
    facts.replaceChildren();
    fact(facts, 'Tool', shown(approval, 'tool'));
    fact(facts, 'Server', shown(approval, 'server'));
    fact(facts, 'Status', approval.status);
    fact(facts, 'Risk', approval.risk);
    fact(facts, 'Tenant', shown(approval, 'tenant'));
    fact(facts, 'User', shown(approval, 'user'));
    fact(facts, 'Agent', shown(approval, 'agent'));
    fact(facts, 'Reason', shown(approval, 'reason'));
    const reasons = shown(approval, 'reasons');
    if (Array.isArray(reasons) && reasons.length > 0) {
      fact(facts, 'Later reasons', reasons.join('\n'));
    }
    fact(facts, 'Rule', shown(approval, 'rule'));
    fact(facts, 'Asked', approval.created);
    fact(facts, 'Expires', approval.expires);
    fact(facts, 'Decided by', shown(approval, 'decided_by'));
    fact(facts, 'Decided at', approval.decided_at);
    fact(facts, 'Comment', shown(approval, 'comment'));
    const votes = Array.isArray(approval.votes) ? approval.votes : [];
    fact(facts, 'Votes', `${votes.length} of ${approval.votes_needed ?? 1} needed`);
    // The full arguments: the server's pretty-printed JSON with controls and format characters
    // escaped (\u202e), as text. Nothing is cut; the box scrolls. Approve decides the stored call.
    byId('detail-arguments').textContent = shown(approval, 'arguments');
    byId('detail-votes').replaceChildren(
      ...votes.map((v) => el('li', `${shown(v, 'who')} at ${v.at}`)),
    );
    const open = approval.status === 'pending' && approval.may_decide !== false;
    byId('approve').disabled = !open;
    byId('deny').disabled = !open;
    byId('comment').disabled = !open;
    if (approval.status !== 'pending') stopRefresh();
  }

  async function refreshApproval() {
    const reply = await request('GET', `/api/approvals/${encodeURIComponent(state.approvalId)}`);
    if (reply.status !== 200 || !reply.data) {
      if (reply.status !== 401) showError(`cannot show approval ${state.approvalId}: ${errorOf(reply)}`);
      stopRefresh();
      return;
    }
    showError('');
    renderApproval(reply.data);
  }

  async function decide(verdict) {
    const id = state.approvalId;
    const comment = byId('comment').value;
    byId('approve').disabled = true;
    byId('deny').disabled = true;
    const reply = await request('POST', `/api/approvals/${encodeURIComponent(id)}/${verdict}`, {
      comment,
    });
    const result = byId('decide-result');
    if (reply.status !== 200 || !reply.data) {
      result.textContent = `${verdict} refused: ${errorOf(reply)}`;
      await refreshApproval();
      return;
    }
    result.textContent = verdict === 'approve' ? 'Approved.' : 'Denied.';
    if (reply.data.status === 'pending') result.textContent += ' More votes are needed.';
    renderApproval(reply.data);
  }

  // ---- Undo: the compensating call of a call that ran (POST /api/calls/ID/undo) ----

  async function undo(event) {
    event.preventDefault();
    const id = byId('undo-call').value.trim();
    const out = byId('undo-result');
    if (!/^[0-9]+$/.test(id)) {
      out.textContent = 'A call id is the number of its audit entry.';
      return;
    }
    out.textContent = 'Running the compensating call...';
    const reply = await request('POST', `/api/calls/${id}/undo`, {});
    if (reply.status === 200 && reply.data) {
      out.textContent = `Undone: ${reply.data.undo_tool} ran as call ${reply.data.undo_call_id}.`;
    } else {
      out.textContent = `Not undone: ${errorOf(reply)}`;
    }
  }

  // ---- Activity: recent calls, alerts, kill switches (GET /api/activity, POST|DELETE /api/kill) ----

  // A button that pulls the switch of `scope` and `name` (raw: what the API takes); its accessible
  // name says which, in `label` (the display text).
  function stopButton(scope, name, label) {
    const button = el('button', scope, 'stop');
    button.type = 'button';
    button.setAttribute('aria-label', `Stop ${scope} ${label}`);
    button.addEventListener('click', () => changeSwitch(true, scope, name, `${scope}:${label}`));
    return button;
  }

  function callRow(call, may) {
    const row = el('tr');
    row.dataset.id = call.id;
    const stops = el('td', undefined, 'stops');
    for (const scope of ['agent', 'user', 'tenant', 'tool', 'session']) {
      const offered = scope === 'tool' || scope === 'session' ? may[scope] : true;
      if (offered && call[scope]) stops.append(stopButton(scope, call[scope], shown(call, scope)));
    }
    row.append(
      el('td', ageOf(call.time), 'age'),
      el('td', shown(call, 'tool'), 'tool'),
      el('td', call.decision, `decision decision-${call.decision}`),
      el('td', shown(call, 'tenant'), 'tenant'),
      el('td', shown(call, 'user'), 'user'),
      el('td', shown(call, 'agent'), 'agent'),
      el('td', `${(Number(call.latency_us) / 1000).toFixed(1)} ms`, 'latency'),
      stops,
    );
    return row;
  }

  function alertRow(alert) {
    const row = el('tr');
    row.dataset.id = alert.id;
    row.append(
      el('td', ageOf(alert.time), 'age'),
      el('td', shown(alert, 'detector'), 'detector'),
      el('td', shown(alert, 'tenant'), 'tenant'),
      el('td', shown(alert, 'agent'), 'agent'),
      el('td', shown(alert, 'message'), 'message'),
    );
    return row;
  }

  function switchRow(sw) {
    const row = el('tr');
    row.dataset.switch = sw.switch;
    const release = el('button', 'Release');
    release.type = 'button';
    release.setAttribute('aria-label', `Release ${shown(sw, 'switch')}`);
    release.addEventListener('click', () => changeSwitch(false, sw.scope, sw.name, shown(sw, 'switch')));
    const cell = el('td');
    cell.append(release);
    row.append(el('td', shown(sw, 'switch'), 'switch'), el('td', shown(sw, 'reason'), 'reason'),
      el('td', shown(sw, 'who'), 'who'), el('td', sw.since, 'since'), cell);
    return row;
  }

  async function refreshActivity() {
    const reply = await request('GET', '/api/activity');
    if (reply.status !== 200 || !reply.data) {
      if (reply.status !== 401) byId('kill-result').textContent = `cannot show the activity: ${errorOf(reply)}`;
      return;
    }
    const { calls = [], alerts = [], switches = [], may = {} } = reply.data;
    byId('calls').tBodies[0].replaceChildren(...calls.map((c) => callRow(c, may)));
    byId('calls-empty').hidden = calls.length > 0;
    byId('alerts').tBodies[0].replaceChildren(...alerts.map(alertRow));
    byId('alerts-empty').hidden = alerts.length > 0;
    byId('switches').tBodies[0].replaceChildren(...switches.map(switchRow));
    byId('switches-empty').hidden = switches.length > 0;
  }

  // `label`: the switch's display text, for the result line.
  async function changeSwitch(kill, scope, name, label) {
    const out = byId('kill-result');
    const body = kill ? { scope, name, reason: `stopped from the console by ${byId('who').textContent}` }
      : { scope, name };
    const reply = await request(kill ? 'POST' : 'DELETE', '/api/kill', body);
    if (reply.status === 200 && reply.data) {
      // `label`: the switch as shown (its display text), not the API's raw answer.
      out.textContent = `${kill ? 'Stopped' : 'Released'}: ${label}.`;
    } else {
      out.textContent = `${kill ? 'Not stopped' : 'Not released'}: ${errorOf(reply)}`;
    }
    await refreshActivity();
  }

  // ---- Routing: the path says which view ----

  function route() {
    stopRefresh();
    const prefix = '/approvals/';
    if (location.pathname.startsWith(prefix)) {
      state.approvalId = decodeURIComponent(location.pathname.slice(prefix.length));
      byId('decide-result').textContent = '';
      showSection('detail');
      refreshApproval();
      state.timer = setInterval(refreshApproval, REFRESH_MS);
    } else {
      state.approvalId = null;
      showSection('list');
      refreshList();
      state.timer = setInterval(refreshList, REFRESH_MS);
    }
  }

  async function start() {
    byId('login-form').addEventListener('submit', login);
    byId('logout').addEventListener('click', logout);
    byId('approve').addEventListener('click', () => decide('approve'));
    byId('deny').addEventListener('click', () => decide('deny'));
    byId('decide-form').addEventListener('submit', (event) => event.preventDefault());
    byId('undo-form').addEventListener('submit', undo);
    const session = await request('GET', '/console/session');
    if (session.status === 200 && session.data) {
      startSession(session.data);
    } else {
      showLogin();
    }
  }

  document.addEventListener('DOMContentLoaded', start);
})();
