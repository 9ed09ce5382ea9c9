import { Kind, parse, validate, type OperationDefinitionNode } from 'graphql';
import { describe, expect, it } from 'vitest';
import { GRAPHIQL_EXAMPLES } from '../../src/api/graphiql-examples.js';
import { schema } from '../../src/api/schema.js';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

describe('GraphiQL', () => {
  it('is served from the package itself: no script or stylesheet from another host', async () => {
    const res = await t.app.yoga.fetch('http://test/graphql', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('GraphiQL');
    const external = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']?(https?:)?\/\//gi)].map(
      (m) => m[0],
    );
    expect(external).toEqual([]);
  });

  it('asks for subscriptions over graphql-ws, where the service serves them', async () => {
    const html = await (await t.app.yoga.fetch('http://test/graphql', { headers: { accept: 'text/html' } })).text();
    expect(html).toMatch(/"subscriptionsProtocol":\s*"WS"/);
  });
});

describe('GraphiQL examples', () => {
  const NAMES = ['CreateWorkspace', 'SubmitNoop', 'WatchWorkRequests', 'WhyPending', 'Demand'];

  it('the page opens with the operations of a first session', async () => {
    const html = await (await t.app.yoga.fetch('http://test/graphql', { headers: { accept: 'text/html' } })).text();
    for (const name of NAMES) expect(html).toMatch(new RegExp(`(mutation|query|subscription) ${name}\\b`));
    expect(html).toContain('defaultQuery');
  });

  it('each of them validates against the schema the app serves (src/api/schema.ts)', () => {
    const document = parse(GRAPHIQL_EXAMPLES);
    const operations = document.definitions.filter(
      (d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION,
    );
    expect(operations.map((o) => o.name?.value)).toEqual(NAMES);
    for (const operation of operations) {
      const errors = validate(schema, { kind: Kind.DOCUMENT, definitions: [operation] });
      expect(
        errors.map((e) => e.message),
        operation.name?.value,
      ).toEqual([]);
    }
  });
});
