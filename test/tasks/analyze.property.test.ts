import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { analyzeWorkRequest } from '../../src/core/tasks/analyze.js';
import { EXECUTOR_BACKENDS } from '../../src/core/tasks/types.js';
import { request } from './fixtures.js';

const arch = fc.constantFrom('amd64', 'arm64', 'armhf', 'i386', 'ppc64el', 'riscv64', 's390x', 'loong64');
const sbuildInput = fc.record({
  packageName: fc.stringMatching(/^[a-z0-9][a-z0-9+.-]{1,40}$/),
  hostArchitecture: arch,
  backend: fc.option(fc.constantFrom(...EXECUTOR_BACKENDS), { nil: undefined }),
  environment: fc.option(fc.record({ id: fc.integer({ min: 1, max: 1_000_000 }), architecture: arch }), {
    nil: undefined,
  }),
  buildComponents: fc.option(fc.uniqueArray(fc.constantFrom('any', 'all', 'source'), { minLength: 1 }), {
    nil: undefined,
  }),
});

describe('sbuild analysis properties', () => {
  it('is deterministic and requires exactly one build architecture and one executor', () => {
    fc.assert(
      fc.property(sbuildInput, (generated) => {
        const taskData = {
          source_package: generated.packageName,
          host_architecture: generated.hostArchitecture,
          ...(generated.backend === undefined ? {} : { backend: generated.backend }),
          ...(generated.environment === undefined ? {} : { environment_id: generated.environment.id }),
          ...(generated.buildComponents === undefined ? {} : { build_components: generated.buildComponents }),
        };
        const environment =
          generated.environment === undefined
            ? null
            : {
                id: generated.environment.id,
                codename: 'trixie',
                architecture: generated.environment.architecture,
                variant: null,
                backend: null,
              };
        const input = request({ taskName: 'sbuild', taskData, environment });
        const first = analyzeWorkRequest(input);
        expect(analyzeWorkRequest(structuredClone(input))).toEqual(first);
        if (!first.ok) throw new Error(JSON.stringify(first.errors));

        const buildArchs = first.requiredTags.filter((t) => t.startsWith('worker:build-arch:'));
        const executors = first.requiredTags.filter((t) => t.startsWith('worker:executor:'));
        expect(buildArchs).toEqual([
          `worker:build-arch:${generated.environment?.architecture ?? generated.hostArchitecture}`,
        ]);
        expect(executors).toHaveLength(1);
        expect(executors).not.toContain('worker:executor:auto');
        const cross =
          generated.environment !== undefined && generated.environment.architecture !== generated.hostArchitecture;
        expect(first.providedTags.includes(`task:cross-target:${generated.hostArchitecture}`)).toBe(cross);
        expect(first.providedTags).toContain(`task:source-package:${generated.packageName}`);
      }),
      { numRuns: 300 },
    );
  });
});
