/**
 * Derives a worker's provided and required tag sets (docs/design.md: workers) and a pool's template sets
 * (docs/design.md: worker pools) from the type, the pool, and the static (admin) and dynamic (worker) metadata.
 *
 * Metadata is untrusted JSON: nothing in it makes these functions throw. A value of the wrong
 * shape is skipped and recorded as a refusal naming its key, and a tag the provenance rules
 * refuse is recorded too, so that a worker's heartbeat never fails because of one bad tag.
 */
import { CPU_SPEED_ALL_TAG, CPU_SPEED_TAG } from './host-speed.js';
import { imageTags, type CatalogTask } from './pool-image.js';
import { PROVENANCE_TRUST } from './provenance.js';
import { BYTES_PER_GIB, DEFAULT_SIZE_THRESHOLDS, sizeClass } from './size-class.js';
import type { SizeThresholds } from './size-class.js';
import { parseTag } from './syntax.js';
import { TagSetBuilder } from './tag-set.js';
import { describeValue, hasValue, isRecord, kindOf } from './untrusted-json.js';
import type { JsonRecord } from './untrusted-json.js';
import { REFUSAL_CODES } from './types.js';
import type { Provenance, TagEntry, TagRefusal } from './types.js';

/** Static (admin) or dynamic (worker-reported) metadata of a worker; every key is optional and untrusted. */
export interface WorkerMetadata {
  'system:architectures'?: string[];
  'system:cpu_count'?: number;
  /** The single-core and all-core scores of the agent's benchmark (agent/speed.ts). */
  'system:cpu_speed'?: number;
  'system:cpu_speed_all'?: number;
  /** Bytes. */
  'system:total_physical_memory'?: number;
  /** Bytes. */
  'system:disk_free'?: number;
  'system:executors'?: string[];
  'system:tools'?: string[];
  'system:tasks'?: { type: string; name: string; version: number }[];
  provided_tags?: string[];
  required_tags?: string[];
  [key: string]: unknown;
}

/** The instance size of a pool's workers, what its image holds, and whatever else its provider needs (validated in services/pools/pool-specifications.ts). */
export interface PoolSpecifications {
  cpuCount?: number;
  memoryGib?: number;
  diskGib?: number;
  concurrency?: number;
  /** Its workers share their resources instead of fixed slots (scheduler/rules/resources.ts); false when unset. */
  offersResources?: boolean;
  architectures?: string[];
  enableBackends?: string[];
  enableTasks?: string[];
  /** The name of a registered worker image; its manifest's tags replace the three lists above. */
  image?: string;
  handlers?: { task: string; command: string }[];
  [key: string]: unknown;
}

/** The registered image a pool names: its name and the tags its manifest says a worker booted from it provides. */
export interface PoolImage {
  readonly name: string;
  readonly tags: readonly string[];
}

/** What of a pool decides the tags of the workers it starts. */
export interface PoolTagInput {
  name: string;
  providedTags: readonly string[];
  requiredTags: readonly string[];
  specifications: PoolSpecifications;
  /** The image its specifications name, when they name one. */
  image: PoolImage | null;
  /** The tasks its `enableTasks` and `handlers` may name (the task registry's WORKER_TASK_CATALOG). */
  taskCatalog: readonly CatalogTask[];
}

/** Everything a worker's tag sets depend on, already loaded from the database. */
export interface WorkerTagInput {
  type: 'worker' | 'server' | 'signing' | 'not-assignable';
  pool: PoolTagInput | null;
  staticMetadata: WorkerMetadata;
  dynamicMetadata: WorkerMetadata;
  sizeThresholds: SizeThresholds;
}

/** The two sets of a worker or pool template, with their entries, their tags and what was refused. */
export interface ComputedWorkerTags {
  provided: TagEntry[];
  required: TagEntry[];
  providedTags: string[];
  requiredTags: string[];
  rejected: TagRefusal[];
}

/** Who wrote a piece of input, which decides the provenance of the tags it yields. */
interface Origin {
  readonly provenance: Provenance;
  readonly source: string;
  /** How messages name the input. */
  readonly label: string;
}

const STATIC_ORIGIN: Origin = { provenance: 'admin', source: 'static-metadata', label: 'static metadata' };
const DYNAMIC_ORIGIN: Origin = { provenance: 'worker', source: 'dynamic-metadata', label: 'dynamic metadata' };

