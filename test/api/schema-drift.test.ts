import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { printedSchema } from '../../src/api/schema.js';

describe('schema.graphql', () => {
  it('is the schema printed from the code (run `npm run schema:print` after a schema change)', () => {
    expect(fs.readFileSync('schema.graphql', 'utf8')).toBe(`${printedSchema()}\n`);
  });
});
