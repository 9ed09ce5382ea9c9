/** Which environment a workflow's child runs in: the rule its expansion looks environments up by. */
import type { EnvironmentFacts, WorkflowContext } from './types.js';

/**
 * The lookups of an expansion over the registered environments: for a codename and architecture the
 * newest one (highest id), of the variant asked for or, when none is asked for, of any variant.
 */
export function workflowContext(environments: readonly EnvironmentFacts[]): WorkflowContext {
  const newest = [...environments].sort((a, b) => b.id - a.id);
  const fits = (e: EnvironmentFacts, codename: string, variant: string | null) =>
    e.codename === codename && (variant === null || e.variant === variant);
  return {
    environment: (codename, architecture, variant) =>
      newest.find((e) => fits(e, codename, variant) && e.architecture === architecture) ?? null,
    architectures: (codename, variant) =>
      [...new Set(newest.filter((e) => fits(e, codename, variant)).map((e) => e.architecture))].sort(),
  };
}
