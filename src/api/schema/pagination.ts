import { GraphQLError } from 'graphql';
import { PAGE } from '../limits/page.js';
import { LIST_BOUNDS } from '../limits/list-bounds.js';

/** Opaque cursors: base64url of a JSON key, so that the ordering column can change without breaking clients' code. */
export function encodeCursor(key: unknown): string {
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

/** Decodes a cursor made by encodeCursor, refusing one that is not. */
export function decodeCursor<T>(cursor: string | null | undefined, check: (v: unknown) => v is T): T | null {
  if (!cursor) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (check(value)) return value;
  } catch {
    // fall through to the error below
  }
  throw new GraphQLError(`invalid cursor "${cursor}"`, { extensions: { code: 'INVALID_INPUT' } });
}

/** The page size asked for, within limits; backward pagination is not offered. */
export function pageSize(args: { first?: number | null; last?: number | null; before?: string | null }): number {
  if (args.last != null || args.before != null) {
    throw new GraphQLError('only forward pagination (first/after) is supported', {
      extensions: { code: 'INVALID_INPUT' },
    });
  }
  const first = args.first ?? PAGE.default;
  if (first < 0 || first > PAGE.max) {
    throw new GraphQLError(`first must be between 0 and ${PAGE.max}`, { extensions: { code: 'INVALID_INPUT' } });
  }
  return first;
}

/** The `first` of a list paged in LIST_BOUNDS (`Type.field`): its default when omitted, refused past its maximum. */
export function firstOf(key: string, first: number | null | undefined): number {
  const bound = LIST_BOUNDS[key];
  if (bound?.kind !== 'page') throw new Error(`${key} is not a page in LIST_BOUNDS`);
  const n = first ?? bound.default;
  if (n < 0 || n > bound.max)
    throw new GraphQLError(`first must be between 0 and ${bound.max}`, { extensions: { code: 'INVALID_INPUT' } });
  return n;
}

/** The description of the `first` argument of a list paged in LIST_BOUNDS. */
export function firstDescription(key: string, what: string): string {
  const bound = LIST_BOUNDS[key];
  if (bound?.kind !== 'page') throw new Error(`${key} is not a page in LIST_BOUNDS`);
  return `How many ${what}, at most (default ${bound.default}, at most ${bound.max})`;
}

/** Builds a relay connection from one row more than the page size (that extra row says there is a next page). */
export function toConnection<T>(rows: T[], size: number, cursorOf: (row: T) => string, hadCursor: boolean) {
  const page = rows.slice(0, size);
  const edges = page.map((node) => ({ node, cursor: cursorOf(node) }));
  return {
    edges,
    pageInfo: {
      hasNextPage: rows.length > size,
      hasPreviousPage: hadCursor,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}
