/**
 * One GraphQL operation POSTed over HTTP, as the agent and tagsched-admin send it: the document and
 * its variables as JSON, a bearer token when there is one, and a time limit. The answer is its status
 * and its body parsed as JSON (null when it is not JSON); judging it is the caller's. fetch's own
 * rejections (refused, reset, DNS, the timeout) are thrown as they are, for the caller to word.
 */
export async function postGraphql(options: {
  readonly url: string;
  readonly token: string | null;
  readonly query: string;
  readonly variables: unknown;
  readonly timeoutMs: number;
  readonly fetch?: typeof fetch;
}): Promise<{ status: number; body: unknown }> {
  const response = await (options.fetch ?? fetch)(options.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    },
    body: JSON.stringify({ query: options.query, variables: options.variables }),
    signal: AbortSignal.timeout(options.timeoutMs),
  });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: response.status, body };
}
