/**
 * Admin input is judged one way (issue 8, point 8): a worker's static metadata and a pool's tags and
 * specifications go through the same tag engine that computes the workers' tags (core/tags/worker-tags.ts),
 * and every tag it would refuse (bad syntax, or a tag admins may not provide, such as `worker:type:*`)
 * refuses the whole input, with every problem listed. A worker's own report is judged by the same
 * engine but never refused: its bad tags are dropped and recorded (docs/design.md: tags and provenance).
 */
import type { Config } from '../../core/config/config.js';
import { ERROR_CODES, type InputProblem } from '../../core/errors.js';
import {
  computePoolTemplateTags,
  computeWorkerTags,
  type PoolSpecifications,
  type WorkerMetadata,
} from '../../core/tags/worker-tags.js';
import { BYTES_PER_GIB } from '../../core/tags/size-class.js';
import { REFUSAL_CODES, type TagRefusal } from '../../core/tags/types.js';
import { poolTagInput } from '../../scheduler/storage/pool-templates.js';

/** One tag an input yields, where it came from, and on which side. */
interface Candidate {
  readonly tag: string;
  readonly path: string;
  readonly set: TagRefusal['set'];
}

/** The refusals of the admin's own tags, as problems in the order of the input; overridden values are no problem. */
function problemsOf(candidates: readonly Candidate[], refused: readonly TagRefusal[]): InputProblem[] {
  const mine = refused.filter((r) => r.provenance === 'admin' && r.code !== REFUSAL_CODES.VALUE_OVERRIDDEN);
  const problems: InputProblem[] = [];
  for (const c of candidates) {
    const refusal = mine.find((r) => r.tag === c.tag && r.set === c.set);
    if (!refusal) continue;
    const code = refusal.code === REFUSAL_CODES.INVALID_SYNTAX ? ERROR_CODES.INVALID_TAG : ERROR_CODES.TAG_NOT_ALLOWED;
    problems.push({ code, message: `${c.path}: ${refusal.message}`, path: c.path, tag: c.tag });
  }
  return problems;
}

const listed = (
  values: readonly unknown[] | undefined,
  path: string,
  set: TagRefusal['set'],
  toTag: (v: string) => string,
): Candidate[] =>
  (values ?? []).flatMap((v, i) => (typeof v === 'string' ? [{ tag: toTag(v), path: `${path}[${i}]`, set }] : []));

/** The valued tag a number becomes, written as the tag engine writes it (a huge one breaks the tag syntax). */
const valued = (value: unknown, name: string, path: string): Candidate[] =>
  typeof value === 'number'
    ? [{ tag: `${name}=${Object.is(value, -0) ? '0' : String(value)}`, path, set: 'worker-provided' }]
    : [];
const gib = (bytes: unknown): unknown => (typeof bytes === 'number' ? Math.floor(bytes / BYTES_PER_GIB) : bytes);

/** TOO_MANY_TAGS for an admin's tag list longer than the configured maximum. */
function countProblems(
  list: readonly unknown[] | undefined,
  path: string,
  config: Pick<Config, 'input'>,
): InputProblem[] {
  if (!list || list.length <= config.input.maxTagsPerSet) return [];
  return [
    {
      code: ERROR_CODES.TOO_MANY_TAGS,
      message: `${path}: at most ${config.input.maxTagsPerSet} tags are accepted, got ${list.length}`,
      path,
      tag: null,
    },
  ];
}

