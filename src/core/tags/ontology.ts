/**
 * The tag ontologies of docs/design.md: tags and provenance as data: which provenances may contribute a
 * tag, decided by the longest matching prefix so that a narrow rule overrides a broad one.
 *
 * Custom tags (anything no entry matches, e.g. `site:gpu` or `worker:bogomips=…`) may come from
 * admins, the system, workspaces and users, but never from a worker: admins write exclusive rules
 * with custom tags (a worker requiring `site:security`, a rule requiring `site:gpu`), and a worker
 * that could invent them could attract work meant for other machines. An admin who wants a worker
 * to provide one puts it in the worker's static metadata or its pool's tags.
 */
import { CPU_SPEED_ALL_TAG, CPU_SPEED_TAG } from './host-speed.js';
import { tagName } from './syntax.js';
import type { Provenance } from './types.js';

/** One ontology: the tags it covers, what they mean and who may contribute them. */
export interface Ontology {
  /** The tag-name prefix it covers; for `exact` and `valued` entries, the whole name. */
  readonly prefix: string;
  readonly description: string;
  /** The provenances that may contribute these tags; an empty list reserves the tag for nobody. */
  readonly allowed: readonly Provenance[] | 'all';
  /** Covers only `NAME=N` and `NAME>=N` with exactly this name; a plain `NAME` is a custom tag. */
  readonly valued?: boolean;
  /** Covers exactly this name and nothing that merely starts with it. */
  readonly exact?: boolean;
}

/** The ontology of every tag that no entry of the table covers. */
export const CUSTOM_ONTOLOGY: Ontology = {
  prefix: '',
  description: 'custom tag of site or workspace admins',
  allowed: ['admin', 'system', 'workspace', 'user'],
};

/** The well-known ontologies; order does not matter, the longest match wins. */
export const ONTOLOGIES: readonly Ontology[] = [
  { prefix: 'worker:build-arch:', description: 'runs that Debian architecture natively', allowed: 'all' },
  { prefix: 'worker:cap:', description: 'has that capability (a tool, a feature, hardware)', allowed: 'all' },
  { prefix: 'worker:class:', description: 'classification chosen by the admins', allowed: ['admin'] },
  { prefix: 'worker:executor:', description: 'that executor backend is available', allowed: 'all' },
  {
    prefix: 'worker:executor:auto',
    exact: true,
    description: '"auto" is not an executor; a task resolves it to a concrete backend (unshare) before scheduling',
    allowed: [],
  },
  { prefix: 'worker:task:', description: 'can run that task at that version', allowed: 'all' },
  { prefix: 'worker:type:', description: 'worker type, from the database field only', allowed: ['system'] },
  { prefix: 'worker:size:', description: 'size class derived from cpu, memory and disk', allowed: 'all' },
  { prefix: 'worker:cpu-count', valued: true, description: 'number of CPUs', allowed: 'all' },
  { prefix: 'worker:memory-gib', valued: true, description: 'memory in GiB', allowed: 'all' },
  { prefix: 'worker:disk-gib', valued: true, description: 'free disk in GiB', allowed: 'all' },
  { prefix: CPU_SPEED_TAG, valued: true, description: 'single-core speed score (the agent benchmark)', allowed: 'all' },
  {
    prefix: CPU_SPEED_ALL_TAG,
    valued: true,
    description: 'all-core speed score (the agent benchmark)',
    allowed: 'all',
  },
  { prefix: 'task:scope:', description: 'the task is in that scope', allowed: ['system'] },
  { prefix: 'task:workspace:', description: 'the task is in that workspace', allowed: ['system'] },
  { prefix: 'task:group:', description: 'the creator is in that group', allowed: ['system'] },
  { prefix: 'task:source-package:', description: 'source package of the task', allowed: ['system'] },
  { prefix: 'task:cross-target:', description: 'a cross build for that architecture', allowed: ['system'] },
];

function splitSuffix(tag: string): { name: string; valued: boolean } {
  const name = tagName(tag);
  return { name, valued: name !== tag };
}

function covers(ontology: Ontology, name: string, valued: boolean): boolean {
  if (ontology.valued === true) return valued && name === ontology.prefix;
  if (ontology.exact === true) return name === ontology.prefix;
  return name.startsWith(ontology.prefix);
}

/** On equal length an exact name is narrower than a prefix of the same text. */
function specificity(ontology: Ontology): number {
  return ontology.prefix.length * 2 + (ontology.valued === true || ontology.exact === true ? 1 : 0);
}

/**
 * Finds the ontology of a tag (a bare name, or a whole tag with `=N` or `>=N`): the most specific
 * entry of the table that covers it, else {@link CUSTOM_ONTOLOGY}.
 */
export function ontologyOf(tagName: string, table: readonly Ontology[] = ONTOLOGIES): Ontology {
  const { name, valued } = splitSuffix(tagName);
  let best: Ontology | undefined;
  for (const ontology of table) {
    if (covers(ontology, name, valued) && (best === undefined || specificity(ontology) > specificity(best))) {
      best = ontology;
    }
  }
  return best ?? CUSTOM_ONTOLOGY;
}

/** Whether an ontology accepts contributions of a provenance. */
export function ontologyAllows(ontology: Ontology, provenance: Provenance): boolean {
  return ontology.allowed === 'all' || ontology.allowed.includes(provenance);
}
