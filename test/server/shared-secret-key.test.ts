/**
 * Every server process of one database seals pool provider accounts with one key: the database keeps
 * the fingerprint of the first one's, and a process with another key refuses to start, having written
 * nothing, with one line that names neither key nor a whole fingerprint.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { ConfigError } from '../../src/core/config/variables.js';
import { createLogger, type Logger } from '../../src/core/log.js';
import { createSecretBox } from '../../src/services/identity/secrets.js';
import { captureLog } from '../helpers/log-capture.js';
import { FINGERPRINT_SETTING, secretKeyFingerprint } from '../../src/server/secret-key.js';
import { ADMIN_TOKEN, secondAppConfig, useTestApp } from '../helpers/app.js';
import { runServerToExit, startServerProcess } from '../helpers/server-process.js';
import { ALL_TABLES, ok, snapshot } from '../helpers/fixtures.js';

const t = useTestApp();

/** The harness's key (test/helpers/app.ts) and another. */
const KEY = 'test-secret-key';
const OTHER_KEY = 'another-secret-key-of-another-host';
/** A second process's admin token: ensureAdminAccess would create it, and revoke the harness's. */
const OTHER_ADMIN = 'tsk_admin_second-process-token-0123456789';
const TABLES = [...ALL_TABLES, 'service_setting'];

const stored = async () =>
  (await t.sql<{ value: string }>('select value from service_setting where name = ?', [FINGERPRINT_SETTING]))[0]
    ?.value ?? null;

/**
 * Builds a second app on the harness's database with `key`; the refusal it was met with, or null once
 * it started and stopped. With another key it is given another admin token, which it would create (and
 * revoke the harness's) if it went on.
 */
async function secondApp(key: string, log: Logger = createLogger('silent')): Promise<Error | null> {
  const adminToken = key === KEY ? ADMIN_TOKEN : OTHER_ADMIN;
  const config = secondAppConfig(t, { server: { secretKey: key, adminToken } });
  let app;
  try {
    app = await buildApp(config, { log });
  } catch (err) {
    return err as Error;
  }
  try {
    await app.start();
  } finally {
    await app.stop();
  }
  return null;
}

function expectRefusal(err: Error | null, storedFingerprint: string | null): void {
  expect(err).toBeInstanceOf(ConfigError);
  expect(err!.message).toMatch(
    /^this database's pool provider accounts are sealed with another secret key: .*every server process of one database must have the same TAGSCHED_SECRET_KEY$/,
  );
  const mine = secretKeyFingerprint(OTHER_KEY);
  expect(err!.message).toContain(`this process's key (TAGSCHED_SECRET_KEY) has fingerprint ${mine.slice(0, 8)}…`);
  if (storedFingerprint)
    expect(err!.message).toContain(`the database's key has fingerprint ${storedFingerprint.slice(0, 8)}…`);
  for (const secret of [KEY, OTHER_KEY, mine, secretKeyFingerprint(KEY)]) expect(err!.message).not.toContain(secret);
}

