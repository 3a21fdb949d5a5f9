// The developer console page: plain JavaScript over the documented API
// (docs/openapi.yaml) and nothing else. The console token lives in this
// tab's sessionStorage only; every text from the API goes into the page as
// text (textContent), never as markup. The usage charts are drawn by uPlot
// (uPlot.iife.min.js beside this file: make copies it from npm, no CDN).
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
    cell(tr, scopesText(k));
    cell(tr, k.rateLimitPerMinute === k.requestedRateLimitPerMinute
      ? k.rateLimitPerMinute : k.rateLimitPerMinute + ' (asked ' + k.requestedRateLimitPerMinute + ')');
    leakNote(cell(tr, k.status, 'status-' + k.status), k.leak);
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
  noteKeys(page.keys);
}

async function loadAudit() {
  const page = await api('GET', '/v1/audit' + pageQuery(auditCursors));
  const rows = $('audit-rows');
  rows.replaceChildren();
  for (const e of page.events) {
    const tr = document.createElement('tr');
    cell(tr, when(e.at));
    cell(tr, e.actor.type === 'console' ? 'console'
      : e.actor.type === 'secret_scanning' ? 'secret scanning (' + e.actor.source + ')'
      : e.actor.type === 'admin' ? 'admin ' + e.actor.token : 'operator ' + e.actor.user);
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

// ---- Usage over time: GET /v1/usage (the last 30 UTC days, the last 48 UTC
// hours: the API's default ranges) of the account or of one key, and the
// quota of GET /v1/account as a gauge. Each chart has a table beside it
// with the numbers it draws; window.keyauthUsageCharts holds the charts
// (their uPlot instances, whose .data are the arrays drawn) and the answers.

const FIELDS = ['allowed', 'rateLimited', 'quotaExceeded', 'units'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const COLORS = { allowed: '#2da44e', rateLimited: '#d4a72c', quotaExceeded: '#cf222e' };
const CHARTS = {
  daily: { granularity: 'day', chart: 'chart-daily', table: 'table-daily', range: 'range-daily' },
  hourly: { granularity: 'hour', chart: 'chart-hourly', table: 'table-hourly', range: 'range-hourly' },
};
const keysSeen = new Map();  // id -> "name (prefix…)" of the keys listed in this session
let usageLoads = 0;          // a newer load makes an older one's answers moot
window.keyauthUsageCharts = null;

const count = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'));
const pad = (n) => String(n).padStart(2, '0');

// "2026-11-27" or "2026-11-27 13:00" of an RFC 3339 UTC time
function periodLabel(start, granularity) {
  const d = new Date(start);
  const day = d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate());
  return granularity === 'hour' ? day + ' ' + pad(d.getUTCHours()) + ':00' : day;
}

// "1 Dec" (and the year when it is not this one) of an RFC 3339 UTC time
function shortDate(t) {
  const d = new Date(t);
  const year = d.getUTCFullYear() === new Date().getUTCFullYear() ? '' : ' ' + d.getUTCFullYear();
  return d.getUTCDate() + ' ' + MONTHS[d.getUTCMonth()] + year;
}

// The gauge's sentence of an account's quota (null: none).
function quotaText(q) {
  if (!q) return 'No quota';
  const period = { day: ' today', month: ' this month', total: ' in total' }[q.period] || '';
  let text = q.used === null
    ? 'Usage unavailable: ' + count(q.units) + ' units' + period
    : count(q.used) + ' of ' + count(q.units) + ' units' + period;
  if (q.resetsAt) text += ', resets ' + shortDate(q.resetsAt);
  return text;
}

async function loadQuota() {
  const account = await api('GET', '/v1/account');
  const q = account.quota;
  $('quota-text').textContent = quotaText(q);
  const meter = $('quota-meter');
  meter.hidden = !q || q.used === null;
  if (!meter.hidden) {
    meter.max = q.units;
    meter.high = q.units * 0.9;
    meter.optimum = 0;
    meter.value = Math.min(q.used, q.units);
    meter.title = count(q.used) + ' of ' + count(q.units) + ' units';
  }
  return account;
}

function fillTable(table, usage) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const p of usage.series) {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = periodLabel(p.start, usage.granularity);
    th.dataset.start = p.start;
    tr.appendChild(th);
    for (const f of FIELDS) cell(tr, p[f], 'num').dataset.field = f;
    body.appendChild(tr);
  }
  const foot = table.tFoot;
  foot.replaceChildren();
  const tr = document.createElement('tr');
  const th = document.createElement('th');
  th.scope = 'row';
  th.textContent = 'Total';
  tr.appendChild(th);
  for (const f of FIELDS) cell(tr, usage.totals[f], 'num').dataset.field = f;
  foot.appendChild(tr);
}

