#!/usr/bin/env node
// An exec provider for tagsched, as small as the protocol allows (README, "The exec protocol").
//
//   usage: exec-provider.mjs STATE_DIR [--max-instances N]
//
// It starts no machine: it keeps one JSON file per "instance" in STATE_DIR, so that the protocol can
// be tried and tested with nothing else installed. A real script calls its cloud where the comments
// say so, with the credentials it finds in `request.account`, and starts the machine with
// `request.userData` (cloud-init) or `request.agent` (server URL, activation token, worker name).
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';

const [stateDir, ...options] = process.argv.slice(2);
const maxAt = options.indexOf('--max-instances');
const maxInstances = maxAt >= 0 ? Number(options[maxAt + 1]) : Infinity;

function answer(document, status = 0) {
  process.stdout.write(JSON.stringify(document) + '\n');
  process.exit(status);
}
function fail(kind, message, code) {
  answer({ error: { kind, message, code } }, 1);
}

if (!stateDir) fail('invalid', 'usage: exec-provider.mjs STATE_DIR [--max-instances N]', 'usage');
const request = JSON.parse(fs.readFileSync(0, 'utf8'));
if (request.version !== 1) fail('invalid', `protocol version ${request.version} is not known`, 'version');
// The account is the pool's provider account, decrypted for this call. This example wants a token.
if (typeof request.account?.token !== 'string') fail('auth', 'the pool account has no "token"', 'no_token');

const poolDir = path.join(stateDir, encodeURIComponent(request.pool));
fs.mkdirSync(poolDir, { recursive: true });
const records = () =>
  fs
    .readdirSync(poolDir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(fs.readFileSync(path.join(poolDir, f), 'utf8')));

switch (request.operation) {
  case 'launch': {
    // A real script: create a server from request.specifications (instanceType, location,
    // providerImage…) with request.userData as its cloud-init user data, labelled with the pool and
    // request.name; answer the cloud's id for it.
    if (records().length >= maxInstances) fail('quota', `at most ${maxInstances} instances`, 'instance_limit');
    const id = `ex-${crypto.randomUUID()}`;
    const record = { id, name: request.name, state: 'running', createdAt: new Date().toISOString() };
    fs.writeFileSync(path.join(poolDir, `${id}.json`), JSON.stringify(record));
    answer({ id });
    break;
  }
  case 'terminate': {
    // A real script: delete the server. One that is already gone is a success.
    if (!/^ex-[0-9a-f-]{36}$/.test(request.id)) fail('invalid', 'not an id of this provider', 'bad_id');
    fs.rmSync(path.join(poolDir, `${request.id}.json`), { force: true });
    answer({});
    break;
  }
  case 'list': {
    // A real script: list the servers labelled with the pool.
    answer({ instances: records() });
    break;
  }
  default:
    fail('invalid', `unknown operation ${request.operation}`, 'operation');
}
