/**
 * The queue order has one home (src/scheduler/rules/queue-order.ts). On generated requests with ties
 * in every column (effective priority from two parts, fair key, creation to the microsecond, id):
 * PostgreSQL's order by queueOrderSql and by headsOrderSql is the order of queueBefore, and for every
 * pair aheadInQueueSql and queueRuleSql say what queueBefore and queueRuleBetween say.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  aheadInQueueSql,
  headsOrderSql,
  queueBefore,
  queueOrderSql,
  queueRuleBetween,
  queueRuleSql,
  type QueueKey,
} from '../../../src/scheduler/rules/queue-order.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const BASE_US = 1_780_000_000_000_000n;
const requestArb = fc.record({
  base: fc.integer({ min: -1, max: 1 }),
  adjustment: fc.integer({ min: -1, max: 1 }),
  fairKey: fc.integer({ min: 0, max: 3 }),
  createdUs: fc.integer({ min: 0, max: 3 }),
});
const VALUES = `(values %) as w(id, priority_base, priority_adjustment, fair_key, created_at)`;
const ROW = `(?::int, ?::int, ?::int, ?::bigint, 'epoch'::timestamptz + (?::bigint * interval '1 microsecond'))`;

describe('the queue order in SQL and in TypeScript', () => {
  it('queueOrderSql, headsOrderSql, aheadInQueueSql and queueRuleSql agree with queueBefore and queueRuleBetween', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(requestArb, { minLength: 1, maxLength: 12 }), async (generated) => {
        const requests = generated.map((r, i) => ({ ...r, id: ((i + 1) * 37) % 101 }));
        const keys: QueueKey[] = requests.map((r) => ({
          id: r.id,
          prio: r.base + r.adjustment,
          fairKey: BigInt(r.fairKey),
          createdUs: BASE_US + BigInt(r.createdUs),
        }));
        const values = VALUES.replace('%', requests.map(() => ROW).join(', '));
        const params = requests.flatMap((r) => [
          r.id,
          r.base,
          r.adjustment,
          r.fairKey,
          (BASE_US + BigInt(r.createdUs)).toString(),
        ]);
        const expected = [...keys]
          .sort((a, b) => (queueBefore(a, b) ? -1 : queueBefore(b, a) ? 1 : 0))
          .map((k) => k.id);

        const ordered = await t.sql<{ id: number }>(
          `select w.id from ${values} order by ${queueOrderSql('w')}`,
          params,
        );
        expect(ordered.map((r) => r.id)).toEqual(expected);
        const heads = await t.sql<{ id: number }>(
          `select h.id from (select w.id, w.priority_base + w.priority_adjustment as prio, w.fair_key, w.created_at from ${values}) h order by ${headsOrderSql('h')}`,
          params,
        );
        expect(heads.map((r) => r.id)).toEqual(expected);

        const rule = queueRuleSql('o', 'r');
        const pairs = await t.sql<{
          o: number;
          r: number;
          ahead: boolean;
          higher: boolean;
          fair: boolean;
          age: boolean;
        }>(
          `with w as (select * from ${values})
           select o.id as o, r.id as r, ${aheadInQueueSql('o', 'r')} as ahead,
                  ${aheadInQueueSql('o', 'r')} and ${rule.HIGHER_PRIORITY} as higher,
                  ${aheadInQueueSql('o', 'r')} and ${rule.FAIR_SHARE} as fair,
                  ${aheadInQueueSql('o', 'r')} and ${rule.AGE} as age
             from w o cross join w r where o.id <> r.id`,
          params,
        );
        const keyOf = new Map(keys.map((k) => [k.id, k]));
        for (const p of pairs) {
          const o = keyOf.get(p.o)!;
          const r = keyOf.get(p.r)!;
          expect(p.ahead).toBe(queueBefore(o, r));
          const byRule = queueRuleBetween(o, r);
          expect({ higher: p.higher, fair: p.fair, age: p.age }).toEqual({
            higher: byRule === 'HIGHER_PRIORITY',
            fair: byRule === 'FAIR_SHARE',
            age: byRule === 'AGE',
          });
        }
      }),
      { numRuns: 40 },
    );
  });
});
