import { builder } from '../builder.js';
import { describedValues, upperSnake } from './enum-values.js';
import { PROVENANCES, REFUSAL_CODES, TAG_SET_KINDS, type TagEntry, type TagRefusal } from '../../core/tags/types.js';

/** Provenance as a GraphQL enum (WORKER, ADMIN, …). */
export const ProvenanceEnum = builder.enumType('Provenance', {
  description: 'Who added a tag; it decides which tags may be added at all (docs/design.md: tags and provenance)',
  values: describedValues<(typeof PROVENANCES)[number]>(
    {
      worker: "The worker's agent, from the facts it reports (architectures, cpu count, tools)",
      admin: "An admin: a worker's static metadata, a pool's tags or a site rule",
      system: 'The server itself (e.g. a pool worker’s worker:pool tag, a task’s analysis of its data)',
      user: 'The user who created the work request',
      workspace: 'A rule of the work request’s workspace',
    },
    upperSnake,
  ),
});

const TagSetEnum = builder.enumType('TagSet', {
  description:
    'The four tag sets of the match rule: a worker runs a task when each side provides what the other requires',
  values: describedValues<(typeof TAG_SET_KINDS)[number]>(
    {
      'worker-provided': 'What a worker offers (its architectures, executors, class)',
      'worker-required': 'What a worker asks of the tasks it runs (e.g. only trusted workspaces)',
      'task-provided': 'What a task offers about itself (its workspace, source package, group)',
      'task-required': 'What a task needs of its worker',
    },
    upperSnake,
  ),
});

const RefusalCodeEnum = builder.enumType('TagRefusalCode', {
  description: 'Why a tag was not added to a set',
  values: describedValues<(typeof REFUSAL_CODES)[keyof typeof REFUSAL_CODES]>({
    INVALID_SYNTAX: 'The tag is not written `prefix:name` or `prefix:name=value` with allowed characters',
    PROVENANCE_NOT_ALLOWED_FOR_SET: 'This set takes no tags from this provenance (e.g. a worker adding a required tag)',
    PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY:
      "The tag's prefix does not accept this provenance (e.g. a worker claiming worker:class:trusted)",
    PREFIX_NOT_GRANTED_BY_WORKSPACE: 'A user provided a tag under a prefix the workspace does not grant its members',
    VALUE_OVERRIDDEN: 'A more trusted entry already gives this valued tag its value',
  }),
});

/** One tag of a set, with who added it and from where. */
export const TagEntryRef = builder.objectRef<TagEntry>('TagEntry').implement({
  description: 'One tag of a set, with who added it and from where',
  fields: (t) => ({
    tag: t.exposeString('tag', { description: 'The tag, e.g. worker:host-architecture:arm64 or worker:cpu-count=8' }),
    provenance: t.field({ type: ProvenanceEnum, description: 'Who added it', resolve: (e) => e.provenance }),
    source: t.exposeString('source', {
      description: 'Where it came from, e.g. dynamic-metadata, pool:arm-builders, rule:big-packages',
    }),
  }),
});

/** A tag that was not added, and the rule that refused it. */
export const TagRefusalRef = builder.objectRef<TagRefusal>('TagRefusal').implement({
  description:
    'A tag that was offered but not added, and the rule that refused it (refusals are recorded, never fatal)',
  fields: (t) => ({
    tag: t.exposeString('tag', { description: 'The tag as it was offered' }),
    provenance: t.field({ type: ProvenanceEnum, description: 'Who offered it', resolve: (e) => e.provenance }),
    source: t.exposeString('source', { description: 'Where it came from, e.g. dynamic-metadata' }),
    set: t.field({ type: TagSetEnum, description: 'The set it was offered to', resolve: (e) => e.set }),
    code: t.field({
      type: RefusalCodeEnum,
      description: 'Why it was refused, as a stable code',
      resolve: (e) => e.code,
    }),
    reason: t.exposeString('message', { description: 'Why it was refused, in words' }),
  }),
});
