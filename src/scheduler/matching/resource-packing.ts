/**
 * How many machines of one size a set of requests for resources needs, by first-fit decreasing, pure:
 * the requests from the largest down, each on the first machine it fits in (rules/resources.ts:
 * fitsResources against what the machine has free), a new machine when it fits on none. A request larger
 * than the machine on some figure can never be placed and is set apart. Nothing calls it yet (demand,
 * for pools whose workers offer resources, is to).
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
