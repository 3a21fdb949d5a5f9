// The developer console page: plain JavaScript over the documented API
// (docs/openapi.yaml) and nothing else. The console token lives in this
// tab's sessionStorage only; every text from the API goes into the page as
// text (textContent), never as markup.
'use strict';

const TOKEN = 'keyauthConsoleToken';
const PAGE = 10;
const $ = (id) => document.getElementById(id);

let keyCursors = [null];   // cursor of each key page seen; the last is the current
let auditCursors = [null];
let editing = null;        // the key the dialog edits
let session = 0;           // counts sign-outs: an answer to an older session is dropped

const MAX_GRACE = 604800;  // gracePeriodSeconds' bound in the API

function token() { return sessionStorage.getItem(TOKEN); }

function say(text, info) {
  const m = $('message');
  m.textContent = text;
  m.className = info ? 'info' : '';
  m.hidden = !text;
}

// An answer that came after a sign-out: nothing of it reaches the page (a new
// key's secret would otherwise show to whoever signs in next).
class Stale extends Error {}

// One call of the console API; resolves to the JSON answer, or throws an
// Error whose message is the API's code and message.
async function api(method, path, body) {
  const asked = session;
  const headers = { Authorization: 'Bearer ' + token() };
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (e) { /* an empty or non-JSON answer */ }
  if (asked !== session) throw new Stale('signed out meanwhile');
  if (!res.ok) {
    const err = data && data.error ? data.error : { code: String(res.status), message: res.statusText };
    if (res.status === 401) signOut();
    throw new Error(err.code + ': ' + err.message);
  }
  return data;
}

function cell(row, text, className) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '—' : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function button(parent, label, onClick) {
  const b = document.createElement('button');
  b.textContent = label;
  b.addEventListener('click', onClick);
  parent.appendChild(b);
  return b;
}

function when(t) { return t ? t.replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : null; }

// datetime-local (the browser's time zone) to RFC 3339 with an offset
function rfc3339(local) {
  if (!local) return null;
  return new Date(local).toISOString();
}

function scopesOf(text) { return text.split(/[\s,]+/).filter(Boolean); }

// ?limit=&cursor= of the page the cursors stack ends with
function pageQuery(cursors) {
  const cursor = cursors[cursors.length - 1];
  return '?limit=' + PAGE + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
}

function setNext(button, nextCursor) {
  $(button).disabled = !nextCursor;
  $(button).dataset.cursor = nextCursor || '';
}

function showSecret(key) {
  $('secret').textContent = key.secret;
  $('secret-box').hidden = false;
  $('secret-box').scrollIntoView();
}

function forgetSecret() {
  $('secret').textContent = '';
  $('secret-box').hidden = true;
}

async function loadKeys() {
  const page = await api('GET', '/v1/keys' + pageQuery(keyCursors));
  const rows = $('key-rows');
  rows.replaceChildren();
  for (const k of page.keys) {
    const tr = document.createElement('tr');
    tr.dataset.keyId = k.id;
    cell(tr, k.name);
    cell(tr, k.prefix);
    cell(tr, k.scopes.join(' '));
    cell(tr, k.rateLimitPerMinute === k.requestedRateLimitPerMinute
      ? k.rateLimitPerMinute : k.rateLimitPerMinute + ' (asked ' + k.requestedRateLimitPerMinute + ')');
    cell(tr, k.status, 'status-' + k.status);
    cell(tr, when(k.createdAt));
    cell(tr, when(k.expiresAt));
    cell(tr, when(k.lastUsedAt));
    cell(tr, k.usage ? k.usage.allowed : null);
    cell(tr, k.usage ? k.usage.rateLimited : null);
    const actions = cell(tr, '');
    if (k.status !== 'revoked') {
      button(actions, 'Edit', () => edit(k));
      if (!k.rolledTo) button(actions, 'Roll', () => roll(k));
      button(actions, 'Revoke', () => revoke(k));
    }
    rows.appendChild(tr);
  }
  setNext('keys-next', page.nextCursor);
}

async function loadAudit() {
  const page = await api('GET', '/v1/audit' + pageQuery(auditCursors));
  const rows = $('audit-rows');
  rows.replaceChildren();
  for (const e of page.events) {
    const tr = document.createElement('tr');
    cell(tr, when(e.at));
    cell(tr, e.actor.type === 'console' ? 'console' : 'operator ' + e.actor.user);
    cell(tr, e.action);
    cell(tr, e.target.type + ' ' + e.target.id);
    cell(tr, Object.entries(e.changes)
      .map(([f, c]) => f + ': ' + JSON.stringify(c.from) + ' → ' + JSON.stringify(c.to)).join('; '));
    rows.appendChild(tr);
  }
  setNext('audit-next', page.nextCursor);
}

async function loadPlans() {
  try {
    const res = await fetch('/api/plans');
    const data = await res.json();
    if (!res.ok) throw new Error(data.error.code + ': ' + data.error.message);
    const rows = $('plan-rows');
    rows.replaceChildren();
    for (const p of data.plans) {
      const tr = document.createElement('tr');
      cell(tr, p.name + (p.popular ? ' ★' : ''), p.popular ? 'popular' : '');
      cell(tr, '₹' + p.priceInr);
      cell(tr, '$' + p.priceUsd);
      cell(tr, p.features.join(', '));
      rows.appendChild(tr);
      $('fx').textContent = p.exchangeRate;
    }
  } catch (e) {
    $('fx').textContent = 'unavailable (' + e.message + ')';
  }
}

function fail(e) {
  if (!(e instanceof Stale)) say(e.message);
}

