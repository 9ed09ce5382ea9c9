/**
 * The parser's own guard (src/api/parse-guard.ts), behind the token limit: with TAGSCHED_MAX_TOKENS set so
 * high that a document nested 5,000 deep reaches graphql-js's recursive parser, the stack overflow is
 * still a parse failure for the client, not a 500, and nothing runs.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { unchanged } from './checksums.js';

const t = useTestApp({ limits: { maxTokens: 10_000_000, authFailuresPerMinute: 0 } });

describe('a document too deep for the parser', () => {
  it('is refused as a parse failure (a client error) when the token limit lets it through', async () => {
    const literal = `${'{a: '.repeat(5000)}1${'}'.repeat(5000)}`;
    const query = `mutation { createWorkRequest(input: { workspace: "x/y", taskType: "worker", taskName: "noop", taskData: ${literal} }) { __typename } }`;
    const res = await unchanged(t, async () => {
      const r = await t.app.yoga.fetch('http://test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${t.adminToken}` },
        body: JSON.stringify({ query }),
      });
      return {
        status: r.status,
        body: (await r.json()) as { errors?: { message: string; extensions?: { code?: string } }[] },
      };
    });
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(500);
    expect(res.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_PARSE_FAILED');
    expect(res.body.errors?.[0]?.message).toMatch(/nested too deeply/);
  });
});