/** Every problem of a worker's static metadata (already in its stored shape), `path` naming the GraphQL input. */
export function staticMetadataProblems(
  metadata: WorkerMetadata,
  path: string,
  config: Pick<Config, 'input' | 'tags'>,
): InputProblem[] {
  const candidates: Candidate[] = [
    ...listed(metadata.provided_tags, `${path}.providedTags`, 'worker-provided', (t) => t),
    ...listed(metadata.required_tags, `${path}.requiredTags`, 'worker-required', (t) => t),
    ...listed(
      metadata['system:architectures'],
      `${path}.architectures`,
      'worker-provided',
      (a) => `worker:build-arch:${a}`,
    ),
    ...listed(metadata['system:executors'], `${path}.executors`, 'worker-provided', (e) => `worker:executor:${e}`),
    ...listed(metadata['system:tools'], `${path}.tools`, 'worker-provided', (t) => `worker:cap:${t}`),
    ...(metadata['system:tasks'] ?? []).map((t, i) => ({
      tag: `worker:task:${t.type}:${t.name}:version:${t.version}`,
      path: `${path}.tasks[${i}]`,
      set: 'worker-provided' as const,
    })),
    ...valued(metadata['system:cpu_count'], 'worker:cpu-count', `${path}.cpuCount`),
    ...valued(metadata['system:cpu_speed'], 'worker:cpu-speed', `${path}.cpuSpeed`),
    ...valued(metadata['system:cpu_speed_all'], 'worker:cpu-speed-all', `${path}.cpuSpeedAll`),
    ...valued(gib(metadata['system:total_physical_memory']), 'worker:memory-gib', `${path}.totalPhysicalMemory`),
    ...valued(gib(metadata['system:disk_free']), 'worker:disk-gib', `${path}.diskFree`),
  ];
  const computed = computeWorkerTags({
    type: 'worker',
    pool: null,
    staticMetadata: metadata,
    dynamicMetadata: {},
    sizeThresholds: config.tags.sizeThresholds,
  });
  return [
    ...countProblems(metadata.provided_tags, `${path}.providedTags`, config),
    ...countProblems(metadata.required_tags, `${path}.requiredTags`, config),
    ...problemsOf(candidates, computed.rejected),
  ];
}

/** Every problem of a pool's tags and specifications as given (omitted ones are not judged). */
export function poolTagProblems(
  input: {
    name: string;
    providedTags?: readonly string[] | null;
    requiredTags?: readonly string[] | null;
    specifications?: PoolSpecifications | null;
  },
  config: Pick<Config, 'input' | 'tags'>,
): InputProblem[] {
  const specs = input.specifications ?? {};
  const candidates: Candidate[] = [
    ...listed(input.providedTags ?? [], 'input.providedTags', 'worker-provided', (t) => t),
    ...listed(input.requiredTags ?? [], 'input.requiredTags', 'worker-required', (t) => t),
    ...valued(specs.cpuCount, 'worker:cpu-count', 'input.specifications.cpuCount'),
    ...valued(specs.memoryGib, 'worker:memory-gib', 'input.specifications.memoryGib'),
    ...valued(specs.diskGib, 'worker:disk-gib', 'input.specifications.diskGib'),
  ];
  const computed = computePoolTemplateTags(
    poolTagInput({
      name: input.name,
      providedTags: input.providedTags ?? [],
      requiredTags: input.requiredTags ?? [],
      specifications: specs,
    }),
    config.tags.sizeThresholds,
  );
  return [
    ...countProblems(input.providedTags ?? undefined, 'input.providedTags', config),
    ...countProblems(input.requiredTags ?? undefined, 'input.requiredTags', config),
    ...problemsOf(candidates, computed.rejected),
  ];
}

/**
 * Every problem of an image's manifest tags, judged as the tags of a pool naming the image would be
 * (admin provenance, source `image:NAME`): a tag no admin may provide refuses the whole manifest.
 */
export function imageTagProblems(
  name: string,
  tags: readonly string[],
  path: string,
  config: Pick<Config, 'input' | 'tags'>,
): InputProblem[] {
  const computed = computePoolTemplateTags(
    { ...poolTagInput({ name, providedTags: [], requiredTags: [], specifications: {} }), image: { name, tags } },
    config.tags.sizeThresholds,
  );
  const candidates = tags.map((tag, i) => ({ tag, path: `${path}[${i}].tag`, set: 'worker-provided' as const }));
  return [...countProblems(tags, path, config), ...problemsOf(candidates, computed.rejected)];
}