async function refresh() {
  try {
    await Promise.all([loadKeys(), loadAudit()]);
  } catch (e) {
    fail(e);
  }
}

async function act(what) {
  try {
    say('');
    await what();
    await refresh();
  } catch (e) {
    fail(e);
  }
}

function edit(k) {
  editing = k;
  $('edit-name').value = k.name;
  $('edit-scopes').value = k.scopes.join(' ');
  $('edit-rate').value = k.requestedRateLimitPerMinute;
  $('edit-expires').value = '';
  $('edit-never').checked = false;
  // a rolled key's expiry is its grace's end: the API refuses to move it
  const rolled = Boolean(k.rolledTo);
  $('edit-expires').disabled = rolled;
  $('edit-never').disabled = rolled;
  $('edit-rolled').hidden = !rolled;
  $('edit-dialog').showModal();
}

async function saveEdit() {
  const k = editing;
  const change = {};
  if ($('edit-name').value !== k.name) change.name = $('edit-name').value;
  const scopes = scopesOf($('edit-scopes').value);
  if (scopes.join(' ') !== k.scopes.join(' ')) change.scopes = scopes;
  const rate = Number($('edit-rate').value);
  if (rate !== k.requestedRateLimitPerMinute) change.rateLimitPerMinute = rate;
  if ($('edit-never').disabled) {
    // a rolled key: no expiry to send
  } else if ($('edit-never').checked) change.expiresAt = null;
  else if ($('edit-expires').value) change.expiresAt = rfc3339($('edit-expires').value);
  if (Object.keys(change).length === 0) return;
  await act(() => api('PATCH', '/v1/keys/' + encodeURIComponent(k.id), change));
}

// The grace the roll prompt's answer asks for, or null (then nothing is
// rolled): Cancel, an empty answer, anything but a whole number of seconds
// in range (said why), or 0 (the old key revoked at once) not confirmed.
function graceFor(k, answer) {
  if (answer === null || answer.trim() === '') {
    if (answer !== null) say('Nothing rolled: no grace period was given.', true);
    return null;
  }
  const text = answer.trim();
  const grace = /^[0-9]{1,7}$/.test(text) ? Number(text) : NaN;
  if (!(grace <= MAX_GRACE)) {
    say('Nothing rolled: the grace period must be a whole number of seconds from 0 to ' + MAX_GRACE +
        ', not "' + text + '".');
    return null;
  }
  if (grace === 0 && !confirm('A grace period of 0 revokes "' + k.name + '" (' + k.prefix +
                              '…) at once: requests with the old secret are refused from now on. Roll it?')) {
    return null;
  }
  return grace;
}

function roll(k) {
  say('');
  const grace = graceFor(k, prompt('Roll "' + k.name + '": a new secret replaces this one.\n' +
                                   'Seconds the old secret keeps working (0 to ' + MAX_GRACE +
                                   '; 0 revokes it at once):', ''));
  if (grace === null) return;
  act(async () => {
    showSecret(await api('POST', '/v1/keys/' + encodeURIComponent(k.id) + '/roll', { gracePeriodSeconds: grace }));
  });
}

function revoke(k) {
  if (!confirm('Revoke "' + k.name + '" (' + k.prefix + '…)? Requests with it are refused at once.')) return;
  act(() => api('POST', '/v1/keys/' + encodeURIComponent(k.id) + '/revoke'));
}

// Nothing of the account stays in the page: not its token, a secret shown
// once, its keys and trail, nor a dialog left open; answers still on their
// way are dropped (Stale). Also run on any 401.
function signOut() {
  session++;
  sessionStorage.removeItem(TOKEN);
  forgetSecret();
  if ($('edit-dialog').open) $('edit-dialog').close('cancel');
  editing = null;
  $('key-rows').replaceChildren();
  $('audit-rows').replaceChildren();
  setNext('keys-next', null);
  setNext('audit-next', null);
  $('app').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in').hidden = false;
}

function signedIn() {
  $('sign-in').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = false;
  keyCursors = [null];
  auditCursors = [null];
  refresh();
}

document.addEventListener('DOMContentLoaded', () => {
  $('sign-in-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN, $('token').value.trim());
    $('token').value = '';
    say('');
    signedIn();
  });
  $('sign-out').addEventListener('click', () => {
    say('');
    signOut();
  });
  $('create-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const body = {
      name: $('create-name').value,
      scopes: scopesOf($('create-scopes').value),
      rateLimitPerMinute: Number($('create-rate').value),
    };
    const expires = rfc3339($('create-expires').value);
    if (expires) body.expiresAt = expires;
    act(async () => {
      showSecret(await api('POST', '/v1/keys', body));
      $('create-name').value = '';
    });
  });
  $('copy-secret').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($('secret').textContent);
      say('Copied.', true);
    } catch (e) {
      say('Copy failed: select the secret and copy it by hand.');
    }
  });
  $('dismiss-secret').addEventListener('click', forgetSecret);
  $('keys-first').addEventListener('click', () => { keyCursors = [null]; act(loadKeys); });
  $('keys-next').addEventListener('click', () => {
    keyCursors.push($('keys-next').dataset.cursor);
    act(loadKeys);
  });
  $('audit-first').addEventListener('click', () => { auditCursors = [null]; act(loadAudit); });
  $('audit-next').addEventListener('click', () => {
    auditCursors.push($('audit-next').dataset.cursor);
    act(loadAudit);
  });
  $('edit-dialog').addEventListener('close', () => {
    if ($('edit-dialog').returnValue === 'save') saveEdit();
  });
  loadPlans();
  setInterval(loadPlans, 60000);
  if (token()) signedIn();
});
