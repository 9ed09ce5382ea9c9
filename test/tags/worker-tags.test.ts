import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { matchTags } from '../../src/core/tags/match.js';
import { checkContribution } from '../../src/core/tags/provenance.js';
import { BYTES_PER_GIB, DEFAULT_SIZE_THRESHOLDS, sizeClass } from '../../src/core/tags/size-class.js';
import type { SizeThresholds } from '../../src/core/tags/size-class.js';
import { parseTag } from '../../src/core/tags/syntax.js';
import { REFUSAL_CODES } from '../../src/core/tags/types.js';
import type { TagEntry, TagRefusal } from '../../src/core/tags/types.js';
import { computePoolTemplateTags, computeWorkerTags } from '../../src/core/tags/worker-tags.js';
import type { PoolTagInput, WorkerMetadata, WorkerTagInput } from '../../src/core/tags/worker-tags.js';
import { WORKER_TASK_CATALOG } from '../../src/core/tasks/registry.js';

const GIB = BYTES_PER_GIB;

function input(overrides: Partial<WorkerTagInput> = {}): WorkerTagInput {
  return {
    type: 'worker',
    pool: null,
    staticMetadata: {},
    dynamicMetadata: {},
    sizeThresholds: DEFAULT_SIZE_THRESHOLDS,
    ...overrides,
  };
}

function pool(overrides: Partial<PoolTagInput> = {}): PoolTagInput {
  return {
    name: 'cloud',
    providedTags: [],
    requiredTags: [],
    specifications: {},
    image: null,
    taskCatalog: WORKER_TASK_CATALOG,
    ...overrides,
  };
}

const entry = (tag: string, provenance: TagEntry['provenance'], source: string): TagEntry => ({
  tag,
  provenance,
  source,
});

const reportedFacts: WorkerMetadata = {
  'system:architectures': ['amd64', 'i386'],
  'system:cpu_count': 8,
  'system:total_physical_memory': 16 * GIB + 123,
  'system:disk_free': 100 * GIB - 1,
  'system:executors': ['unshare', 'incus-lxc'],
  'system:tools': ['sbuild', 'autopkgtest'],
  'system:tasks': [{ type: 'worker', name: 'sbuild', version: 2 }],
};

describe('sizeClass', () => {
  const t = DEFAULT_SIZE_THRESHOLDS;
  it('has the documented defaults', () => {
    expect(t).toEqual({
      medium: { cpuCount: 4, memoryGib: 8, diskGib: 50 },
      big: { cpuCount: 16, memoryGib: 32, diskGib: 200 },
    });
  });

  it.each<[string, { cpuCount?: number; memoryGib?: number; diskGib?: number }, string | null]>([
    ['all below medium', { cpuCount: 1, memoryGib: 1, diskGib: 1 }, 'small'],
    ['zero everything', { cpuCount: 0, memoryGib: 0, diskGib: 0 }, 'small'],
    ['exactly medium', { cpuCount: 4, memoryGib: 8, diskGib: 50 }, 'medium'],
    ['one cpu short of medium', { cpuCount: 3, memoryGib: 8, diskGib: 50 }, 'small'],
    ['a bit of memory short of medium', { cpuCount: 4, memoryGib: 7.9, diskGib: 50 }, 'small'],
    ['one GiB of disk short of medium', { cpuCount: 4, memoryGib: 8, diskGib: 49 }, 'small'],
    ['exactly big', { cpuCount: 16, memoryGib: 32, diskGib: 200 }, 'big'],
    ['big but for the disk', { cpuCount: 64, memoryGib: 256, diskGib: 199 }, 'medium'],
    ['big but for the cpu', { cpuCount: 15, memoryGib: 32, diskGib: 200 }, 'medium'],
    ['huge cpu, small memory', { cpuCount: 128, memoryGib: 4, diskGib: 1000 }, 'small'],
    ['cpu unknown', { memoryGib: 32, diskGib: 200 }, null],
    ['memory unknown', { cpuCount: 16, diskGib: 200 }, null],
    ['disk unknown', { cpuCount: 16, memoryGib: 32 }, null],
    ['not a number', { cpuCount: Number.NaN, memoryGib: 32, diskGib: 200 }, null],
  ])('%s → %s', (_label, facts, expected) => {
    expect(sizeClass(facts, t)).toBe(expected);
  });

  it('uses the thresholds it is given', () => {
    const tiny: SizeThresholds = {
      medium: { cpuCount: 1, memoryGib: 1, diskGib: 1 },
      big: { cpuCount: 2, memoryGib: 2, diskGib: 2 },
    };
    expect(sizeClass({ cpuCount: 2, memoryGib: 2, diskGib: 2 }, tiny)).toBe('big');
  });
});

