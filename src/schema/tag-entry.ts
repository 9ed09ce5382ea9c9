import { builder } from '../builder.js';
import { PROVENANCES, REFUSAL_CODES, TAG_SET_KINDS, type TagEntry, type TagRefusal } from '../tags/types.js';

/** Provenance as a GraphQL enum (WORKER, ADMIN, …). */
export const ProvenanceEnum = builder.enumType('Provenance', {
  values: Object.fromEntries(PROVENANCES.map((p) => [p.toUpperCase(), { value: p }])) as Record<string, { value: (typeof PROVENANCES)[number] }>,
});

const TagSetEnum = builder.enumType('TagSet', {
  values: Object.fromEntries(TAG_SET_KINDS.map((k) => [k.toUpperCase().replace('-', '_'), { value: k }])) as Record<string, { value: (typeof TAG_SET_KINDS)[number] }>,
});

const RefusalCodeEnum = builder.enumType('TagRefusalCode', { values: Object.values(REFUSAL_CODES) });

/** One tag of a set, with who added it and from where. */
export const TagEntryRef = builder.objectRef<TagEntry>('TagEntry').implement({
  fields: (t) => ({
    tag: t.exposeString('tag'),
    provenance: t.field({ type: ProvenanceEnum, resolve: (e) => e.provenance }),
    source: t.exposeString('source'),
  }),
});

/** A tag that was not added, and the rule that refused it. */
export const TagRefusalRef = builder.objectRef<TagRefusal>('TagRefusal').implement({
  fields: (t) => ({
    tag: t.exposeString('tag'),
    provenance: t.field({ type: ProvenanceEnum, resolve: (e) => e.provenance }),
    source: t.exposeString('source'),
    set: t.field({ type: TagSetEnum, resolve: (e) => e.set }),
    code: t.field({ type: RefusalCodeEnum, resolve: (e) => e.code }),
    reason: t.exposeString('message'),
  }),
});
