import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { YogaServerInstance } from 'graphql-yoga';
import type { ClientAuth } from '../client-auth.js';
import type { Config } from '../config.js';
import type { Context } from '../context.js';
import { handleProbe } from '../health.js';
import { refuseLargeBody } from '../limits/http.js';
import type { Logger } from '../log.js';
import { serveMetrics } from '../metrics/endpoint.js';
import type { ProcessMetrics } from '../metrics/process-metrics.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import { handleStatusPage, isStatusPath } from '../status/router.js';

/** What the HTTP paths are served with. */
export interface HttpRoutes {
  readonly orm: MikroORM;
  readonly config: Config;
  readonly log: Logger;
  readonly scheduler: Scheduler;
  readonly metrics: ProcessMetrics;
  readonly yoga: YogaServerInstance<Record<string, unknown>, Context>;
  readonly authenticate: ClientAuth;
  /** The migrations /readyz checks are still applied. */
  readonly migrations: readonly string[];
  /** True once the service is stopping: /readyz answers 503. */
  readonly stopping: () => boolean;
}

/** The HTTP server's request handler: the probes, /metrics, the status pages, and GraphQL for the rest (bodies over the limit refused). */
export function createHttpRouter(routes: HttpRoutes): (req: IncomingMessage, res: ServerResponse) => void {
  const { orm, config, log, scheduler, metrics, yoga, migrations, stopping } = routes;
  return (req, res) => {
    const url = req.url ?? '/';
    const pathname = url.split('?')[0];
    if (handleProbe(pathname, res, { orm, migrations, stopping })) return;
    if (pathname === '/metrics') {
      serveMetrics(req, res, { orm, config, scheduler, metrics, log }).catch((err: unknown) => {
        log.error({ err }, '/metrics failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    if (isStatusPath(pathname)) {
      handleStatusPage({ em: orm.em.fork(), config, scheduler, authenticate: routes.authenticate }, req, res).catch((err: unknown) => {
        log.error({ err }, 'status page failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    if (refuseLargeBody(req, res, config.limits.maxBodyBytes)) return;
    void yoga(req, res);
  };
}
