/**
 * tagName, the one reading of a tag's name (src/core/tags/syntax.ts): a table of tags and their names,
 * the name parseTag reads for every tag that follows the syntax, and its SQL form tagNameSql giving
 * PostgreSQL's answer equal to it, on the table and on generated strings of the characters that
 * decide (`=`, `>`, a newline among them).
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTag, tagName, tagNameSql } from '../../src/core/tags/syntax.js';
import { adminUrl } from '../helpers/pg-url.js';

const TABLE: [tag: string, name: string][] = [
  ['worker:build-arch:amd64', 'worker:build-arch:amd64'],
  ['worker:memory-gib=64', 'worker:memory-gib'],
  ['worker:memory-gib>=32', 'worker:memory-gib'],
  ['worker:bogomips=2.5', 'worker:bogomips'],
  ['x>=1.5', 'x'],
  ['x', 'x'],
  ['', ''],
  ['=3', ''],
  ['>=3', ''],
  ['a>b', 'a>b'],
  ['a>b=1', 'a>b'],
  ['a>>=1', 'a>'],
  ['a=b>=3', 'a'],
  ['a>=3>=4', 'a'],
  ['a==1', 'a'],
  ['a=', 'a'],
  ['a>', 'a>'],
  ['a\n>=1', 'a\n'],
];

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
});

/** PostgreSQL's tagNameSql of each tag, in order. */
async function namesInSql(tags: readonly string[]): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `select ${tagNameSql('t')} as name from unnest($1::text[]) with ordinality as s(t, i) order by i`,
    [tags],
  );
  return rows.map((r) => r.name);
}

describe('tagName', () => {
  it.each(TABLE)('of %j is %j', (tag, name) => {
    expect(tagName(tag)).toBe(name);
  });

  it('is the name parseTag reads, for every tag of the table that follows the syntax', () => {
    let parsed = 0;
    for (const [tag] of TABLE) {
      for (const side of ['provided', 'required'] as const) {
        const result = parseTag(tag, side);
        if (!result.ok) continue;
        parsed++;
        expect(tagName(tag), `${tag} (${side})`).toBe(result.tag.name);
      }
    }
    expect(parsed).toBeGreaterThan(5);
  });
});

describe('tagNameSql', () => {
  it('holds no ? (the ORM would take it for a parameter)', () => {
    expect(tagNameSql('t')).not.toContain('?');
  });

  it('agrees with tagName on the table, in PostgreSQL', async () => {
    expect(await namesInSql(TABLE.map(([tag]) => tag))).toEqual(TABLE.map(([, name]) => name));
  });

  it('agrees with tagName on generated strings, in PostgreSQL', async () => {
    const tagArb = fc
      .array(fc.constantFrom('a', 'b', ':', '-', '.', '=', '>', '1', '\n'), { maxLength: 12 })
      .map((cs) => cs.join(''));
    await fc.assert(
      fc.asyncProperty(fc.array(tagArb, { minLength: 1, maxLength: 50 }), async (tags) => {
        expect(await namesInSql(tags)).toEqual(tags.map(tagName));
      }),
      { numRuns: 40 },
    );
  });
});
