/**
 * valuedTagRegex, the one pattern of a valued tag: JavaScript and PostgreSQL read it alike, and both
 * agree with parseTag on which provided tags are `NAME=N` of a name, and on N.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTag, valuedTagRegex } from '../../src/core/tags/syntax.js';
import { adminUrl } from '../helpers/pg-url.js';

const SAMPLES = [
  'worker:memory-gib=16',
  'worker:memory-gib=0',
  'worker:memory-gib=2.5',
  'worker:memory-gib=007',
  'worker:memory-gib=2.50',
  'worker:memory-gib=1e3',
  'worker:memory-gib=-1',
  'worker:memory-gib=',
  'worker:memory-gib',
  'worker:memory-gibx=4',
  'worker:memory-gib=4=4',
  'xworker:memory-gib=4',
  'worker:memory-gib>=4',
  'a.b+c=3',
  'aXb+c=3',
  'a.bbc=3',
];

/** What parseTag says: N when the tag is `name=N`, else null. */
const valueOf = (tag: string, name: string): string | null => {
  const parsed = parseTag(tag, 'provided');
  return parsed.ok && parsed.tag.kind === 'value' && parsed.tag.name === name ? tag.slice(name.length + 1) : null;
};

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
});

describe('valuedTagRegex', () => {
  it.each(['worker:memory-gib', 'a.b+c'])(
    'matches what parseTag reads as %s=N, in JavaScript and in PostgreSQL, and holds no ? (an ORM parameter)',
    async (name) => {
      const pattern = valuedTagRegex(name);
      expect(pattern).not.toContain('?');
      const expected = SAMPLES.map((tag) => valueOf(tag, name));
      expect(SAMPLES.map((tag) => new RegExp(pattern).exec(tag)?.[1] ?? null)).toEqual(expected);
      const { rows } = await client.query<{ n: string | null }>(
        `select case when t ~ $1 then substring(t from $1) end as n from unnest($2::text[]) with ordinality as s(t, i) order by i`,
        [pattern, SAMPLES],
      );
      expect(rows.map((r) => r.n)).toEqual(expected);
      expect(expected.filter((v) => v !== null).length).toBeGreaterThan(0);
    },
  );
});