describe('computeWorkerTags', () => {
  it.each<[WorkerTagInput['type']]>([['worker'], ['server'], ['signing'], ['not-assignable']])(
    'gives a bare %s worker its type, from the system',
    (type) => {
      const result = computeWorkerTags(input({ type }));
      expect(result.provided).toEqual([entry(`worker:type:${type}`, 'system', 'worker.type')]);
      expect(result.providedTags).toEqual([`worker:type:${type}`]);
      expect(result.required).toEqual([]);
      expect(result.rejected).toEqual([]);
    },
  );

  it('derives tags from reported facts with the worker provenance', () => {
    const result = computeWorkerTags(input({ dynamicMetadata: reportedFacts }));
    expect(result.providedTags).toEqual([
      'worker:build-arch:amd64',
      'worker:build-arch:i386',
      'worker:cap:autopkgtest',
      'worker:cap:sbuild',
      'worker:cpu-count=8',
      'worker:disk-gib=99',
      'worker:executor:incus-lxc',
      'worker:executor:unshare',
      'worker:memory-gib=16',
      'worker:size:medium',
      'worker:task:worker:sbuild:version:2',
      'worker:type:worker',
    ]);
    for (const e of result.provided) {
      if (e.tag !== 'worker:type:worker') expect(e).toMatchObject({ provenance: 'worker', source: 'dynamic-metadata' });
    }
    expect(result.rejected).toEqual([]);
  });

  it('derives the same tags from static facts with the admin provenance', () => {
    const result = computeWorkerTags(input({ staticMetadata: reportedFacts }));
    expect(result.provided.filter((e) => e.tag !== 'worker:type:worker').every((e) => e.provenance === 'admin')).toBe(
      true,
    );
    expect(result.provided).toContainEqual(entry('worker:size:medium', 'admin', 'static-metadata'));
  });

  it('prefers static metadata to dynamic metadata key by key', () => {
    const result = computeWorkerTags(
      input({
        staticMetadata: { 'system:architectures': ['arm64'], 'system:cpu_count': 32 },
        dynamicMetadata: reportedFacts,
      }),
    );
    expect(result.providedTags.filter((t) => t.startsWith('worker:build-arch:'))).toEqual(['worker:build-arch:arm64']);
    expect(result.provided).toContainEqual(entry('worker:build-arch:arm64', 'admin', 'static-metadata'));
    expect(result.provided).toContainEqual(entry('worker:cpu-count=32', 'admin', 'static-metadata'));
    expect(result.provided).toContainEqual(entry('worker:memory-gib=16', 'worker', 'dynamic-metadata'));
    expect(result.providedTags).not.toContain('worker:cpu-count=8');
    // The static fact replaces the dynamic one; it does not override it, so nothing is rejected.
    expect(result.rejected).toEqual([]);
  });

  it('treats a null static fact as absent', () => {
    const result = computeWorkerTags(
      input({
        staticMetadata: { 'system:cpu_count': null } as unknown as WorkerMetadata,
        dynamicMetadata: { 'system:cpu_count': 2 },
      }),
    );
    expect(result.providedTags).toContain('worker:cpu-count=2');
  });

  it.each<[string, WorkerMetadata, WorkerMetadata, TagEntry | null]>([
    ['all facts static', reportedFacts, {}, entry('worker:size:medium', 'admin', 'static-metadata')],
    [
      'one fact dynamic',
      { 'system:cpu_count': 16, 'system:total_physical_memory': 64 * GIB },
      { 'system:disk_free': 500 * GIB },
      entry('worker:size:big', 'worker', 'dynamic-metadata'),
    ],
    ['a fact missing', { 'system:cpu_count': 16, 'system:total_physical_memory': 64 * GIB }, {}, null],
    [
      'exactly at the big floor in bytes',
      {},
      { 'system:cpu_count': 16, 'system:total_physical_memory': 32 * GIB, 'system:disk_free': 200 * GIB },
      entry('worker:size:big', 'worker', 'dynamic-metadata'),
    ],
    [
      'one byte under the big memory floor',
      {},
      { 'system:cpu_count': 16, 'system:total_physical_memory': 32 * GIB - 1, 'system:disk_free': 200 * GIB },
      entry('worker:size:medium', 'worker', 'dynamic-metadata'),
    ],
  ])('size class with %s', (_label, staticMetadata, dynamicMetadata, expected) => {
    const result = computeWorkerTags(input({ staticMetadata, dynamicMetadata }));
    const sizes = result.provided.filter((e) => e.tag.startsWith('worker:size:'));
    expect(sizes).toEqual(expected === null ? [] : [expected]);
  });

  it('keeps explicit provided tags of both metadata, each with its own provenance', () => {
    const result = computeWorkerTags(
      input({
        staticMetadata: { provided_tags: ['worker:class:trusted', 'site:gpu', 'worker:cap:kvm'] },
        dynamicMetadata: { provided_tags: ['worker:cap:kvm', 'worker:cap:gpu'] },
      }),
    );
    expect(result.provided).toEqual([
      entry('worker:type:worker', 'system', 'worker.type'),
      entry('worker:class:trusted', 'admin', 'static-metadata'),
      entry('site:gpu', 'admin', 'static-metadata'),
      entry('worker:cap:kvm', 'admin', 'static-metadata'),
      entry('worker:cap:kvm', 'worker', 'dynamic-metadata'),
      entry('worker:cap:gpu', 'worker', 'dynamic-metadata'),
    ]);
  });

  it('takes required tags from static metadata and the pool only', () => {
    const result = computeWorkerTags(
      input({
        pool: pool({ requiredTags: ['site:cloud'] }),
        staticMetadata: { required_tags: ['task:workspace:debian:security'] },
        dynamicMetadata: { required_tags: ['task:workspace:evil:x', 'site:mine'] },
      }),
    );
    expect(result.required).toEqual([
      entry('task:workspace:debian:security', 'admin', 'static-metadata'),
      entry('site:cloud', 'admin', 'pool:cloud'),
    ]);
    expect(result.requiredTags).toEqual(['site:cloud', 'task:workspace:debian:security']);
    expect(result.rejected).toEqual([
      expect.objectContaining({
        tag: 'task:workspace:evil:x',
        set: 'worker-required',
        code: REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_SET,
      }),
      expect.objectContaining({
        tag: 'site:mine',
        set: 'worker-required',
        code: REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_SET,
      }),
    ]);
  });

  it.each<[string, WorkerMetadata, string, string]>([
    [
      'an admin class',
      { provided_tags: ['worker:class:trusted'] },
      'worker:class:trusted',
      REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
    ],
    [
      'another type',
      { provided_tags: ['worker:type:server'] },
      'worker:type:server',
      REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
    ],
    ['a custom tag', { provided_tags: ['site:x'] }, 'site:x', REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY],
    [
      'a custom valued tag',
      { provided_tags: ['worker:bogomips=9000'] },
      'worker:bogomips=9000',
      REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
    ],
    [
      'the auto executor as a tag',
      { provided_tags: ['worker:executor:auto'] },
      'worker:executor:auto',
      REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
    ],
    [
      'the auto executor as a fact',
      { 'system:executors': ['auto'] },
      'worker:executor:auto',
      REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
    ],
    [
      'a workspace claim',
      { provided_tags: ['task:workspace:debian:security'] },
      'task:workspace:debian:security',
      REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
    ],
    ['bad syntax', { provided_tags: ['worker:cap:two words'] }, 'worker:cap:two words', REFUSAL_CODES.INVALID_SYNTAX],
    [
      'a minimum as a provided tag',
      { provided_tags: ['worker:memory-gib>=4'] },
      'worker:memory-gib>=4',
      REFUSAL_CODES.INVALID_SYNTAX,
    ],
    [
      'a bad architecture',
      { 'system:architectures': ['amd64 i386'] },
      'worker:build-arch:amd64 i386',
      REFUSAL_CODES.INVALID_SYNTAX,
    ],
    ['a negative cpu count', { 'system:cpu_count': -1 }, 'worker:cpu-count=-1', REFUSAL_CODES.INVALID_SYNTAX],
    [
      'an infinite disk',
      { 'system:disk_free': Number.POSITIVE_INFINITY },
      'worker:disk-gib=Infinity',
      REFUSAL_CODES.INVALID_SYNTAX,
    ],
  ])('drops and records %s reported by the worker', (_label, dynamicMetadata, tag, code) => {
    const result = computeWorkerTags(input({ dynamicMetadata }));
    expect(result.providedTags).toEqual(['worker:type:worker']);
    expect(result.rejected).toEqual([
      expect.objectContaining({ tag, provenance: 'worker', source: 'dynamic-metadata', set: 'worker-provided', code }),
    ]);
    expect(result.rejected[0].message).toContain(tag.slice(0, 10));
  });

  it('lets an admin give a class and custom tags, but not a type', () => {
    const result = computeWorkerTags(
      input({ staticMetadata: { provided_tags: ['worker:class:trusted', 'site:x', 'worker:type:signing'] } }),
    );
    expect(result.providedTags).toEqual(['site:x', 'worker:class:trusted', 'worker:type:worker']);
    expect(result.rejected.map((r) => [r.tag, r.provenance])).toEqual([['worker:type:signing', 'admin']]);
  });

  it.each<[string, unknown, string, string[]]>([
    [
      'a string instead of a list',
      { 'system:architectures': 'amd64' },
      '"system:architectures" must be a list of strings, got a string',
      [],
    ],
    [
      'an object instead of a list',
      { provided_tags: { a: 1 } },
      '"provided_tags" must be a list of strings, got an object',
      [],
    ],
    [
      'non-strings in a list',
      { 'system:tools': ['sbuild', 3, null, ['x'], 'kvm'] },
      '"system:tools"[1] must be a string, got a number',
      ['worker:cap:kvm', 'worker:cap:sbuild'],
    ],
    ['a string cpu count', { 'system:cpu_count': '8' }, '"system:cpu_count" must be a number, got a string', []],
    [
      'a boolean memory',
      { 'system:total_physical_memory': true },
      '"system:total_physical_memory" must be a number, got a boolean',
      [],
    ],
    ['a task that is not an object', { 'system:tasks': [7] }, '"system:tasks"[0] must be {type, name, version}', []],
    [
      'a task without a version',
      { 'system:tasks': [{ type: 'worker', name: 'sbuild' }] },
      '"system:tasks"[0] must be',
      [],
    ],
    [
      'a task with a fractional version',
      { 'system:tasks': [{ type: 'worker', name: 'sbuild', version: 1.5 }] },
      '"system:tasks"[0] must be',
      [],
    ],
    ['tasks that are not a list', { 'system:tasks': 'sbuild' }, '"system:tasks" must be a list', []],
    ['required tags that are not a list', { required_tags: 'x' }, '"required_tags" must be a list of strings', []],
    ['metadata that is not an object', ['amd64'], 'as a whole must be an object, got a list', []],
    ['metadata that is a number', 42, 'as a whole must be an object, got a number', []],
  ])('skips and records garbage: %s', (_label, dynamicMetadata, phrase, kept) => {
    const result = computeWorkerTags(input({ dynamicMetadata: dynamicMetadata as WorkerMetadata }));
    expect(result.providedTags).toEqual([...kept, 'worker:type:worker'].sort());
    expect(result.rejected.length).toBeGreaterThan(0);
    expect(result.rejected[0]).toMatchObject({
      provenance: 'worker',
      source: 'dynamic-metadata',
      code: REFUSAL_CODES.INVALID_SYNTAX,
    });
    expect(result.rejected[0].message).toContain(`dynamic metadata ${phrase}`);
  });

  it('treats null metadata as empty, without a refusal', () => {
    const result = computeWorkerTags(
      input({ staticMetadata: null as unknown as WorkerMetadata, dynamicMetadata: null as unknown as WorkerMetadata }),
    );
    expect(result.providedTags).toEqual(['worker:type:worker']);
    expect(result.rejected).toEqual([]);
  });

  it('records an unknown worker type instead of tagging it', () => {
    const result = computeWorkerTags(input({ type: 'bogus' as WorkerTagInput['type'] }));
    expect(result.providedTags).toEqual([]);
    expect(result.rejected[0]).toMatchObject({
      tag: 'bogus',
      provenance: 'system',
      code: REFUSAL_CODES.INVALID_SYNTAX,
    });
  });

  it('adds the pool tags and specifications as admin', () => {
    const result = computeWorkerTags(
      input({
        pool: pool({
          providedTags: ['worker:class:cloud', 'worker:build-arch:amd64'],
          requiredTags: ['site:cloud'],
          specifications: { cpuCount: 4, memoryGib: 16, diskGib: 100, image: 'debian-12' },
        }),
      }),
    );
    expect(result.provided).toEqual([
      entry('worker:type:worker', 'system', 'worker.type'),
      entry('worker:class:cloud', 'admin', 'pool:cloud'),
      entry('worker:build-arch:amd64', 'admin', 'pool:cloud'),
      entry('worker:cpu-count=4', 'admin', 'pool:cloud:specifications'),
      entry('worker:memory-gib=16', 'admin', 'pool:cloud:specifications'),
      entry('worker:disk-gib=100', 'admin', 'pool:cloud:specifications'),
      entry('worker:size:medium', 'admin', 'pool:cloud:specifications'),
    ]);
    expect(result.required).toEqual([entry('site:cloud', 'admin', 'pool:cloud')]);
  });

  it("adds what the pool's image holds as admin, to its workers and its template alike", () => {
    const specifications = {
      architectures: ['arm64'],
      enableBackends: ['unshare'],
      enableTasks: ['autopkgtest'],
      handlers: [{ task: 'lintian', command: 'run-lintian' }],
    };
    const expected = [
      entry('worker:build-arch:arm64', 'admin', 'pool:cloud:specifications'),
      entry('worker:executor:unshare', 'admin', 'pool:cloud:specifications'),
      entry('worker:cap:autopkgtest', 'admin', 'pool:cloud:specifications'),
      entry('worker:task:worker:autopkgtest:version:1', 'admin', 'pool:cloud:specifications'),
      entry('worker:task:worker:lintian:version:1', 'admin', 'pool:cloud:specifications'),
    ];
    expect(computeWorkerTags(input({ pool: pool({ specifications }) })).provided).toEqual([
      entry('worker:type:worker', 'system', 'worker.type'),
      ...expected,
    ]);
    expect(computePoolTemplateTags(pool({ specifications })).provided).toEqual([
      entry('worker:type:worker', 'system', 'pool-template'),
      ...expected,
    ]);
  });

  it('records image specifications of the wrong shape and skips them, never throwing', () => {
    const result = computePoolTemplateTags(
      pool({
        specifications: { architectures: 'amd64', enableTasks: ['sbuild', 7], handlers: [{ command: 'x' }] } as never,
      }),
    );
    expect(result.providedTags).toEqual([
      'worker:cap:sbuild',
      'worker:task:worker:sbuild:version:1',
      'worker:type:worker',
    ]);
    expect(result.rejected.map((r) => r.message)).toEqual([
      'pool "cloud" "specifications.architectures" must be a list of strings, got a string; it was skipped',
      'pool "cloud" "specifications.enableTasks"[1] must be a string, got a number; it was skipped',
      'pool "cloud" "specifications.handlers"[0] must be {task, command}, got an object; it was skipped',
    ]);
  });

  it('lets pool specifications override what the worker reports, and sizes from the kept values', () => {
    const result = computeWorkerTags(
      input({
        pool: pool({ specifications: { cpuCount: 16, memoryGib: 32, diskGib: 200 } }),
        dynamicMetadata: {
          'system:cpu_count': 16,
          'system:total_physical_memory': 31.4 * GIB,
          'system:disk_free': 180 * GIB,
        },
      }),
    );
    expect(result.providedTags).toEqual([
      'worker:cpu-count=16',
      'worker:disk-gib=200',
      'worker:memory-gib=32',
      'worker:size:big',
      'worker:type:worker',
    ]);
    expect(result.provided).toContainEqual(entry('worker:cpu-count=16', 'worker', 'dynamic-metadata'));
    expect(result.provided).toContainEqual(entry('worker:size:big', 'admin', 'pool:cloud:specifications'));
    expect(result.rejected.map((r) => [r.tag, r.code])).toEqual([
      ['worker:memory-gib=31', REFUSAL_CODES.VALUE_OVERRIDDEN],
      ['worker:disk-gib=180', REFUSAL_CODES.VALUE_OVERRIDDEN],
    ]);
  });

  it('lets static metadata win over the pool on a valued tag (same trust, added first)', () => {
    const result = computeWorkerTags(
      input({ pool: pool({ specifications: { cpuCount: 4 } }), staticMetadata: { 'system:cpu_count': 8 } }),
    );
    expect(result.providedTags).toContain('worker:cpu-count=8');
    expect(result.rejected).toEqual([
      expect.objectContaining({ tag: 'worker:cpu-count=4', source: 'pool:cloud:specifications' }),
    ]);
  });

  it('records garbage in the pool specifications', () => {
    const result = computeWorkerTags(
      input({
        pool: pool({
          specifications: { cpuCount: 'four', memoryGib: -1 } as unknown as PoolTagInput['specifications'],
        }),
      }),
    );
    expect(result.rejected.map((r) => [r.tag, r.source])).toEqual([
      ['four', 'pool:cloud:specifications'],
      ['worker:memory-gib=-1', 'pool:cloud:specifications'],
    ]);
    expect(result.rejected[0].message).toBe(
      'pool "cloud" specification "cpuCount" must be a number, got a string; it was skipped',
    );
  });

  const garbage = fc.anything({ maxDepth: 3, withNullPrototype: true, withBigInt: true, withMap: true, withSet: true });
  const metadata = fc.oneof(
    garbage,
    fc.dictionary(
      fc.constantFrom(
        'system:architectures',
        'system:cpu_count',
        'system:total_physical_memory',
        'system:disk_free',
        'system:executors',
        'system:tools',
        'system:tasks',
        'provided_tags',
        'required_tags',
      ),
      fc.oneof(
        garbage,
        fc.array(fc.oneof(fc.string(), garbage)),
        fc.double(),
        fc.array(fc.record({ type: fc.string(), name: fc.string(), version: fc.integer() })),
      ),
    ),
  );

  it('never throws on garbage metadata, and keeps only entries the rules allow', () => {
    fc.assert(
      fc.property(metadata, metadata, (staticMetadata, dynamicMetadata) => {
        const result = computeWorkerTags(
          input({
            staticMetadata: staticMetadata as WorkerMetadata,
            dynamicMetadata: dynamicMetadata as WorkerMetadata,
          }),
        );
        const allowed =
          (set: 'worker-provided' | 'worker-required', side: 'provided' | 'required') => (e: TagEntry) => {
            const parsed = parseTag(e.tag, side);
            return parsed.ok && checkContribution(set, parsed.tag, e.provenance) === null;
          };
        expect(result.provided.every(allowed('worker-provided', 'provided'))).toBe(true);
        expect(result.required.every(allowed('worker-required', 'required'))).toBe(true);
        expect(result.required.every((e) => e.provenance === 'admin')).toBe(true);
        expect(result.providedTags).toContain('worker:type:worker');
        expect(result.rejected.every((r: TagRefusal) => typeof r.message === 'string' && r.message.length > 0)).toBe(
          true,
        );
      }),
      { numRuns: 200 },
    );
  });
});

