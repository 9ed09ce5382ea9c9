import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { ServerConfig } from '../core/config/server.js';
import type { Logger } from '../core/log.js';

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
