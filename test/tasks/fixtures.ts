/** Shared inputs for the task tests: one plain work request and two environments. */
import type { WorkRequestAnalysisInput } from '../../src/core/tasks/analyze.js';
import type { EnvironmentFacts } from '../../src/core/tasks/types.js';

/** An amd64 environment (id 8). */
export const AMD64_ENV: EnvironmentFacts = {
  id: 8,
  codename: 'bookworm',
  architecture: 'amd64',
  variant: 'sbuild',
  backend: 'unshare',
};
/** An arm64 environment (id 7). */
export const ARM64_ENV: EnvironmentFacts = {
  id: 7,
  codename: 'trixie',
  architecture: 'arm64',
  variant: null,
  backend: 'incus-lxc',
};

/** A valid noop request in debian/developers with nothing extra; tests override what they exercise. */
export function request(overrides: Partial<WorkRequestAnalysisInput> = {}): WorkRequestAnalysisInput {
  return {
    scope: 'debian',
    workspace: 'developers',
    creatorGroups: [],
    taskType: 'worker',
    taskName: 'noop',
    taskData: {},
    environment: null,
    defaultArchitecture: 'amd64',
    userProvidedTags: [],
    userRequiredTags: [],
    userProvidablePrefixes: [],
    workspaceRules: [],
    siteRules: [],
    ...overrides,
  };
}

/** An sbuild request for hello on amd64, the most common work request. */
export function sbuildRequest(overrides: Partial<WorkRequestAnalysisInput> = {}): WorkRequestAnalysisInput {
  return request({
    taskName: 'sbuild',
    taskData: { source_package: 'hello', host_architecture: 'amd64' },
    ...overrides,
  });
}

/** Entries as comparable triples, since the order of entries is part of the contract. */
export function triples(entries: readonly { tag: string; provenance: string; source: string }[]): string[][] {
  return entries.map((e) => [e.tag, e.provenance, e.source]);
}
