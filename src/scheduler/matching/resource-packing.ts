/**
 * How many machines of one size a set of requests for resources needs, by first-fit decreasing, pure:
 * the requests from the largest down, each on the first machine it fits in (rules/resources.ts:
 * fitsResources against what the machine has free), a new machine when it fits on none. A request larger
 * than the machine on some figure can never be placed and is set apart. packOnto places requests one by
 * one; packGroups places groups of equal requests in bulk, with the same result, for demand
 * (demand-plan.ts: pools whose machines share their resources), where a queue holds many equal requests.
 */
import { fitsResources, freeResources, type Resources } from '../rules/resources.js';

/** A request to place: its id and what it reserves. */
export interface PackingRequest {
  readonly id: number;
  readonly request: Resources;
}

/** One machine of the packing: the ids of the requests on it, in the order they were placed, and what they reserve together. */
export interface PackedMachine {
  readonly ids: number[];
  readonly used: Resources;
}

export interface Packing {
  readonly machines: PackedMachine[];
  /** The ids of the requests larger than the machine on some figure, in the order they were given. */
  readonly unplaceable: number[];
}

/**
 * The order of the packing: CPUs descending, then memory descending, then disk descending, then id
 * ascending. Array.prototype.sort is stable, so requests equal in all four keep the order they were given.
 */
const largestFirst = (a: PackingRequest, b: PackingRequest): number =>
  b.request.cpus - a.request.cpus ||
  b.request.memoryMib - a.request.memoryMib ||
  b.request.diskMib - a.request.diskMib ||
  a.id - b.id;

/**
 * First-fit decreasing of `requests` onto machines offering `size` each: the placeable requests in the
 * order of {@link largestFirst}, each on the first machine (in the order they were opened) where it fits
 * in `size` less what is already on it, else on a new machine. The machines in the order they were opened.
 */
export const packOnto = (size: Resources, requests: readonly PackingRequest[]): Packing => {
  const unplaceable = requests.filter((r) => !fitsResources(r.request, size)).map((r) => r.id);
  const placeable = requests.filter((r) => fitsResources(r.request, size)).sort(largestFirst);
  const machines: { ids: number[]; used: Resources }[] = [];
  for (const { id, request } of placeable) {
    const machine = machines.find((m) => fitsResources(request, freeResources(size, [m.used])));
    if (machine) {
      machine.ids.push(id);
      machine.used = {
        cpus: machine.used.cpus + request.cpus,
        memoryMib: machine.used.memoryMib + request.memoryMib,
        diskMib: machine.used.diskMib + request.diskMib,
      };
    } else {
      machines.push({ ids: [id], used: { ...request } });
    }
  }
  return { machines, unplaceable };
};

/** Equal requests to place together: what each reserves and how many there are. */
export interface PackingGroup {
  readonly request: Resources;
  readonly n: number;
}

/** What packGroups gives: the machines opened, with how many requests and what they reserve on each, and the requests larger than a machine. */
export interface GroupPacking {
  readonly machines: { count: number; used: Resources }[];
  readonly unplaceable: number;
}

/** How many of `request` fit in `free` (Infinity when it reserves nothing). */
const fitCount = (request: Resources, free: Resources): number => {
  let k = Infinity;
  if (request.cpus > 0) k = Math.min(k, Math.floor(free.cpus / request.cpus));
  if (request.memoryMib > 0) k = Math.min(k, Math.floor(free.memoryMib / request.memoryMib));
  if (request.diskMib > 0) k = Math.min(k, Math.floor(free.diskMib / request.diskMib));
  return k;
};

/**
 * packOnto for groups of equal requests, with at most `perMachine` requests on a machine (a pool's
 * concurrency, the cap on the count): the groups from the largest down (the order of packOnto), each
 * group's requests on the first machines with room, as many on each as fit, then on new machines. First
 * fit puts equal requests one after another on the first machine with room, so this is the same packing
 * (test/scheduler/matching/resource-packing.test.ts compares them), in time of groups × machines.
 */
export const packGroups = (size: Resources, groups: readonly PackingGroup[], perMachine = Infinity): GroupPacking => {
  let unplaceable = 0;
  const placeable: PackingGroup[] = [];
  for (const g of groups) {
    if (g.n <= 0) continue;
    if (fitsResources(g.request, size)) placeable.push(g);
    else unplaceable += g.n;
  }
  placeable.sort((a, b) => largestFirst({ id: 0, request: a.request }, { id: 0, request: b.request }));
  const machines: { count: number; used: Resources }[] = [];
  const put = (m: { count: number; used: Resources }, request: Resources, k: number) => {
    m.count += k;
    m.used = {
      cpus: m.used.cpus + k * request.cpus,
      memoryMib: m.used.memoryMib + k * request.memoryMib,
      diskMib: m.used.diskMib + k * request.diskMib,
    };
  };
  for (const { request, n } of placeable) {
    let left = n;
    for (const m of machines) {
      if (!left) break;
      const k = Math.min(left, perMachine - m.count, fitCount(request, freeResources(size, [m.used])));
      if (k > 0) {
        put(m, request, k);
        left -= k;
      }
    }
    const each = Math.min(perMachine, fitCount(request, size));
    while (left > 0) {
      const m = { count: 0, used: { cpus: 0, memoryMib: 0, diskMib: 0 } };
      put(m, request, Math.min(left, each));
      left -= Math.min(left, each);
      machines.push(m);
    }
  }
  return { machines, unplaceable };
};