const WORKER_TYPES: readonly string[] = ['worker', 'server', 'signing', 'not-assignable'];

/** Facts that are lists of names, each becoming one tag under a prefix. */
const LIST_FACTS = [
  { key: 'system:architectures', prefix: 'worker:build-arch:' },
  { key: 'system:executors', prefix: 'worker:executor:' },
  { key: 'system:tools', prefix: 'worker:cap:' },
] as const;

function wholeGib(bytes: number): number {
  return Math.floor(bytes / BYTES_PER_GIB);
}

/** Facts that are numbers, each becoming one valued tag; byte counts are floored to whole GiB. */
const NUMBER_FACTS = [
  { key: 'system:cpu_count', name: 'worker:cpu-count', toValue: (n: number) => n },
  { key: 'system:cpu_speed', name: CPU_SPEED_TAG, toValue: (n: number) => n },
  { key: 'system:cpu_speed_all', name: CPU_SPEED_ALL_TAG, toValue: (n: number) => n },
  { key: 'system:total_physical_memory', name: 'worker:memory-gib', toValue: wholeGib },
  { key: 'system:disk_free', name: 'worker:disk-gib', toValue: wholeGib },
] as const;

/** Pool specifications that become valued tags. */
const SPEC_TAGS = [
  { key: 'cpuCount', name: 'worker:cpu-count' },
  { key: 'memoryGib', name: 'worker:memory-gib' },
  { key: 'diskGib', name: 'worker:disk-gib' },
] as const;

/** Canonical decimal for ordinary numbers; anything else (negative, NaN, 1e+21) is refused by the syntax. */
function formatNumber(n: number): string {
  return Object.is(n, -0) ? '0' : String(n);
}

/** The two builders of a worker, with the helpers that read untrusted values into them. */
class WorkerSets {
  readonly provided = new TagSetBuilder('worker-provided');
  readonly required = new TagSetBuilder('worker-required');

  garbage(builder: TagSetBuilder, value: unknown, origin: Origin, what: string, expected: string): void {
    builder.refuse(
      describeValue(value),
      origin.provenance,
      origin.source,
      REFUSAL_CODES.INVALID_SYNTAX,
      `${origin.label} ${what} must be ${expected}, got ${kindOf(value)}; it was skipped`,
    );
  }

  /** The string elements of a list value; everything else is recorded and skipped. */
  strings(builder: TagSetBuilder, value: unknown, origin: Origin, key: string): string[] {
    if (!Array.isArray(value)) {
      this.garbage(builder, value, origin, `"${key}"`, 'a list of strings');
      return [];
    }
    const result: string[] = [];
    value.forEach((element: unknown, i) => {
      if (typeof element === 'string') result.push(element);
      else this.garbage(builder, element, origin, `"${key}"[${i}]`, 'a string');
    });
    return result;
  }

  addTagLists(metadata: JsonRecord, origin: Origin): void {
    if (hasValue(metadata, 'provided_tags')) {
      const tags = this.strings(this.provided, metadata.provided_tags, origin, 'provided_tags');
      this.provided.addAll(tags, origin.provenance, origin.source);
    }
    if (hasValue(metadata, 'required_tags')) {
      // A worker's own required tags are refused by the set's provenance rule, and recorded as such.
      const tags = this.strings(this.required, metadata.required_tags, origin, 'required_tags');
      this.required.addAll(tags, origin.provenance, origin.source);
    }
  }

  addFacts(staticMetadata: JsonRecord, dynamicMetadata: JsonRecord): void {
    const pick = (key: string): { value: unknown; origin: Origin } | null => {
      if (hasValue(staticMetadata, key)) return { value: staticMetadata[key], origin: STATIC_ORIGIN };
      if (hasValue(dynamicMetadata, key)) return { value: dynamicMetadata[key], origin: DYNAMIC_ORIGIN };
      return null;
    };
    for (const { key, prefix } of LIST_FACTS) {
      const fact = pick(key);
      if (fact === null) continue;
      for (const name of this.strings(this.provided, fact.value, fact.origin, key)) {
        this.provided.add(`${prefix}${name}`, fact.origin.provenance, fact.origin.source);
      }
    }
    for (const { key, name, toValue } of NUMBER_FACTS) {
      const fact = pick(key);
      if (fact === null) continue;
      if (typeof fact.value === 'number') {
        this.provided.add(`${name}=${formatNumber(toValue(fact.value))}`, fact.origin.provenance, fact.origin.source);
      } else {
        this.garbage(this.provided, fact.value, fact.origin, `"${key}"`, 'a number');
      }
    }
    const tasks = pick('system:tasks');
    if (tasks !== null) this.addTaskFacts(tasks.value, tasks.origin);
  }