// uPlot's data of an answer: x in epoch seconds, then the stack from the top
// down (allowed + rate-limited + quota-exceeded, allowed + rate-limited,
// allowed), drawn in that order, each bar over the taller one before it.
function stackedData(usage) {
  const x = [], top = [], middle = [], bottom = [];
  for (const p of usage.series) {
    x.push(Date.parse(p.start) / 1000);
    bottom.push(p.allowed);
    middle.push(p.allowed + p.rateLimited);
    top.push(p.allowed + p.rateLimited + p.quotaExceeded);
  }
  return [x, top, middle, bottom];
}

// An x axis tick: "29 Oct" (days), "14:00" or at midnight "27 Nov" (hours), UTC.
function axisLabel(ts, granularity) {
  const d = new Date(ts * 1000);
  if (granularity === 'hour' && d.getUTCHours() !== 0) return pad(d.getUTCHours()) + ':00';
  return d.getUTCDate() + ' ' + MONTHS[d.getUTCMonth()];
}

function chartOptions(el, usage) {
  const raw = (field) => (u, v, si, i) => (i === null || i === undefined ? '—' : count(usage.series[i][field]));
  const bars = uPlot.paths.bars({ size: [0.8, 40], align: 1 });
  const series = (label, field) => ({
    label, value: raw(field), paths: bars, points: { show: false },
    stroke: COLORS[field], fill: COLORS[field], width: 0,
  });
  const step = usage.granularity === 'hour' ? 3600 : 86400;
  const from = Date.parse(usage.from) / 1000, to = Date.parse(usage.to) / 1000;
  return {
    width: Math.max(320, el.clientWidth),
    height: 220,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: {
      x: { time: true, range: () => [from, to] },
      y: { range: (u, min, max) => [0, max > 0 ? uPlot.rangeNum(0, max, 0.1, true)[1] : 1] },
    },
    axes: [
      { space: usage.granularity === 'hour' ? 60 : 50, incrs: [step, 2 * step, 3 * step, 6 * step, 7 * step, 12 * step],
        values: (u, splits) => splits.map((ts) => axisLabel(ts, usage.granularity)) },
      { size: 60, values: (u, splits) => splits.map((v) => (Number.isInteger(v) ? count(v) : '')) },
    ],
    cursor: { points: { show: false }, drag: { x: false, y: false } },
    legend: { show: true },
    series: [
      { label: usage.granularity === 'hour' ? 'Hour (UTC)' : 'Day (UTC)',
        value: (u, v) => (v === null || v === undefined ? '—' : periodLabel(new Date(v * 1000).toISOString(), usage.granularity)) },
      series('Quota exceeded', 'quotaExceeded'),
      series('Rate-limited', 'rateLimited'),
      series('Allowed', 'allowed'),
    ],
  };
}

function drawChart(name, usage, keyId) {
  const c = CHARTS[name];
  const el = $(c.chart);
  const shown = window.keyauthUsageCharts || {};
  if (shown[name] && shown[name].chart) shown[name].chart.destroy();
  el.replaceChildren();
  const chart = new uPlot(chartOptions(el, usage), stackedData(usage), el);
  fillTable($(c.table), usage);
  // the first and the last period shown: the answer's `to` is the
  // exclusive end, the start of the period after the last
  const last = usage.series[usage.series.length - 1];
  $(c.range).textContent = '(' + periodLabel(usage.from, usage.granularity) + ' to ' +
    periodLabel(last.start, usage.granularity) + ' UTC)';
  return { chart, usage, keyId };
}

