import { describe, expect, it } from 'vitest';
import { createPresenceWriter } from '../../src/services/workers/presence.js';

/** A writer whose batches are recorded, and held until released. */
function recorder() {
  const batches: { connected: number[]; disconnected: number[] }[] = [];
  const gates: (() => void)[] = [];
  let fail: Error | null = null;
  const writer = createPresenceWriter({
    connected: async (ids) => {
      batches.push({ connected: [...ids], disconnected: [] });
      await new Promise<void>((r) => gates.push(r));
      if (fail) throw fail;
    },
    disconnected: async (ids) => {
      batches.at(-1)!.disconnected = [...ids];
    },
  });
  const tick = () => new Promise((r) => setImmediate(r));
  return { writer, batches, release: () => gates.shift()?.(), tick, failWith: (e: Error | null) => (fail = e) };
}

describe('the presence writer batches connections and disconnections', () => {
  it('writes what arrives together in one batch, and what arrives while a batch is written in the next one', async () => {
    const r = recorder();
    const first = [r.writer.connected(1), r.writer.connected(2), r.writer.disconnected(3)];
    await r.tick();
    expect(r.batches).toEqual([{ connected: [1, 2], disconnected: [] }]); // held in its connected write
    // While the first batch is written, 200 more arrive: they wait and go together.
    const second = [
      ...Array.from({ length: 100 }, (_, i) => r.writer.connected(100 + i)),
      ...Array.from({ length: 100 }, (_, i) => r.writer.disconnected(200 + i)),
    ];
    let firstDone = false;
    void Promise.all(first).then(() => (firstDone = true));
    await r.tick();
    expect(r.batches).toHaveLength(1);
    r.release();
    await Promise.all(first);
    expect(firstDone).toBe(true);
    expect(r.batches[0]).toEqual({ connected: [1, 2], disconnected: [3] });
    await r.tick();
    expect(r.batches).toHaveLength(2);
    expect(r.batches[1].connected).toHaveLength(100);
    r.release();
    await Promise.all(second);
    expect(r.batches[1].disconnected).toEqual(Array.from({ length: 100 }, (_, i) => 200 + i));
    await r.writer.idle();
    expect(r.batches).toHaveLength(2);
  });

  it('rejects the calls of a failed batch with its error, and writes the next batch all the same', async () => {
    const r = recorder();
    r.failWith(new Error('the database is gone'));
    const failed = r.writer.connected(1);
    await r.tick();
    const later = r.writer.connected(2);
    r.release();
    await expect(failed).rejects.toThrow('the database is gone');
    r.failWith(null);
    await r.tick();
    r.release();
    await expect(later).resolves.toBeUndefined();
    expect(r.batches.map((b) => b.connected)).toEqual([[1], [2]]);
  });

  it('leaves no unhandled rejection behind when the last batch fails and nothing comes after it', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const r = recorder();
      r.failWith(new Error('the database is restarting'));
      const failed = r.writer.disconnected(7).catch((e: Error) => e.message);
      await r.tick();
      r.release();
      expect(await failed).toBe('the database is restarting');
      for (let i = 0; i < 5; i++) await r.tick();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
