import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { YogaServerInstance } from 'graphql-yoga';
import type { ClientAuth } from '../client-auth.js';
import type { Config } from '../../core/config/config.js';
import type { Context } from '../context.js';
import { requestAddress } from './client-address.js';
import { handleProbe } from '../health.js';
import { anonymousRateMessage, isAnonymousRequest, type AnonymousLimits } from '../limits/anonymous.js';
import { refuseLargeBody } from '../limits/http.js';
import type { Logger } from '../../core/log.js';
import { serveMetrics } from '../metrics/endpoint.js';
import type { ProcessMetrics } from '../metrics/process-metrics.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
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
  readonly anonymous: AnonymousLimits;
  /** The migrations /readyz checks are still applied. */
  readonly migrations: readonly string[];
  /** True once the service is stopping: /readyz answers 503. */
  readonly stopping: () => boolean;
}

/**
 * The HTTP server's request handler: the probes, then (past the anonymous request limit: 429) /metrics,
 * the status pages, and GraphQL for the rest (bodies over the limit refused). The client's address
 * (client-address.ts) is taken once per request, for the anonymous limit, its log line and the status pages.
 */
export function createHttpRouter(routes: HttpRoutes): (req: IncomingMessage, res: ServerResponse) => void {
  const { orm, config, log, scheduler, metrics, yoga, migrations, stopping } = routes;
  const route = (req: IncomingMessage, res: ServerResponse, pathname: string, address: string): void => {
    if (pathname === '/metrics') {
      serveMetrics(req, res, { orm, config, scheduler, metrics, log }).catch((err: unknown) => {
        log.error({ err }, '/metrics failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    if (isStatusPath(pathname)) {
      handleStatusPage(
        { em: orm.em.fork(), config, scheduler, authenticate: routes.authenticate, address },
        req,
        res,
      ).catch((err: unknown) => {
        log.error({ err }, 'status page failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
      return;
    }
    if (refuseLargeBody(req, res, config.limits.maxBodyBytes)) return;
    void yoga(req, res);
  };
  return (req, res) => {
    const pathname = (req.url ?? '/').split('?')[0];
    if (handleProbe(pathname, res, { orm, migrations, stopping })) return;
    const address = requestAddress(req, config.limits.trustedProxies);
    if (!isAnonymousRequest(req)) return route(req, res, pathname, address);
    routes.anonymous
      .request(address)
      .then((waitMs) => {
        if (!waitMs) return route(req, res, pathname, address);
        const message = anonymousRateMessage(waitMs);
        log.info(
          { address, limit: 'TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE' },
          'anonymous request refused: over the limit',
        );
        const retryAfter = String(Math.ceil(waitMs / 1000));
        if (isStatusPath(pathname))
          res
            .writeHead(429, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': retryAfter })
            .end(`${message}\n`);
        else {
          res.writeHead(429, { 'content-type': 'application/json', 'retry-after': retryAfter });
          res.end(
            JSON.stringify({
              errors: [
                { message, extensions: { code: 'RATE_LIMITED', limit: 'TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE' } },
              ],
            }),
          );
        }
        req.resume();
      })
      .catch((err: unknown) => {
        log.error({ err }, 'anonymous request limit failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('internal error');
      });
  };
}
