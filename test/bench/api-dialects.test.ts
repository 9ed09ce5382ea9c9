/**
 * The client phase's documents per API version (bench/clients.ts, bench/baselines/api-0.1.0.ts) are
 * valid against that version's schema: today's against schema.graphql, 0.1.0's against the
 * schema.graphql of commit aac64f2, read from git (skipped in a clone without that commit).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { buildSchema, parse, validate, type GraphQLSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { API_0_1_0 } from '../../bench/baselines/api-0.1.0.js';
import { CURRENT_API, type ClientsApi } from '../../bench/clients.js';

const DOCUMENT_KEYS = [
  'createWorkspace',
  'registerWorker',
  'reportWorkerMetadata',
  'createWorkRequest',
  'requestWork',
  'startWorkRequest',
  'completeWorkRequest',
] as const;

/** Each document's validation errors, by operation (an empty list: valid). */
function problems(schema: GraphQLSchema, api: ClientsApi): Record<string, string[]> {
  return Object.fromEntries(DOCUMENT_KEYS.map((k) => [k, validate(schema, parse(api[k])).map((e) => e.message)]));
}
const none = Object.fromEntries(DOCUMENT_KEYS.map((k) => [k, []]));

function schemaAt(commit: string): string | null {
  try {
    return execFileSync('git', ['show', `${commit}:schema.graphql`], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch {
    return null;
  }
}
const schema010 = schemaAt('aac64f2');

describe('the client phase documents', () => {
  it("today's are valid against today's schema", () => {
    expect(
      problems(buildSchema(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8')), CURRENT_API),
    ).toEqual(none);
  });

  it.skipIf(!schema010)(
    "0.1.0's are valid against 0.1.0's schema (aac64f2), and today's start and complete are not",
    () => {
      const schema = buildSchema(schema010!);
      expect(problems(schema, API_0_1_0)).toEqual(none);
      const today = problems(schema, CURRENT_API);
      expect(today.startWorkRequest.length).toBeGreaterThan(0);
      expect(today.completeWorkRequest.length).toBeGreaterThan(0);
    },
  );

  it('send the same variables where both APIs take them', () => {
    expect(API_0_1_0.createVariables()).toEqual({ input: (CURRENT_API.createVariables() as { input: unknown }).input });
    expect(API_0_1_0.completeVariables('7')).toEqual({ id: '7', r: 'SUCCESS' });
    expect(API_0_1_0.batchCreate).toBe(false);
    expect(CURRENT_API.batchCreate).toBe(true);
  });
});
