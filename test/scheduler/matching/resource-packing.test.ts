/**
 * First-fit decreasing of requests for resources onto machines of one size
 * (src/scheduler/matching/resource-packing.ts), pure: tables of known packings, and a property over
 * generated sizes and requests that no machine is over-committed, every request is placed once or set
 * apart, each new machine was needed (its first request fitted on no machine before it), and the count
 * lies between the placeable requests' lower bound and their number.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { packGroups, packOnto, type PackingRequest } from '../../../src/scheduler/matching/resource-packing.js';
import { fitsResources, freeResources, NO_RESOURCES, type Resources } from '../../../src/scheduler/rules/resources.js';

const GiB = 1024;
const res = (cpus: number, memoryGib = 0, diskGib = 0): Resources => ({
  cpus,
  memoryMib: memoryGib * GiB,
  diskMib: diskGib * GiB,
});
const FIGURES = ['cpus', 'memoryMib', 'diskMib'] as const;
const sizeOf = (requests: readonly PackingRequest[]): Resources => ({
  cpus: requests.reduce((s, r) => s + r.request.cpus, 0),
  memoryMib: requests.reduce((s, r) => s + r.request.memoryMib, 0),
  diskMib: requests.reduce((s, r) => s + r.request.diskMib, 0),
});

/** Lexicographic order of two lists of numbers of the same length. */
const compareKeys = (a: readonly number[], b: readonly number[]): number =>
  a.reduce((order, x, i) => order || x - b[i], 0);

describe('packOnto, tables', () => {
  const large = res(16, 64, 500);

  it('40 two-CPU requests on 16-CPU machines: 5 machines of 8', () => {
    const requests = Array.from({ length: 40 }, (_, i) => ({ id: i + 1, request: res(2, 4, 10) }));
    const { machines, unplaceable } = packOnto(large, requests);
    expect(unplaceable).toEqual([]);
    expect(machines.map((m) => m.ids)).toEqual(
      [0, 1, 2, 3, 4].map((k) => Array.from({ length: 8 }, (_, i) => k * 8 + i + 1)),
    );
    expect(machines.map((m) => m.used)).toEqual(Array.from({ length: 5 }, () => res(16, 32, 80)));
  });

  it('mixed sizes, given out of order: the largest first, each on the first machine with room', () => {
    const cpus = { 1: 2, 2: 5, 3: 1, 4: 3, 5: 4, 6: 3, 7: 2 };
    const requests = Object.entries(cpus).map(([id, c]) => ({ id: Number(id), request: res(c, 1, 1) }));
    const { machines, unplaceable } = packOnto(res(8, 32, 100), requests);
    expect(machines).toEqual([
      { ids: [2, 4], used: res(8, 2, 2) },
      { ids: [5, 6, 3], used: res(8, 3, 3) },
      { ids: [1, 7], used: res(4, 2, 2) },
    ]);
    expect(unplaceable).toEqual([]);
  });

  it('a request larger than the machine on any figure is unplaceable; the rest are packed', () => {
    const requests = [
      { id: 1, request: res(32, 1, 1) },
      { id: 2, request: res(1, 65, 1) },
      { id: 3, request: res(1, 1, 1) },
      { id: 4, request: res(1, 1, 600) },
    ];
    expect(packOnto(large, requests)).toEqual({ machines: [{ ids: [3], used: res(1, 1, 1) }], unplaceable: [1, 2, 4] });
  });

  it('nothing but unplaceable requests: no machine', () => {
    expect(packOnto(large, [{ id: 7, request: res(17) }])).toEqual({ machines: [], unplaceable: [7] });
  });

  it('memory the binding figure: two 24-GiB requests per 64-GiB machine, though 16 CPUs would take sixteen', () => {
    const requests = [1, 2, 3, 4, 5].map((id) => ({ id, request: res(1, 24, 10) }));
    expect(packOnto(large, requests).machines.map((m) => m.ids)).toEqual([[1, 2], [3, 4], [5]]);
  });

  it('equal CPUs: memory decides the order (40, 24, 24, 16, 8 GiB)', () => {
    const memory = { 1: 8, 2: 40, 3: 24, 4: 24, 5: 16 };
    const requests = Object.entries(memory).map(([id, m]) => ({ id: Number(id), request: res(2, m, 1) }));
    expect(packOnto(large, requests).machines).toEqual([
      { ids: [2, 3], used: res(4, 64, 2) },
      { ids: [4, 5, 1], used: res(6, 48, 3) },
    ]);
  });

  it('equal CPUs and memory: disk decides, then the id', () => {
    const requests = [
      { id: 9, request: res(4, 4, 100) },
      { id: 3, request: res(4, 4, 100) },
      { id: 5, request: res(4, 4, 350) },
      { id: 1, request: res(4, 4, 100) },
    ];
    expect(packOnto(large, requests).machines.map((m) => m.ids)).toEqual([
      [5, 1],
      [3, 9],
    ]);
  });

  it('requests of nothing share one machine', () => {
    const requests = [1, 2, 3].map((id) => ({ id, request: NO_RESOURCES }));
    expect(packOnto(large, requests)).toEqual({ machines: [{ ids: [1, 2, 3], used: NO_RESOURCES }], unplaceable: [] });
  });

  it('empty input: no machine, nothing unplaceable', () => {
    expect(packOnto(large, [])).toEqual({ machines: [], unplaceable: [] });
  });

  it('leaves its input as it was', () => {
    const requests = [
      { id: 1, request: res(1) },
      { id: 2, request: res(4) },
    ];
    const copy = structuredClone(requests);
    packOnto(large, requests);
    expect(requests).toEqual(copy);
  });
});

