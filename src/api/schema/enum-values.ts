/**
 * GraphQL enum values with a description each, from a map keyed by the internal value: a value the
 * code adds without a description does not compile. `nameOf` gives the GraphQL name (default: the
 * value itself).
 */
export function describedValues<V extends string>(
  descriptions: Record<V, string>,
  nameOf: (value: V) => string = (v) => v,
): Record<string, { value: V; description: string }> {
  return Object.fromEntries(
    (Object.entries(descriptions) as [V, string][]).map(([value, description]) => [
      nameOf(value),
      { value, description },
    ]),
  );
}

/** The GraphQL name of a lower-case, dashed value: `worker-provided` → `WORKER_PROVIDED`. */
export const upperSnake = (value: string): string => value.toUpperCase().replaceAll('-', '_');
