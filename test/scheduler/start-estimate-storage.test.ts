/**
 * What the start estimate reads of the queue (src/scheduler/storage/start-estimate.ts), on the real
 * database: the tasks ahead of a pending request in its class's queue order, as runs of consecutive
 * requests of one task, and nothing of other classes or of requests behind it.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { classifyPending, inRollback, insertPending, type RequestRow } from '../helpers/scheduler-fixtures.js';
import { aheadRuns } from '../../src/scheduler/storage/start-estimate.js';

const t = useTestApp();

const row = (key: string, createdAtSeconds: number, requiredTags = ['site:est']): RequestRow => ({
  key,
  providedTags: [],
  requiredTags,
  priorityBase: 0,
  priorityAdjustment: 0,
  createdAtSeconds,
});

describe('aheadRuns', () => {
  it('the tasks ahead in queue order, consecutive ones of a task as one run; priority reorders them; other classes and those behind are left out', async () => {
    await inRollback(t, async (tx) => {
      const ids = await insertPending(t, tx, [
        row('r1', 1),
        row('r2', 2),
        row('r3', 3),
        row('r4', 4),
        row('r5', 5),
        row('r6', 6),
        row('r7', 7),
        row('r8', 8),
        row('other', 0, ['site:elsewhere']),
      ]);
      await classifyPending(tx);
      const rename = async (keys: string[], name: string) =>
        tx.execute(`update work_request set task_name = ? where id = any(?::int[])`, [
          name,
          `{${keys.map((k) => ids.get(k)).join(',')}}`,
        ]);
      await rename(['r1', 'r2', 'r4', 'r5'], 'a');
      await rename(['r3', 'r6'], 'b');
      const r7 = ids.get('r7')!;
      const runs = (m: Map<number, { taskName: string; count: number }[]>) =>
        (m.get(r7) ?? []).map((r) => `${r.taskName}×${r.count}`);
      expect(runs(await aheadRuns(tx, [r7]))).toEqual(['a×2', 'b×1', 'a×2', 'b×1']);
      await tx.execute(`update work_request set priority_base = 1 where id = ?`, [ids.get('r6')]);
      expect(runs(await aheadRuns(tx, [r7, ids.get('r1')!]))).toEqual(['b×1', 'a×2', 'b×1', 'a×2']);
      // The head has nothing ahead.
      expect((await aheadRuns(tx, [ids.get('r6')!])).get(ids.get('r6')!)).toBeUndefined();
    });
  });
});