  private addTaskFacts(value: unknown, origin: Origin): void {
    if (!Array.isArray(value)) {
      this.garbage(this.provided, value, origin, '"system:tasks"', 'a list of {type, name, version}');
      return;
    }
    value.forEach((element: unknown, i) => {
      const task = readTaskFact(element);
      if (task === null) {
        const expected = '{type, name, version} with a whole version';
        this.garbage(this.provided, element, origin, `"system:tasks"[${i}]`, expected);
        return;
      }
      const tag = `worker:task:${task.type}:${task.name}:version:${task.version}`;
      this.provided.add(tag, origin.provenance, origin.source);
    });
  }

  addPool(pool: PoolTagInput): void {
    const origin: Origin = { provenance: 'admin', source: `pool:${pool.name}`, label: `pool "${pool.name}"` };
    const provided = this.strings(this.provided, pool.providedTags, origin, 'providedTags');
    this.provided.addAll(provided, origin.provenance, origin.source);
    const required = this.strings(this.required, pool.requiredTags, origin, 'requiredTags');
    this.required.addAll(required, origin.provenance, origin.source);

    const specOrigin: Origin = { ...origin, source: `pool:${pool.name}:specifications` };
    const specs: unknown = pool.specifications;
    if (!isRecord(specs)) {
      if (specs !== null && specs !== undefined) {
        this.garbage(this.provided, specs, specOrigin, 'specifications', 'an object');
      }
      return;
    }
    for (const { key, name } of SPEC_TAGS) {
      if (!hasValue(specs, key)) continue;
      const value = specs[key];
      if (typeof value === 'number') this.provided.add(`${name}=${formatNumber(value)}`, 'admin', specOrigin.source);
      else this.garbage(this.provided, value, specOrigin, `specification "${key}"`, 'a number');
    }
    // What the machines hold: a registered image's manifest says it; a pool with no image says it
    // in its specifications (architectures, enableBackends, enableTasks; pool-image.ts).
    if (pool.image) {
      const imageSource = `image:${pool.image.name}`;
      const tags = this.strings(
        this.provided,
        pool.image.tags,
        { provenance: 'admin', source: imageSource, label: `image "${pool.image.name}"` },
        'tags',
      );
      this.provided.addAll(tags, 'admin', imageSource);
    }
    const list = (key: string): string[] | undefined =>
      !pool.image && hasValue(specs, key)
        ? this.strings(this.provided, specs[key], specOrigin, `specifications.${key}`)
        : undefined;
    const image = {
      architectures: list('architectures'),
      enableBackends: list('enableBackends'),
      enableTasks: list('enableTasks'),
      handlerTasks: hasValue(specs, 'handlers') ? this.handlerTasks(specs.handlers, specOrigin) : undefined,
    };
    for (const { tag } of imageTags(image, pool.taskCatalog)) this.provided.add(tag, 'admin', specOrigin.source);
  }

  /** The task names of a pool's `handlers` ({task, command} each); anything else is recorded and skipped. */
  private handlerTasks(value: unknown, origin: Origin): string[] {
    if (!Array.isArray(value)) {
      this.garbage(this.provided, value, origin, '"specifications.handlers"', 'a list of {task, command}');
      return [];
    }
    return value.flatMap((h: unknown, i) => {
      if (isRecord(h) && typeof h.task === 'string') return [h.task];
      this.garbage(this.provided, h, origin, `"specifications.handlers"[${i}]`, '{task, command}');
      return [];
    });
  }