describe('computePoolTemplateTags', () => {
  it('gives the tags any worker of the pool will have', () => {
    const result = computePoolTemplateTags(
      pool({
        providedTags: ['worker:build-arch:amd64', 'worker:cap:sbuild', 'worker:executor:unshare', 'worker:class:cloud'],
        requiredTags: ['task:scope:debian'],
        specifications: { cpuCount: 16, memoryGib: 64, diskGib: 200 },
      }),
    );
    expect(result.provided).toEqual([
      entry('worker:type:worker', 'system', 'pool-template'),
      entry('worker:build-arch:amd64', 'admin', 'pool:cloud'),
      entry('worker:cap:sbuild', 'admin', 'pool:cloud'),
      entry('worker:executor:unshare', 'admin', 'pool:cloud'),
      entry('worker:class:cloud', 'admin', 'pool:cloud'),
      entry('worker:cpu-count=16', 'admin', 'pool:cloud:specifications'),
      entry('worker:memory-gib=64', 'admin', 'pool:cloud:specifications'),
      entry('worker:disk-gib=200', 'admin', 'pool:cloud:specifications'),
      entry('worker:size:big', 'admin', 'pool:cloud:specifications'),
    ]);
    expect(result.requiredTags).toEqual(['task:scope:debian']);
    expect(result.rejected).toEqual([]);
  });

  it.each<[string, PoolTagInput['specifications'], string | null]>([
    ['no specifications', {}, null],
    ['partial specifications', { cpuCount: 64, memoryGib: 256 }, null],
    ['small', { cpuCount: 2, memoryGib: 4, diskGib: 20 }, 'worker:size:small'],
    ['medium at the floor', { cpuCount: 4, memoryGib: 8, diskGib: 50 }, 'worker:size:medium'],
    ['fractional memory', { cpuCount: 16, memoryGib: 31.5, diskGib: 200 }, 'worker:size:medium'],
  ])('sizes a pool with %s', (_label, specifications, size) => {
    const result = computePoolTemplateTags(pool({ specifications }));
    expect(result.providedTags.filter((t) => t.startsWith('worker:size:'))).toEqual(size === null ? [] : [size]);
  });

  it('uses the thresholds it is given', () => {
    const tiny: SizeThresholds = {
      medium: { cpuCount: 1, memoryGib: 1, diskGib: 1 },
      big: { cpuCount: 2, memoryGib: 2, diskGib: 2 },
    };
    const result = computePoolTemplateTags(pool({ specifications: { cpuCount: 2, memoryGib: 2, diskGib: 2 } }), tiny);
    expect(result.providedTags).toContain('worker:size:big');
  });

  it('refuses pool tags that no admin may provide', () => {
    const result = computePoolTemplateTags(
      pool({ providedTags: ['worker:type:server', 'worker:executor:auto', 'bad tag'] }),
    );
    expect(result.providedTags).toEqual(['worker:type:worker']);
    expect(result.rejected.map((r) => [r.tag, r.provenance, r.source, r.code])).toEqual([
      ['worker:type:server', 'admin', 'pool:cloud', REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY],
      ['worker:executor:auto', 'admin', 'pool:cloud', REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY],
      ['bad tag', 'admin', 'pool:cloud', REFUSAL_CODES.INVALID_SYNTAX],
    ]);
  });

  it('takes what its machines hold from its image, not from its specifications, with the image as source', () => {
    const tags = [
      'worker:build-arch:amd64',
      'worker:executor:unshare',
      'worker:cap:sbuild',
      'worker:task:worker:sbuild:version:1',
    ];
    const result = computePoolTemplateTags(
      pool({
        specifications: {
          image: 'trixie-sbuild',
          enableTasks: ['autopkgtest'],
          handlers: [{ task: 'noop', command: 'true' }],
        },
        image: { name: 'trixie-sbuild', tags },
      }),
    );
    expect(result.provided).toEqual([
      entry('worker:type:worker', 'system', 'pool-template'),
      ...tags.map((t) => entry(t, 'admin', 'image:trixie-sbuild')),
      entry('worker:task:worker:noop:version:1', 'admin', 'pool:cloud:specifications'),
    ]);
    expect(result.providedTags).not.toContain('worker:cap:autopkgtest');
    expect(result.rejected).toEqual([]);
  });

  it('records the tags of an image that no admin may provide, naming the image', () => {
    const result = computePoolTemplateTags(
      pool({
        specifications: { image: 'odd' },
        image: { name: 'odd', tags: ['worker:type:server', 'worker:cap:sbuild'] },
      }),
    );
    expect(result.providedTags).toEqual(['worker:cap:sbuild', 'worker:type:worker']);
    expect(result.rejected.map((r) => [r.tag, r.source])).toEqual([['worker:type:server', 'image:odd']]);
  });

  it('matches the work it can serve from zero instances', () => {
    const template = computePoolTemplateTags(
      pool({
        providedTags: ['worker:build-arch:amd64', 'worker:cap:sbuild'],
        specifications: { cpuCount: 4, memoryGib: 16, diskGib: 100 },
      }),
    );
    const worker = { provided: template.providedTags, required: template.requiredTags };
    const task = (required: string[]) => ({ provided: ['task:scope:debian'], required });
    expect(matchTags(task(['worker:type:worker', 'worker:cap:sbuild', 'worker:memory-gib>=16']), worker).ok).toBe(true);
    expect(matchTags(task(['worker:type:worker', 'worker:memory-gib>=32']), worker).missingOnWorker).toEqual([
      'worker:memory-gib>=32',
    ]);
    expect(matchTags(task(['worker:type:signing']), worker).missingOnWorker).toEqual(['worker:type:signing']);
  });
});
