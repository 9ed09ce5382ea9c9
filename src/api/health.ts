/**
 * The probes beside /healthz: `/livez` (the process serves HTTP: restart it if not), and `/readyz`
 * (send it traffic: the database answers, every migration this code knows is applied, and the
 * process is not shutting down). Each answers JSON with the state of its checks.
 */
import type { ServerResponse } from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import { appliedMigrationCount, databaseAnswers } from '../services/readiness.js';

/** The probe paths. */
export const PROBES = { live: '/livez', ready: '/readyz', health: '/healthz' } as const;

interface Deps {
  orm: MikroORM;
  /** The migrations this code applied or found applied at start-up. */
  migrations: readonly string[];
  stopping(): boolean;
}

const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));

/** Answers a probe path and returns true, or returns false for any other path. */
export function handleProbe(path: string, res: ServerResponse, deps: Deps): boolean {
  if (path === PROBES.live) {
    json(res, 200, { status: 'ok' });
    return true;
  }
  if (path === PROBES.health) {
    databaseAnswers(deps.orm.em).then(
      () => json(res, 200, { status: 'ok' }),
      () => json(res, 503, { status: 'database unavailable' }),
    );
    return true;
  }
  if (path !== PROBES.ready) return false;
  void readiness(deps).then((checks) => {
    const ready = checks.database === 'ok' && checks.migrations === 'ok' && !checks.shuttingDown;
    json(res, ready ? 200 : 503, { status: ready ? 'ok' : 'not ready', checks });
  });
  return true;
}

async function readiness(deps: Deps): Promise<{ database: string; migrations: string; shuttingDown: boolean }> {
  const shuttingDown = deps.stopping();
  try {
    const n = await appliedMigrationCount(deps.orm.em, deps.migrations);
    return {
      database: 'ok',
      migrations: n === deps.migrations.length ? 'ok' : `${deps.migrations.length - n} not applied`,
      shuttingDown,
    };
  } catch {
    return { database: 'unavailable', migrations: 'unknown', shuttingDown };
  }
}