  /**
   * The class comes from the values the set kept (so a pool's specifications, which beat the
   * worker's own report, also decide its class), with the provenance of the least trusted of them.
   */
  addSizeClass(thresholds: SizeThresholds): void {
    const entries = this.provided.entries();
    const chosen = SPEC_TAGS.map(({ name }) => strongestValue(entries, name));
    const [cpu, memory, disk] = chosen;
    if (cpu === null || memory === null || disk === null) return;
    const size = sizeClass({ cpuCount: cpu.value, memoryGib: memory.value, diskGib: disk.value }, thresholds);
    if (size === null) return;
    let weakest = cpu;
    for (const c of [memory, disk]) {
      if (PROVENANCE_TRUST[c.entry.provenance] < PROVENANCE_TRUST[weakest.entry.provenance]) weakest = c;
    }
    this.provided.add(`worker:size:${size}`, weakest.entry.provenance, weakest.entry.source);
  }

  result(): ComputedWorkerTags {
    return {
      provided: this.provided.entries(),
      required: this.required.entries(),
      providedTags: this.provided.tags(),
      requiredTags: this.required.tags(),
      rejected: [...this.provided.refusals(), ...this.required.refusals()],
    };
  }
}

function readTaskFact(value: unknown): { type: string; name: string; version: number } | null {
  if (!isRecord(value)) return null;
  const { type, name, version } = value;
  if (typeof type !== 'string' || typeof name !== 'string' || typeof version !== 'number') return null;
  return Number.isSafeInteger(version) && version >= 0 ? { type, name, version } : null;
}

/** The most trusted accepted entry giving a value to this name (all accepted entries of a name agree on it). */
function strongestValue(entries: readonly TagEntry[], name: string): { entry: TagEntry; value: number } | null {
  let best: { entry: TagEntry; value: number } | null = null;
  for (const entry of entries) {
    const parsed = parseTag(entry.tag, 'provided');
    if (!parsed.ok || parsed.tag.kind !== 'value' || parsed.tag.name !== name) continue;
    if (best === null || PROVENANCE_TRUST[entry.provenance] > PROVENANCE_TRUST[best.entry.provenance]) {
      best = { entry, value: parsed.tag.value };
    }
  }
  return best;
}

function metadataRecord(sets: WorkerSets, value: unknown, origin: Origin): JsonRecord {
  if (isRecord(value)) return value;
  if (value !== null && value !== undefined) sets.garbage(sets.provided, value, origin, 'as a whole', 'an object');
  return {};
}

/**
 * Computes a worker's two tag sets. Per-worker admin input comes before the pool, so that on a
 * valued tag both give, the worker's static metadata wins (equal trust: the first one added).
 * Facts merge per key with static over dynamic, but the `provided_tags` of both are kept: they
 * are lists to add up, not values to choose between, and each entry is checked as its own provenance.
 */
export function computeWorkerTags(input: WorkerTagInput): ComputedWorkerTags {
  const sets = new WorkerSets();
  const staticMetadata = metadataRecord(sets, input.staticMetadata, STATIC_ORIGIN);
  const dynamicMetadata = metadataRecord(sets, input.dynamicMetadata, DYNAMIC_ORIGIN);

  const typeOrigin: Origin = { provenance: 'system', source: 'worker.type', label: 'worker' };
  if (WORKER_TYPES.includes(input.type)) sets.provided.add(`worker:type:${input.type}`, 'system', typeOrigin.source);
  else sets.garbage(sets.provided, input.type, typeOrigin, 'type', `one of ${WORKER_TYPES.join(', ')}`);

  sets.addTagLists(staticMetadata, STATIC_ORIGIN);
  sets.addFacts(staticMetadata, dynamicMetadata);
  if (input.pool !== null) sets.addPool(input.pool);
  sets.addTagLists(dynamicMetadata, DYNAMIC_ORIGIN);
  sets.addSizeClass(input.sizeThresholds);
  return sets.result();
}

/**
 * Computes the tags any worker started by a pool will have: the pool's tags, the valued tags and
 * size class of its specifications, what its image holds (its registered image's manifest tags, with
 * source `image:NAME`; for a pool with no image, pool-image.ts from its specifications), and `worker:type:worker`;
 * scaling from zero matches on these.
 */
export function computePoolTemplateTags(
  pool: PoolTagInput,
  sizeThresholds: SizeThresholds = DEFAULT_SIZE_THRESHOLDS,
): ComputedWorkerTags {
  const sets = new WorkerSets();
  sets.provided.add('worker:type:worker', 'system', 'pool-template');
  sets.addPool(pool);
  sets.addSizeClass(sizeThresholds);
  return sets.result();
}
