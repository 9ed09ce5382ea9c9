import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import type { DbTarget } from '../storage/orm.js';

/** A running embedded PostgreSQL (PGlite) served on a loopback port, with its data directory locked. */
export interface EmbeddedPg {
  readonly target: DbTarget;
  readonly dataDir: string;
  stop(): Promise<void>;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** PGlite does not lock its directory, and two processes on one directory corrupt it: take a pid lock file. */
function lockDataDir(dir: string): () => void {
  const lockFile = `${dir}.lock`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: 'wx' });
      return () => fs.rmSync(lockFile, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number(fs.readFileSync(lockFile, 'utf8'));
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && pidAlive(owner)) {
        throw new Error(`the embedded database ${dir} is in use by process ${owner}`);
      }
      fs.rmSync(lockFile, { force: true }); // stale: its owner is gone
    }
  }
  throw new Error(`could not lock ${dir}`);
}

/** Starts PGlite on `<dataDir>/pg` and serves it on an ephemeral loopback port for the ORM's driver. */
export async function startEmbeddedPg(dataDir: string): Promise<EmbeddedPg> {
  const pgDir = path.join(dataDir, 'pg');
  fs.mkdirSync(dataDir, { recursive: true });
  const unlock = lockDataDir(pgDir);
  try {
    const db = await PGlite.create({ dataDir: pgDir });
    // All socket connections share PGlite's one session; room for the ORM's one connection and a psql.
    const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: 4 });
    await server.start();
    const [host, port] = server.getServerConn().split(':');
    return {
      dataDir: pgDir,
      target: { host, port: Number(port), user: 'postgres', dbName: 'postgres' },
      async stop() {
        await server.stop();
        await db.close();
        unlock();
      },
    };
  } catch (err) {
    unlock();
    throw err;
  }
}
