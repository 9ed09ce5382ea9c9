import { describe, expect, it } from 'vitest';
import {
  chooseOnHost,
  type HostCandidate,
  type StoredReservation,
} from '../../../src/scheduler/matching/host-choice.js';
import type { Resources, RunningWork } from '../../../src/scheduler/rules/resources.js';

const GIB = 1024;
const NOW = new Date('2026-12-02T12:00:00Z');
const at = (minutes: number) => new Date(NOW.getTime() + minutes * 60_000);
const r = (cpus: number, memoryGib: number, diskGib = 0): Resources => ({
  cpus,
  memoryMib: memoryGib * GIB,
  diskMib: diskGib * GIB,
});
const run = (res: Resources, endsInMinutes: number): RunningWork => ({
  reserved: res,
  expectedEndAt: at(endsInMinutes),
});
const cand = (
  id: number,
  res: Resources,
  expectedMinutes: number | null = null,
  reservedElsewhere = false,
): HostCandidate => ({
  id,
  reserved: res,
  expectedSeconds: expectedMinutes === null ? null : expectedMinutes * 60,
  reservedElsewhere,
});
const HOST = r(8, 16);
const choose = (
  running: RunningWork[],
  candidates: HostCandidate[],
  reservation: StoredReservation | null = null,
  offered = HOST,
) => chooseOnHost({ offered, running, reservation, candidates, now: NOW, safetyFactor: 1.5, maxSeconds: 6 * 3600 });

describe('chooseOnHost', () => {
  it('takes every request that fits, in queue order, and reserves nothing when all fit', () => {
    const c = choose([], [cand(1, r(2, 2)), cand(2, r(2, 2)), cand(3, r(2, 2))]);
    expect(c.take).toEqual([1, 2, 3]);
    expect(c.reservation).toEqual({ kind: 'keep', startsAt: null });
    expect(c.heldFor).toBeNull();
  });

  it('passes over a request larger than the worker without reserving it', () => {
    const c = choose([], [cand(1, r(16, 2)), cand(2, r(2, 2))]);
    expect(c.take).toEqual([2]);
    expect(c.heldFor).toBeNull();
  });

  it('reserves the worker for the first request that fits what it offers but not what it has free', () => {
    // 4 × 2 CPUs, 2 GiB running; the 12 GiB request fits 16 GiB once two of them end (at 10 and 20 minutes).
    const running = [run(r(2, 2), 10), run(r(2, 2), 20), run(r(2, 2), 30), run(r(2, 2), 40)];
    const c = choose(running, [cand(9, r(2, 12))]);
    expect(c.take).toEqual([]);
    expect(c.reservation).toEqual({ kind: 'reserve', workRequestId: 9, startsAt: at(20) });
  });

  it('holds back small work that would delay the reserved request and backfills work that ends first', () => {
    // Running: 2 CPUs, 6 GiB until +30 min, and 2 CPUs, 4 GiB until +90. Reserved: 4 CPUs, 12 GiB, which
    // fits once the first ends (at +30), beside the second.
    const running = [run(r(2, 6), 30), run(r(2, 4), 90)];
    const reservation: StoredReservation = { workRequestId: 9, reservedAt: at(-1), lapsed: false, request: r(4, 12) };
    const c = choose(
      running,
      [
        cand(9, r(4, 12)), // still does not fit now: 6 GiB free
        cand(10, r(1, 2), 60), // would still run at +30: 4 + 2 + 12 GiB > 16, and 60 min × 1.5 > 30
        cand(11, r(1, 2), 10), // ends by +15 (10 min × 1.5): backfilled
        cand(12, r(1, 2)), // no history: it could run long, and it leaves no room at +30
        cand(13, r(1, 0)), // leaves room even while it runs: 4 + 0 + 12 GiB <= 16, 2 + 1 + 4 CPUs <= 8
      ],
      reservation,
    );
    expect(c.take).toEqual([11, 13]);
    expect(c.reservation).toEqual({ kind: 'keep', startsAt: at(30) });
    expect(c.heldFor).toEqual({ workRequestId: 9, startsAt: at(30) });
  });

  it('takes the reserved request as soon as it fits', () => {
    const reservation: StoredReservation = { workRequestId: 9, reservedAt: at(-5), lapsed: false, request: r(4, 12) };
    const c = choose([run(r(2, 2), 30)], [cand(9, r(4, 12)), cand(10, r(1, 1), 1)], reservation);
    expect(c.take[0]).toBe(9);
  });

  it('clears a reservation whose request is no longer pending, and reserves anew', () => {
    const reservation: StoredReservation = { workRequestId: 9, reservedAt: at(-5), lapsed: false, request: null };
    const c = choose([run(r(8, 2), 30)], [cand(10, r(2, 2))], reservation);
    expect(c.reservation).toEqual({ kind: 'reserve', workRequestId: 10, startsAt: at(30) });
    const none = choose([], [], reservation);
    expect(none.reservation).toEqual({ kind: 'clear' });
  });

  it('lets a reservation lapse after its longest hold, and that request does not reserve the worker again', () => {
    const reservation: StoredReservation = {
      workRequestId: 9,
      reservedAt: at(-6 * 60),
      lapsed: false,
      request: r(4, 12),
    };
    const c = choose([run(r(2, 10), 30)], [cand(9, r(4, 12)), cand(10, r(1, 2))], reservation);
    expect(c.reservation).toEqual({ kind: 'lapse' });
    expect(c.take).toEqual([10]); // nothing is held back any more
    const after = choose([run(r(2, 10), 30)], [cand(9, r(4, 12))], { ...reservation, lapsed: true });
    expect(after.reservation).toEqual({ kind: 'keep', startsAt: null });
    expect(after.heldFor).toBeNull();
  });

  it('does not reserve for a request that holds another worker, but for the next one', () => {
    const c = choose([run(r(8, 2), 30)], [cand(9, r(4, 4), null, true), cand(10, r(2, 2))]);
    expect(c.reservation).toEqual({ kind: 'reserve', workRequestId: 10, startsAt: at(30) });
  });

  it('never takes work that exceeds what is free, on any figure', () => {
    const c = choose([run(r(1, 1, 90), 5)], [cand(1, r(1, 1, 20)), cand(2, r(1, 1, 10))], null, r(8, 16, 100));
    expect(c.take).toEqual([2]);
  });

  it('moves the reservation to a request that comes first in the queue, and takes fitting work ahead of it', () => {
    const stored: StoredReservation = { workRequestId: 9, reservedAt: at(-5), lapsed: false, request: r(2, 2) };
    // Full on CPUs: 9 (2 CPUs) waits for one; 8 (2 CPUs, 12 GiB) is now ahead of it in the queue.
    const running = [run(r(6, 2), 10), run(r(1, 2), 20)];
    const c = choose(running, [cand(7, r(1, 1)), cand(8, r(2, 12)), cand(9, r(2, 2))], stored);
    expect(c.reservation).toEqual({ kind: 'reserve', workRequestId: 8, startsAt: at(10) });
    expect(c.take).toEqual([7]); // ahead of 8 in the queue, and it fits
  });
});
