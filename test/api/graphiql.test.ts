import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

describe('GraphiQL', () => {
  it('is served from the package itself: no script or stylesheet from another host', async () => {
    const res = await t.app.yoga.fetch('http://test/graphql', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('GraphiQL');
    const external = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']?(https?:)?\/\//gi)].map((m) => m[0]);
    expect(external).toEqual([]);
  });

  it('asks for subscriptions over graphql-ws, where the service serves them', async () => {
    const html = await (await t.app.yoga.fetch('http://test/graphql', { headers: { accept: 'text/html' } })).text();
    expect(html).toMatch(/"subscriptionsProtocol":\s*"WS"/);
  });
});
