// Validates real answers against docs/openapi.yaml (t/24-openapi.t):
//   node validate.mjs SPEC EXCHANGES.jsonl [--unsent TYPE]...
// Each line of EXCHANGES is one answer the running stack gave:
//   {"method","path","status","headers":{lower-case name: value},"body"}
// or one webhook request keyauthd sent to a receiver:
//   {"webhook":true,"headers":{lower-case name: value},"body"}
// A webhook request fails if its body's type is not an event of the spec's
// `webhooks`, a header the event's operation documents is missing or does
// not match its schema, its Content-Type is not documented, or its body
// does not match the event's schema. If any webhook request is given, every
// event of the spec must have been seen, but those named --unsent (types
// reserved, that nothing sends yet).
// An answer fails if its path and method are not an operation of the spec,
// its status is not one the operation documents, its Content-Type is not a
// media type the response documents, its body does not match that media
// type's schema (Ajv, JSON Schema 2020-12, formats checked; a JSON body
// parsed first, any other one, such as text/csv, checked as a string), or a
// documented header it carries does not match its schema. Every operation
// must also have been seen answering with a 2xx and with an error.
// Prints each failure; exit 1 if any.
import fs from 'node:fs';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const [specFile, exchangesFile, ...options] = process.argv.slice(2);
const unsent = new Set(options.filter((o, i) => options[i - 1] === '--unsent'));
const spec = YAML.parse(fs.readFileSync(specFile, 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(spec, 'spec');

const deref = (obj) => {
  while (obj && obj.$ref) {
    obj = obj.$ref.slice(2).split('/').reduce((o, k) => o[k.replace(/~1/g, '/')], spec);
  }
  return obj;
};
const refOf = (pointer) => ({ $ref: 'spec#' + pointer });

// templates to regexes: "/v1/keys/{id}/roll" -> ^/v1/keys/[^/]+/roll$
const operations = [];
for (const [template, item] of Object.entries(spec.paths)) {
  const re = new RegExp('^' + template.replace(/\{[^}]+\}/g, '[^/]+') + '$');
  for (const method of ['get', 'post', 'patch', 'put', 'delete']) {
    if (item[method]) operations.push({ template, method, re, op: item[method], seen: new Set() });
  }
}

const failures = [];
const mediaTypeOf = (headers) => (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
// a value against a schema of the spec, found where the spec has it so
// that its $refs resolve; failure text, or none
const mismatch = (pointer, value) => {
  const check = ajv.compile(refOf(pointer));
  return check(value) ? null : ajv.errorsText(check.errors);
};

// One webhook request: its event, headers and body against spec.webhooks.
const webhooksSeen = new Set();
const checkWebhook = (x) => {
  let body;
  try { body = JSON.parse(x.body); } catch { failures.push(`webhook: the body is not JSON: ${x.body.slice(0, 300)}`); return; }
  const what = `webhook ${body.type}`;
  const op = spec.webhooks?.[body.type]?.post;
  if (!op) { failures.push(`${what}: no such event in the spec's webhooks`); return; }
  webhooksSeen.add(body.type);
  const opPointer = `/webhooks/${body.type}/post`;
  (op.parameters ?? []).forEach((p, i) => {
    const param = deref(p);
    if (param.in !== 'header') return;
    const value = x.headers[param.name.toLowerCase()];
    if (value === undefined) {
      if (param.required) failures.push(`${what}: no ${param.name} header`);
      return;
    }
    const pointer = p.$ref ? `${p.$ref.slice(1)}/schema` : `${opPointer}/parameters/${i}/schema`;
    const bad = mismatch(pointer, value);
    if (bad) failures.push(`${what}: header ${param.name}: ${JSON.stringify(value)} ${bad}`);
  });
  const documented = Object.keys(op.requestBody.content);
  const mediaType = documented.find((m) => m.toLowerCase() === mediaTypeOf(x.headers));
  if (!mediaType) {
    failures.push(`${what}: Content-Type ${x.headers['content-type']}, documented ${documented.join(', ')}`);
    return;
  }
  const bad = mismatch(`${opPointer}/requestBody/content/${mediaType.replace(/\//g, '~1')}/schema`, body);
  if (bad) failures.push(`${what}: ${bad} in ${x.body.slice(0, 300)}`);
};

const lines = fs.readFileSync(exchangesFile, 'utf8').split('\n').filter(Boolean);
for (const line of lines) {
  const x = JSON.parse(line);
  if (x.webhook) { checkWebhook(x); continue; }
  const what = `${x.method} ${x.path} -> ${x.status}`;
  const method = x.method === 'HEAD' ? 'get' : x.method.toLowerCase();
  const path = x.path.split('?')[0];
  const o = operations.find((c) => c.method === method && c.re.test(path));
  if (!o) {
    // a method the path does not have: 405 in the error layout, with Allow
    const any = operations.filter((c) => c.re.test(path));
    if (any.length && x.status === 405) {
      const check = ajv.compile(refOf('/components/schemas/Error'));
      if (!check(JSON.parse(x.body))) failures.push(`${what}: ${ajv.errorsText(check.errors)}`);
      if (!x.headers.allow) failures.push(`${what}: no Allow header`);
      any.forEach((c) => c.seen.add(405));
    } else {
      failures.push(`${what}: no such operation in the spec`);
    }
    continue;
  }
  const pointer = `/paths/${o.template.replace(/\//g, '~1')}/${o.method}/responses/${x.status}`;
  const response = deref(o.op.responses[String(x.status)]);
  if (!response) { failures.push(`${what}: status not documented for ${o.method.toUpperCase()} ${o.template}`); continue; }
  o.seen.add(x.status);
  for (const [name, h] of Object.entries(response.headers ?? {})) {
    const value = x.headers[name.toLowerCase()];
    if (value === undefined) continue;
    const schema = deref(h).schema;
    const check = ajv.compile(schema.$ref ? refOf(schema.$ref.slice(1)) : schema);
    if (!check(value)) failures.push(`${what}: header ${name}: ${JSON.stringify(value)} ${ajv.errorsText(check.errors)}`);
  }
  if (!response.content) continue;
  // the answer's media type (without its parameters) among those documented
  const documented = Object.keys(response.content);
  const type = mediaTypeOf(x.headers);
  const mediaType = documented.find((m) => m.toLowerCase() === type);
  if (!mediaType) {
    failures.push(`${what}: Content-Type ${x.headers['content-type']}, documented ${documented.join(', ')}`);
    continue;
  }
  if (!response.content[mediaType].schema) continue;
  let body = x.body;
  if (/^application\/([^/]+\+)?json$/.test(type)) {
    try { body = JSON.parse(x.body); } catch { failures.push(`${what}: the body is not JSON`); continue; }
  }
  // the schema where the spec has it, so that its $refs resolve
  const responsePointer = o.op.responses[String(x.status)].$ref
    ? o.op.responses[String(x.status)].$ref.slice(1) : pointer;
  const check = ajv.compile(refOf(`${responsePointer}/content/${mediaType.replace(/\//g, '~1')}/schema`));
  if (!check(body)) failures.push(`${what}: ${ajv.errorsText(check.errors)} in ${x.body.slice(0, 300)}`);
}
for (const o of operations) {
  const statuses = [...o.seen];
  if (!statuses.some((s) => s >= 200 && s < 300)) failures.push(`${o.method.toUpperCase()} ${o.template}: no success seen`);
  if (!statuses.some((s) => s >= 400)) failures.push(`${o.method.toUpperCase()} ${o.template}: no error seen`);
}
if (webhooksSeen.size) {
  for (const type of Object.keys(spec.webhooks ?? {})) {
    if (!webhooksSeen.has(type) && !unsent.has(type)) failures.push(`webhook ${type}: never seen`);
  }
}
for (const f of failures) console.log(f);
console.log(`${lines.length} answers checked, ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