describe('packOnto, property', () => {
  const sizeArb = fc.record({
    cpus: fc.integer({ min: 1, max: 16 }),
    memoryMib: fc.integer({ min: 1, max: 64 }).map((g) => g * GiB),
    diskMib: fc.integer({ min: 1, max: 200 }).map((g) => g * GiB),
  });
  /** Up to a quarter over the size on each figure, so that some requests are unplaceable. */
  const requestArb = (size: Resources) =>
    fc.record({
      cpus: fc.integer({ min: 0, max: Math.ceil(size.cpus * 1.25) }),
      memoryMib: fc.integer({ min: 0, max: Math.ceil(size.memoryMib * 1.25) }),
      diskMib: fc.integer({ min: 0, max: Math.ceil(size.diskMib * 1.25) }),
    });
  const caseArb = sizeArb.chain((size) =>
    fc.record({
      size: fc.constant(size),
      requests: fc
        .array(requestArb(size), { maxLength: 60 })
        .chain((rs) =>
          fc
            .uniqueArray(fc.integer({ min: 1, max: 100_000 }), { minLength: rs.length, maxLength: rs.length })
            .map((ids) => rs.map((request, i) => ({ id: ids[i], request }))),
        ),
    }),
  );

  it('no machine over-committed, each request once, each machine needed, the count within its bounds', () => {
    fc.assert(
      fc.property(caseArb, ({ size, requests }) => {
        const { machines, unplaceable } = packOnto(size, requests);
        const byId = new Map(requests.map((r) => [r.id, r]));
        const placeable = requests.filter((r) => fitsResources(r.request, size));

        // Every request on exactly one machine, or unplaceable exactly when larger than the size.
        const placed = machines.flatMap((m) => m.ids);
        expect([...placed, ...unplaceable].sort((a, b) => a - b)).toEqual(
          requests.map((r) => r.id).sort((a, b) => a - b),
        );
        expect(unplaceable).toEqual(requests.filter((r) => !fitsResources(r.request, size)).map((r) => r.id));

        for (const m of machines) {
          expect(m.ids.length).toBeGreaterThan(0);
          const on = m.ids.map((id) => byId.get(id)!);
          expect(m.used).toEqual(sizeOf(on));
          expect(fitsResources(m.used, size)).toBe(true);
          // Placed largest first: CPUs, then memory, then disk descending, then the id ascending.
          const keys = on.map((r) => [-r.request.cpus, -r.request.memoryMib, -r.request.diskMib, r.id]);
          for (let k = 1; k < keys.length; k++) expect(compareKeys(keys[k - 1], keys[k])).toBeLessThan(0);
        }

        // First fit: a machine was opened only for a request that fitted on none opened before it
        // (and what a machine has free only shrinks, so it does not fit what they have free at the end).
        machines.forEach((m, j) => {
          const first = byId.get(m.ids[0])!.request;
          for (const earlier of machines.slice(0, j))
            expect(fitsResources(first, freeResources(size, [earlier.used]))).toBe(false);
        });

        const lowerBound = Math.max(0, ...FIGURES.map((f) => Math.ceil(sizeOf(placeable)[f] / size[f])));
        expect(machines.length).toBeLessThanOrEqual(placeable.length);
        expect(machines.length).toBeGreaterThanOrEqual(lowerBound);
      }),
      { numRuns: 300 },
    );
  });
});

