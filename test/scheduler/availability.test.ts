/**
 * Availability has one home (src/scheduler/rules/availability.ts) in two forms: the SQL condition the
 * matchers put in their WHERE clauses and the TypeScript predicate the bulk questions and the API's
 * status use. On generated worker facts, times around the freshness boundary to the microsecond
 * included, PostgreSQL's answer to availableSql and unavailableReason over factsOfRow agree, and so
 * do probeableSql and mayBeProbed (a quarantined worker that may be given a quarantine probe), which
 * never holds for an available worker.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  availabilityColumns,
  availableParams,
  availableSql,
  factsOfRow,
  mayBeProbed,
  probeableSql,
  unavailableReason,
  workerStatus,
  type AvailabilityRow,
} from '../../src/scheduler/rules/availability.js';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

const FRESH_MS = 65 * 60 * 1000;
const NOW = new Date('2026-06-01T12:00:00.000Z');
const NOW_US = BigInt(NOW.getTime()) * 1000n;
const FRESH_US = BigInt(FRESH_MS) * 1000n;

/** A time relative to the freshness boundary, in microseconds: on it, just inside or outside, or far off. */
const seenArb = fc.oneof(
  fc.constant(null),
  fc.constantFrom(-1, 0, 1, -1000, 1000, 999, -999).map((d) => NOW_US - FRESH_US + BigInt(d)),
  fc.integer({ min: -3 * 3600, max: 3600 }).map((s) => NOW_US + BigInt(s) * 1_000_000n),
);

/** Mostly `usual`: each fact is the one that keeps a worker available four times in five, so that the boundary decides often. */
const mostly = (usual: boolean) => fc.integer({ min: 1, max: 5 }).map((n) => (n === 1 ? !usual : usual));

const factsArb = fc.record({
  type: fc.constantFrom('worker', 'worker', 'server', 'signing', 'not-assignable'),
  enabled: mostly(true),
  draining: mostly(false),
  shuttingDown: mostly(false),
  terminated: mostly(false),
  connected: mostly(true),
  quarantined: mostly(false),
  seenUs: seenArb,
  active: fc.integer({ min: 0, max: 2 }),
});

describe('availability in SQL and in TypeScript', () => {
  it('availableSql is true exactly when unavailableReason over the same row is null', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(factsArb, { minLength: 50, maxLength: 200 }), async (workers) => {
        const values = workers
          .map(
            () =>
              `(?, ?::boolean, ?::boolean, ?::boolean, ?::timestamptz, ?::timestamptz, 'epoch'::timestamptz + (?::bigint * interval '1 microsecond'), ?::timestamptz, ?::int)`,
          )
          .join(', ');
        const params = workers.flatMap((w, i) => [
          w.type,
          w.enabled,
          w.draining,
          w.shuttingDown,
          w.terminated ? NOW.toISOString() : null,
          w.connected ? NOW.toISOString() : null,
          w.seenUs === null ? null : w.seenUs.toString(),
          w.quarantined ? NOW.toISOString() : null,
          i,
        ]);
        const rows = await t.sql<AvailabilityRow & { n: number; available: boolean; probeable: boolean }>(
          `select w.n, ${availabilityColumns('w')}, ${availableSql('w')} as available, ${probeableSql('w')} as probeable
             from (values ${values}) as w(type, enabled, draining, shutting_down, terminated_at, connected_at, metadata_reported_at, quarantined_at, n)
            order by w.n`,
          [...availableParams(NOW, FRESH_MS), ...availableParams(NOW, FRESH_MS), ...params], // in the order of their places: the select list comes first
        );
        // The boolean SQL computes, and what the predicate says of the same row: equal, row by row.
        expect(rows.map((r) => r.available)).toEqual(
          rows.map((r) => unavailableReason(factsOfRow(r), NOW, FRESH_MS) === null),
        );
        // A quarantine probe: the same in both forms, only for quarantined workers, never for an available one.
        expect(rows.map((r) => r.probeable)).toEqual(rows.map((r) => mayBeProbed(factsOfRow(r), NOW, FRESH_MS)));
        for (const r of rows) if (r.probeable) expect([r.quarantined, r.available]).toEqual([true, false]);
        // And the status shown in the API says IDLE or BUSY for an available worker, never for an unavailable one (not-assignable aside).
        for (const r of rows) {
          const status = workerStatus(factsOfRow(r), workers[r.n].active, NOW, FRESH_MS);
          if (r.type !== 'not-assignable')
            expect(status === 'IDLE' || status === 'BUSY', `${JSON.stringify(r)} is ${status}`).toBe(r.available);
        }
      }),
      { numRuns: 50 },
    );
  });
});
