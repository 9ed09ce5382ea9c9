import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { WorkerSchema, type Worker } from '../entities/worker.js';
import { createLoaders } from '../loaders.js';
import { poolTagInput } from '../scheduler/pool-templates.js';
import { workerStatus, type WorkerStatus } from '../schema/worker.js';
import { BadTokenError, resolveViewer, type Viewer } from '../services/auth.js';
import { nameSchema } from '../services/validate.js';
import { canSeeWorkerDetails, principalOf } from '../services/visibility.js';
import type { TagEntry, TagRefusal } from '../tags/types.js';
import { computePoolTemplateTags } from '../tags/worker-tags.js';

const escape = (s: unknown): string =>
  String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

const STATUS_LABELS: Record<WorkerStatus, string> = {
  IDLE: 'Idle',
  BUSY: 'Running work',
  DRAINING: 'Draining',
  DISCONNECTED: 'Disconnected',
  DISABLED: 'Disabled',
  INACTIVE: 'Inactive',
};

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} · tagsched</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#1d1d1f}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #ddd;vertical-align:top}
th{background:#f4f4f6}code{font-size:.9em}a{color:#0b57d0}.muted{color:#6b6b73}
.s-IDLE{color:#137333}.s-BUSY{color:#0b57d0}.s-DRAINING{color:#b06000}.s-DISCONNECTED,.s-DISABLED{color:#a50e0e}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1.2rem}dt{font-weight:600}
</style></head><body>
<p class="muted"><a href="/-/status/workers/">Workers</a> · <a href="/graphql">GraphQL</a></p>
${body}
</body></html>`;
}

function relative(date: Date | null | undefined, now: Date): string {
  if (!date) return 'never';
  const s = Math.round((now.getTime() - date.getTime()) / 1000);
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return date.toISOString().slice(0, 16).replace('T', ' ');
}

function tagTable(entries: TagEntry[]): string {
  if (!entries.length) return '<p class="muted">none</p>';
  const rows = entries.map((e) => `<tr><td><code>${escape(e.tag)}</code></td><td>${escape(e.provenance)}</td><td>${escape(e.source)}</td></tr>`);
  return `<table><thead><tr><th>Tag</th><th>Provenance</th><th>Source</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function rejectedTable(rejected: TagRefusal[]): string {
  if (!rejected.length) return '';
  const rows = rejected.map((r) => `<tr><td><code>${escape(r.tag)}</code></td><td>${escape(r.provenance)}</td><td>${escape(r.source)}</td><td>${escape(r.message)}</td></tr>`);
  return `<h2>Rejected tags</h2><table><thead><tr><th>Tag</th><th>Provenance</th><th>Source</th><th>Reason</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

async function statuses(em: EntityManager, config: Config, workers: Worker[], now: Date): Promise<WorkerStatus[]> {
  const loaders = createLoaders(em, config);
  const counts = await Promise.all(workers.map((w) => loaders.activeWorkCount.load(w.id)));
  return workers.map((w, i) => workerStatus(w, counts[i], now, config.metadataFreshMs));
}

async function workersPage(em: EntityManager, config: Config): Promise<string> {
  const now = new Date();
  // Inactive dynamic workers are hidden: they would flood the page with history.
  const workers = await em.find(WorkerSchema, { terminatedAt: null }, { populate: ['pool'], orderBy: { type: 'asc', name: 'asc' } });
  const status = await statuses(em, config, workers, now);
  const rows = workers.map(
    (w, i) => `<tr><td>${escape(w.type)}</td><td><a href="/-/status/workers/${encodeURIComponent(w.name)}/">${escape(w.name)}</a></td>
<td>${w.pool ? escape(w.pool.name) : '<span class="muted">static</span>'}</td><td>${escape(relative(w.lastSeenAt, now))}</td>
<td class="s-${status[i]}">${STATUS_LABELS[status[i]]}</td></tr>`,
  );
  const table = workers.length
    ? `<table><thead><tr><th>Type</th><th>Name</th><th>Pool</th><th>Last seen</th><th>Status</th></tr></thead><tbody>${rows.join('')}</tbody></table>`
    : '<p class="muted">No workers yet.</p>';
  return page('Workers', `<h1>Workers</h1>${table}`);
}

async function workerPage(em: EntityManager, config: Config, viewer: Viewer, name: string): Promise<string | null> {
  if (!nameSchema.safeParse(name).success) return null; // no worker has such a name (NUL, slashes, …)
  const worker = await em.findOne(WorkerSchema, { name }, { populate: ['pool'] });
  if (!worker) return null;
  const now = new Date();
  const [status] = await statuses(em, config, [worker], now);
  const pool = worker.pool;
  // Only the pool's public fields: the provider account is never rendered, nor the commands a
  // local pool's handlers or an exec pool run (admins read those through GraphQL).
  const { handlers: _handlers, command: _command, ...publicSpecifications } = pool?.specifications ?? {};
  const poolSection = pool
    ? `<h2>Pool ${escape(pool.name)}</h2><dl>
<dt>Provider</dt><dd>${escape(pool.providerType)}</dd>
<dt>Specifications</dt><dd><code>${escape(JSON.stringify(publicSpecifications))}</code></dd>
<dt>Limits</dt><dd>at most ${pool.maxActiveInstances} active, ${pool.minIdleInstances} idle kept, idle timeout ${pool.idleTimeoutSeconds} s, target latency ${pool.targetLatencySeconds} s</dd>
<dt>Enabled</dt><dd>${pool.enabled ? 'yes' : 'no'}</dd></dl>
<h3>Template tags (provided)</h3>${tagTable(computePoolTemplateTags(poolTagInput(pool), config.sizeThresholds).provided)}`
    : '';
  const body = `<h1>Worker ${escape(worker.name)}</h1><dl>
<dt>Type</dt><dd>${escape(worker.type)}</dd>
<dt>Status</dt><dd class="s-${status}">${STATUS_LABELS[status]}</dd>
<dt>Pool</dt><dd>${pool ? escape(pool.name) : 'none (static worker)'}</dd>
<dt>Concurrency</dt><dd>${worker.concurrency}</dd>
<dt>Connected</dt><dd>${escape(relative(worker.connectedAt, now))}</dd>
<dt>Last seen</dt><dd>${escape(relative(worker.lastSeenAt, now))}</dd>
<dt>Registered</dt><dd>${escape(worker.registeredAt.toISOString())}</dd></dl>
${
  canSeeWorkerDetails(principalOf(viewer), worker)
    ? `<h2>Provided tags</h2>${tagTable(worker.providedEntries)}
<h2>Required tags</h2>${tagTable(worker.requiredEntries)}
${rejectedTable(worker.rejectedTags)}`
    : '<p class="muted">Its tags and metadata are shown to signed-in users.</p>'
}${poolSection}`;
  return page(`Worker ${worker.name}`, body);
}

/** A path segment decoded, or null when its percent-encoding is malformed. */
function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/**
 * Serves `/-/status/workers/` and `/-/status/workers/{name}/` as HTML, to the viewer of the request's
 * bearer token (anonymous without one; a wrong or disabled token is refused with 401, as on /graphql).
 */
export async function handleStatusPage(em: EntityManager, config: Config, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let viewer: Viewer;
  try {
    viewer = await resolveViewer(em, req.headers.authorization);
  } catch (err) {
    if (!(err instanceof BadTokenError)) throw err;
    res.writeHead(401, { 'content-type': 'text/html; charset=utf-8' }).end(page('Unauthorized', `<h1>Unauthorized</h1><p>${escape(err.message)}</p>`));
    return;
  }
  const pathname = new URL(req.url ?? '/', 'http://x').pathname;
  let html: string | null = null;
  if (pathname === '/-/status/workers/' || pathname === '/-/status/workers' || pathname === '/-/status/') {
    html = await workersPage(em, config);
  } else {
    const m = /^\/-\/status\/workers\/([^/]+)\/?$/.exec(pathname);
    const name = m ? decodeSegment(m[1]) : undefined;
    if (name === null) {
      res.writeHead(400, { 'content-type': 'text/html; charset=utf-8' }).end(page('Bad request', '<h1>Bad request</h1><p>The worker name in the address is not valid percent-encoding.</p>'));
      return;
    }
    if (name !== undefined) html = await workerPage(em, config, viewer, name);
  }
  if (html === null) {
    res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end(page('Not found', '<h1>Not found</h1>'));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
}