function keyOption(id, label) {
  const o = document.createElement('option');
  o.value = id;
  o.textContent = label;
  return o;
}

// The select's choices: the account, then every key listed in this session.
function noteKeys(keys) {
  for (const k of keys) keysSeen.set(k.id, k.name + ' (' + k.prefix + '…)' + (k.status === 'active' ? '' : ', ' + k.status));
  const select = $('usage-key');
  const chosen = select.value;
  const options = [keyOption('', 'all keys of the account')];
  for (const [id, label] of keysSeen) options.push(keyOption(id, label));
  select.replaceChildren(...options);
  select.value = keysSeen.has(chosen) ? chosen : '';
}

async function loadUsage() {
  const mine = ++usageLoads;
  const keyId = $('usage-key').value;
  const section = $('usage');
  section.dataset.state = 'loading';
  const q = keyId ? '&keyId=' + encodeURIComponent(keyId) : '';
  try {
    const [daily, hourly] = await Promise.all([
      api('GET', '/v1/usage?granularity=day' + q),
      api('GET', '/v1/usage?granularity=hour' + q),
      loadQuota(),
    ]);
    if (mine !== usageLoads) return;
    window.keyauthUsageCharts = Object.assign(window.keyauthUsageCharts || {}, {
      daily: drawChart('daily', daily, keyId),
      hourly: drawChart('hourly', hourly, keyId),
    });
    section.dataset.keyId = keyId;
    section.dataset.state = 'ready';
  } catch (e) {
    if (mine === usageLoads) section.dataset.state = 'failed';
    fail(e);
  }
}

function forgetUsage() {
  usageLoads++;
  const shown = window.keyauthUsageCharts || {};
  for (const name of Object.keys(CHARTS)) {
    if (shown[name] && shown[name].chart) shown[name].chart.destroy();
    const c = CHARTS[name];
    $(c.chart).replaceChildren();
    $(c.table).tBodies[0].replaceChildren();
    $(c.table).tFoot.replaceChildren();
    $(c.range).textContent = '';
  }
  window.keyauthUsageCharts = null;
  keysSeen.clear();
  noteKeys([]);
  $('quota-text').textContent = '…';
  $('quota-meter').hidden = true;
  $('usage').dataset.state = 'empty';
  delete $('usage').dataset.keyId;
}

// A chart follows its container's width (uPlot draws at a fixed size).
function resizeCharts() {
  const shown = window.keyauthUsageCharts || {};
  for (const name of Object.keys(CHARTS)) {
    const el = $(CHARTS[name].chart);
    if (shown[name] && shown[name].chart && el.clientWidth > 0) {
      shown[name].chart.setSize({ width: Math.max(320, el.clientWidth), height: 220 });
    }
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
  $('edit-ips').value = ipsText(k.allowedIps);
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
  const ips = ipsOf($('edit-ips').value);
  if (!sameIps(ips, k.allowedIps)) change.allowedIps = ips;
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
  forgetUsage();
  $('app').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in').hidden = false;
}

// A session handed over by the business's own login: the console opened at
// /console/#session=kac_... (POST /v1/admin/accounts/{id}/sessions). The
// token goes into this tab's sessionStorage and out of the address bar and
// the history at once, so that no URL the browser keeps holds it (nor a
// request or a Referer: a fragment is never sent).
function takeSession() {
  const m = /^#session=(kac_[A-Za-z0-9]{1,64})$/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN, m[1]);
  history.replaceState(null, '', location.pathname + location.search);
}

function signedIn() {
  $('sign-in').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = false;
  keyCursors = [null];
  auditCursors = [null];
  refresh();
  loadUsage();
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
    const ips = ipsOf($('create-ips').value);
    if (ips) body.allowedIps = ips;
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
  $('usage-key').addEventListener('change', () => { say(''); loadUsage(); });
  $('usage-form').addEventListener('submit', (ev) => { ev.preventDefault(); say(''); loadUsage(); });
  window.addEventListener('resize', resizeCharts);
  loadPlans();
  setInterval(loadPlans, 60000);
  takeSession();
  if (token()) signedIn();
});
