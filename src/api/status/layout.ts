/** The frame of every status page: head, top bar with the navigation and who is signed in, footer. */
import type { Viewer } from '../../services/identity/auth.js';
import { html, raw, type Html } from './html.js';
import { STYLESHEET_PATH } from './stylesheet.js';

/** The sections of the navigation. */
export type Section = 'overview' | 'workers' | 'pools' | 'queue' | 'signin' | null;

/** What every page knows about its request. */
export interface PageContext {
  readonly viewer: Viewer;
  /** The path and query of this page (where sign-in comes back to). */
  readonly here: string;
  /** Whether GraphiQL is served at /graphql. */
  readonly graphiql: boolean;
}

/** How the viewer is named in the top bar. */
export function viewerLabel(viewer: Viewer): string | null {
  switch (viewer.kind) {
    case 'user':
      return viewer.isAdmin ? `${viewer.user.username} (admin)` : viewer.user.username;
    case 'worker':
      return `worker ${viewer.worker.name}`;
    case 'activation':
      return 'an activation token';
    case 'anonymous':
      return null;
  }
}

const NAV: { section: Exclude<Section, null | 'signin'>; path: string; label: string }[] = [
  { section: 'overview', path: '/', label: 'Overview' },
  { section: 'workers', path: '/-/status/workers/', label: 'Workers' },
  { section: 'pools', path: '/-/status/pools/', label: 'Pools' },
  { section: 'queue', path: '/-/status/queue/', label: 'Queue' },
];

/** A whole page. `refreshSeconds` adds a meta refresh (a running job's log follows without JavaScript). */
export function layout(
  ctx: PageContext,
  page: { title: string; section: Section; refreshSeconds?: number },
  body: Html,
): string {
  const who = viewerLabel(ctx.viewer);
  const nav = NAV.map(
    (n) => html`<a href="${n.path}"${n.section === page.section ? raw(' aria-current="page"') : ''}>${n.label}</a>`,
  );
  const graphiql = ctx.graphiql ? html`<a href="/graphql">GraphiQL</a>` : '';
  const session = who
    ? html`<span>Signed in as <strong>${who}</strong></span><form method="post" action="/-/status/logout"><button type="submit">Sign out</button></form>`
    : html`<a href="/-/status/login?next=${encodeURIComponent(ctx.here)}">Sign in</a>`;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${page.refreshSeconds ? html`<meta http-equiv="refresh" content="${page.refreshSeconds}">` : ''}<title>${page.title} · tagsched</title>
<link rel="stylesheet" href="${STYLESHEET_PATH}">
</head><body>
<header class="top"><div class="bar"><a class="brand" href="/">tagsched</a><nav aria-label="Status pages">${nav}${graphiql}</nav><div class="who">${session}</div></div></header>
<main>
${body}
</main>
<footer>tagsched status pages · <a href="/-/status/workers/">workers</a> · <a href="/-/status/pools/">pools</a> · <a href="/-/status/queue/">queue</a> · <a href="/metrics">metrics</a></footer>
</body></html>`.value;
}
