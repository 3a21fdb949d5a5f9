// The developer console page: how a key's fields beyond its name, scopes
// and rate are shown and read back (loaded before console.js, which calls
// these). Text only, never markup, as in console.js.
'use strict';

// A key reported leaked: said in its status cell, with where it was found (a link only to https).
function leakNote(td, leak) {
  if (!leak) return;
  td.classList.add('leaked');
  const link = leak.url && leak.url.startsWith('https://');
  const where = document.createElement(link ? 'a' : 'span');
  where.textContent = (leak.url ? 'found by ' : 'reported by ') + leak.source;
  if (link) Object.assign(where, { href: leak.url, rel: 'noopener noreferrer', target: '_blank', title: leak.url });
  td.append(leak.revoked ? ' — leaked' : ' — reported leaked', document.createElement('br'), where, ' ' + when(leak.reportedAt));
}

// allowedIps as the forms write it: CIDRs apart by spaces or commas; blank is
// any address (null). The API normalizes them and names a bad one.
function ipsOf(text) {
  const list = text.split(/[\s,]+/).filter(Boolean);
  return list.length ? list : null;
}
function ipsText(list) { return list ? list.join(' ') : ''; }
function sameIps(a, b) { return ipsText(a) === ipsText(b); }

// The scopes cell also says where the key may be used from, when it is limited.
function scopesText(k) {
  return k.scopes.join(' ') + (k.allowedIps ? ' — from ' + k.allowedIps.join(', ') : '');
}
