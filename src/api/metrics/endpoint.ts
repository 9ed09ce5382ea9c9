/**
 * `GET /metrics`: this process's metrics and the database gauges, in Prometheus's text format.
 * With TAGSCHED_METRICS_TOKEN set, only a scraper presenting it (Authorization: Bearer …) is
 * answered, and it sees every workspace by name; without it, anyone is answered and private
 * workspaces are folded into one label value (database-metrics.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import { Registry } from 'prom-client';
import type { Config } from '../../core/config/config.js';
import type { Logger } from '../../core/log.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import { collectDatabaseMetrics } from './database-metrics.js';
import type { ProcessMetrics } from './process-metrics.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether the request presents the configured scraper token (compared in constant time). */
export function presentsMetricsToken(req: IncomingMessage, token: string): boolean {
  const presented = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
  return timingSafeEqual(digest(presented), digest(token));
}

/**
 * The exposition with every not-a-number sample spelt `NaN`, as the text format writes it: prom-client
 * writes `Nan` (its event-loop lag gauges are NaN when a scrape follows the last one by less than
 * their sampling interval).
 */
export function spellNaN(text: string): string {
  return text.replace(/^([^#].*) Nan$/gm, '$1 NaN');
}

/** Answers a scrape. */
export async function serveMetrics(
  req: IncomingMessage,
  res: ServerResponse,
  deps: {
    orm: MikroORM;
    config: Pick<Config, 'api' | 'workers' | 'tags' | 'provisioner'>;
    scheduler: Scheduler;
    metrics: ProcessMetrics;
    log: Logger;
  },
): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
    return;
  }
  const token = deps.config.api.metricsToken;
  if (token && !presentsMetricsToken(req, token)) {
    res
      .writeHead(401, { 'www-authenticate': 'Bearer realm="tagsched metrics"', 'content-type': 'text/plain' })
      .end('this server asks scrapers for TAGSCHED_METRICS_TOKEN as a bearer token\n');
    return;
  }
  let database: Registry;
  try {
    database = await collectDatabaseMetrics(deps, { workspaceNames: token !== null });
  } catch (err) {
    deps.log.warn({ err }, 'the database gauges could not be read for /metrics');
    res.writeHead(503, { 'content-type': 'text/plain' }).end('the database gauges could not be read\n');
    return;
  }
  const text = spellNaN(await Registry.merge([deps.metrics.registry, database]).metrics());
  res
    .writeHead(200, { 'content-type': deps.metrics.registry.contentType })
    .end(req.method === 'HEAD' ? undefined : text);
}