describe('one secret key for every process of a database', () => {
  it('the first process keeps its key’s fingerprint, not the key', async () => {
    const fingerprint = await stored();
    expect(fingerprint).toBe(secretKeyFingerprint(KEY));
    expect(fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(fingerprint).not.toContain(KEY);
    expect(secretKeyFingerprint(OTHER_KEY)).not.toBe(fingerprint);
  });

  it('a second process with another key refuses to start, naming the setting, and writes nothing', async () => {
    const before = await snapshot(t, TABLES);
    expectRefusal(await secondApp(OTHER_KEY), secretKeyFingerprint(KEY));
    expect(await snapshot(t, TABLES)).toEqual(before);
    // The first process goes on: its admin token was not revoked by the refused one.
    expect((await t.gql('{ tokens { id } }')).errors).toBeUndefined();
  });

  it('a second process with the same key starts', async () => {
    expect(await secondApp(KEY)).toBeNull();
    expect(await stored()).toBe(secretKeyFingerprint(KEY));
    expect((await t.gql('{ workerPools { name } }')).errors).toBeUndefined();
  });

  it('a database with sealed accounts and no fingerprint takes only a key that opens them', async () => {
    await ok(
      t,
      `mutation { createWorkerPool(input: { name: "sealed", providerType: "local", providerAccount: { token: "s3cret" } }) { __typename } }`,
    );
    // As a database made before the fingerprint was kept.
    await t.sql('delete from service_setting');
    const before = await snapshot(t, TABLES);
    expectRefusal(await secondApp(OTHER_KEY), null);
    expect(await snapshot(t, TABLES)).toEqual(before);
    expect(await stored()).toBeNull();

    expect(await secondApp(KEY)).toBeNull();
    expect(await stored()).toBe(secretKeyFingerprint(KEY));
    expectRefusal(await secondApp(OTHER_KEY), secretKeyFingerprint(KEY));
  });

  it('of accounts sealed with several keys, a key that opens one is taken, and the others are named', async () => {
    await ok(
      t,
      `mutation { createWorkerPool(input: { name: "sealed-elsewhere", providerType: "local", providerAccount: { token: "other" } }) { __typename } }`,
    );
    const elsewhere = createSecretBox(OTHER_KEY).seal(JSON.stringify({ token: 'other' }));
    await t.sql(`update worker_pool set provider_account_encrypted = ? where name = 'sealed-elsewhere'`, [elsewhere]);
    await t.sql('delete from service_setting');
    const capture = captureLog('info');
    expect(await secondApp(KEY, capture.log)).toBeNull();
    expect(await stored()).toBe(secretKeyFingerprint(KEY));
    const warning = capture.lines().find((l) => l.msg.includes('cannot open the provider accounts'));
    expect(warning).toMatchObject({ pools: ['sealed-elsewhere'] });
    expect(JSON.stringify(capture.lines())).not.toContain(KEY);
  });

  it('a database with no fingerprint and nothing sealed takes the first key', async () => {
    await t.sql('delete from worker_pool');
    await t.sql('delete from service_setting');
    expect(await secondApp(OTHER_KEY)).toBeNull();
    expect(await stored()).toBe(secretKeyFingerprint(OTHER_KEY));
    await t.sql(`update token set revoked_at = null`); // the second app revoked the harness's admin token
    // Put back for the files' other tests: the harness's key.
    await t.sql('update service_setting set value = ? where name = ?', [
      secretKeyFingerprint(KEY),
      FINGERPRINT_SETTING,
    ]);
  });
});

/** The one line a refused server entry prints. */
const REFUSED_LINE =
  /^tagsched: this database's pool provider accounts are sealed with another secret key: .*every server process of one database must have the same TAGSCHED_SECRET_KEY$/;

describe('the server entry', () => {
  it('a process with another key: one line on stderr, exit 2', async () => {
    const run = await runServerToExit({
      DATABASE_URL: t.dbUrl,
      TAGSCHED_SECRET_KEY: OTHER_KEY,
      TAGSCHED_ADMIN_TOKEN: OTHER_ADMIN,
    });
    expect(run.code).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines, run.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(REFUSED_LINE);
    expect(run.stderr).not.toContain(OTHER_KEY);
  }, 120_000);

  it('the embedded database: the generated key is kept, a process with another key refused', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-shared-key-'));
    try {
      const env = { DATABASE_URL: undefined, TAGSCHED_DATA_DIR: dataDir, TAGSCHED_ADMIN_TOKEN: OTHER_ADMIN };
      const first = await startServerProcess({ ...env, TAGSCHED_SECRET_KEY: undefined });
      expect(await first.stop()).toBe(0);
      const generated = fs.readFileSync(path.join(dataDir, 'secret.key'), 'utf8').trim();
      const refused = await runServerToExit({ ...env, TAGSCHED_SECRET_KEY: OTHER_KEY });
      expect(refused.code).toBe(2);
      expect(refused.stderr.trim()).toMatch(REFUSED_LINE);
      expect(refused.stderr).not.toContain(generated);
      // The generated key is the database's: a process without TAGSCHED_SECRET_KEY starts on it again.
      const again = await startServerProcess({ ...env, TAGSCHED_SECRET_KEY: undefined });
      expect(await again.stop()).toBe(0);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 240_000);
});