describe('packGroups: equal requests in bulk', () => {
  it('40 requests of 2 CPUs on 16-CPU machines take 5; a concurrency of 4 makes it 10; larger ones are set apart', () => {
    const size = res(16, 64, 200);
    expect(packGroups(size, [{ request: res(2, 2), n: 40 }]).machines.map((m) => m.count)).toEqual([8, 8, 8, 8, 8]);
    expect(packGroups(size, [{ request: res(2, 2), n: 40 }], 4).machines).toHaveLength(10);
    expect(
      packGroups(size, [
        { request: res(32), n: 3 },
        { request: res(2), n: 1 },
      ]),
    ).toEqual({
      machines: [{ count: 1, used: res(2) }],
      unplaceable: 3,
    });
    // A request that reserves nothing is held back by the count alone.
    expect(packGroups(size, [{ request: NO_RESOURCES, n: 9 }], 4).machines.map((m) => m.count)).toEqual([4, 4, 1]);
  });

  it('packs as packOnto does the same requests one by one', () => {
    const arb = fc.record({
      size: fc.record({
        cpus: fc.integer({ min: 1, max: 16 }),
        memoryMib: fc.integer({ min: 1, max: 64 }).map((g) => g * GiB),
        diskMib: fc.integer({ min: 1, max: 200 }).map((g) => g * GiB),
      }),
      groups: fc.array(
        fc.record({
          request: fc.record({
            cpus: fc.integer({ min: 0, max: 20 }),
            memoryMib: fc.integer({ min: 0, max: 80 }).map((g) => g * GiB),
            diskMib: fc.integer({ min: 0, max: 250 }).map((g) => g * GiB),
          }),
          n: fc.integer({ min: 0, max: 12 }),
        }),
        { maxLength: 8 },
      ),
    });
    fc.assert(
      fc.property(arb, ({ size, groups }) => {
        // Equal requests given as separate groups pack as one: merge them, as demand reads them grouped.
        const merged = new Map<string, { request: Resources; n: number }>();
        for (const g of groups) {
          const key = JSON.stringify(g.request);
          merged.set(key, { request: g.request, n: (merged.get(key)?.n ?? 0) + g.n });
        }
        let id = 0;
        const one = [...merged.values()].flatMap((g) =>
          Array.from({ length: g.n }, () => ({ id: ++id, request: g.request })),
        );
        const single = packOnto(size, one);
        const bulk = packGroups(size, [...merged.values()]);
        expect(bulk.unplaceable).toBe(single.unplaceable.length);
        expect(bulk.machines).toEqual(single.machines.map((m) => ({ count: m.ids.length, used: m.used })));
      }),
    );
  });
});
