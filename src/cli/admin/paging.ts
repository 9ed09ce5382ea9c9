/**
 * Lists longer than a page: cursor connections are read page after page until `limit` rows are
 * kept or there are no more. `keep` filters on the client what the API cannot filter on (a worker's
 * status), so a filtered list may read more pages than it shows.
 */

/** A relay connection as the API answers it. */
export interface Connection<N> {
  edges: { cursor: string; node: N }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

/** Pages of at most this many rows: a list costs its page size in the server's cost limit. */
export const PAGE_SIZE = 100;

/** Reads pages until `limit` rows are kept; the answer has the shape of one connection holding them all. */
export async function readPages<N>(
  fetchPage: (first: number, after: string | null) => Promise<Connection<N>>,
  options: { limit: number; after?: string | null; keep?: (node: N) => boolean },
): Promise<Connection<N>> {
  const edges: Connection<N>['edges'] = [];
  let after = options.after ?? null;
  let pageInfo: Connection<N>['pageInfo'] = { hasNextPage: false, endCursor: after };
  while (edges.length < options.limit) {
    const first = options.keep ? PAGE_SIZE : Math.min(PAGE_SIZE, options.limit - edges.length);
    const page = await fetchPage(first, after);
    for (const edge of page.edges) {
      if (edges.length >= options.limit) {
        // Cut inside this page: the next page starts after the last row kept.
        pageInfo = { hasNextPage: true, endCursor: edges[edges.length - 1]?.cursor ?? after };
        return { edges, pageInfo };
      }
      if (!options.keep || options.keep(edge.node)) edges.push(edge);
    }
    pageInfo = page.pageInfo;
    if (!page.pageInfo.hasNextPage || !page.pageInfo.endCursor) break;
    after = page.pageInfo.endCursor;
  }
  return { edges, pageInfo };
}
