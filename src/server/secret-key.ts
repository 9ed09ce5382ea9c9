import fs from 'node:fs';
import path from 'node:path';
import { createHmac, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ServerConfig } from '../core/config/server.js';
import { ConfigError } from '../core/config/variables.js';
import type { Logger } from '../core/log.js';
import type { SecretBox } from '../services/identity/secrets.js';

/** The key that seals provider accounts: configured, or generated once next to the embedded database. */
export function loadSecretKey(config: ServerConfig, log: Logger): string {
  if (config.secretKey) return config.secretKey;
  const file = path.join(config.dataDir, 'secret.key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
  }
  if (config.databaseUrl) {
    log.warn(
      { file },
      'TAGSCHED_SECRET_KEY is not set: provider accounts are sealed with a key kept in the data directory; set the same key on every server process',
    );
  }
  return fs.readFileSync(file, 'utf8').trim();
}

/** The name in service_setting under which the database keeps the fingerprint of its secret key. */
export const FINGERPRINT_SETTING = 'secret_key_fingerprint';

/** What is signed to make a key's fingerprint: a fixed label, the same in every process. */
const FINGERPRINT_LABEL = 'tagsched secret key fingerprint v1';

/** How much of a fingerprint an error shows: enough to tell two keys apart, not the whole. */
const SHOWN_FINGERPRINT = 8;

/** A key's fingerprint: HMAC-SHA256 of a fixed label under the key, in hex. It tells keys apart and reveals nothing of the key. */
export function secretKeyFingerprint(key: string): string {
  return createHmac('sha256', key).update(FINGERPRINT_LABEL, 'utf8').digest('hex');
}

/** The start-up refusal of a process whose key is not the database's, with a prefix of each fingerprint and never a key. */
function otherKey(config: ServerConfig, mine: string, stored: string | null): ConfigError {
  const source = config.secretKey
    ? 'TAGSCHED_SECRET_KEY'
    : `generated in ${path.join(config.dataDir, 'secret.key')}, as TAGSCHED_SECRET_KEY is not set`;
  const ours = `this process's key (${source}) has fingerprint ${mine.slice(0, SHOWN_FINGERPRINT)}…`;
  const why = stored
    ? `the database's key has fingerprint ${stored.slice(0, SHOWN_FINGERPRINT)}…, ${ours}`
    : `${ours} and opens none of them`;
  return new ConfigError(
    `this database's pool provider accounts are sealed with another secret key: ${why}; every server process of one database must have the same TAGSCHED_SECRET_KEY`,
  );
}

/**
 * Makes sure every server process of one database seals with one key. The database keeps the
 * fingerprint of the first process's key (service_setting); a process whose key has another
 * fingerprint is refused with a ConfigError, having written nothing. A database that has sealed
 * values but no fingerprint (made before it was kept) takes this process's only if this key opens at
 * least one of them; pools whose accounts it cannot open are named in a warning.
 */
export async function checkSharedSecretKey(
  em: EntityManager,
  key: string,
  secrets: SecretBox,
  config: ServerConfig,
  log: Logger,
): Promise<void> {
  const mine = secretKeyFingerprint(key);
  const stored = async () =>
    (
      await em.execute<{ value: string }[]>('select value from service_setting where name = ?', [FINGERPRINT_SETTING])
    )[0]?.value ?? null;
  let fingerprint = await stored();
  if (fingerprint === null) {
    const sealed = await em.execute<{ pool: string | null; value: string }[]>(
      `select name as pool, provider_account_encrypted as value from worker_pool where provider_account_encrypted is not null
       union all
       (select null, sealed_secret from idempotency_key where sealed_secret is not null order by created_at desc limit 20)`,
    );
    const opens = (value: string) => {
      try {
        secrets.open(value);
        return true;
      } catch {
        return false;
      }
    };
    const unopened = sealed.filter((s) => !opens(s.value));
    if (sealed.length && unopened.length === sealed.length) throw otherKey(config, mine, null);
    const pools = unopened.flatMap((s) => (s.pool === null ? [] : [s.pool]));
    if (pools.length)
      log.warn(
        { pools },
        'the secret key of this process cannot open the provider accounts of these pools (sealed with another key): set their providerAccount again',
      );
    await em.execute('insert into service_setting (name, value) values (?, ?) on conflict (name) do nothing', [
      FINGERPRINT_SETTING,
      mine,
    ]);
    // Of two first processes, the one whose insert came first decides.
    fingerprint = await stored();
    if (fingerprint === mine)
      log.info(
        { fingerprint: mine.slice(0, SHOWN_FINGERPRINT) },
        'the database now keeps the fingerprint of this secret key',
      );
  }
  if (fingerprint !== mine) throw otherKey(config, mine, fingerprint);
}
