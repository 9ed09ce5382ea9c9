/**
 * Watching for the provider's notice that it takes this machine away. EC2 announces a spot
 * interruption two minutes ahead in the instance metadata: with IMDSv2 a session token is asked for
 * with PUT /latest/api/token, then GET /latest/meta-data/spot/instance-action answers 404 while there
 * is no notice, and `{"action": "terminate", "time": "2026-…Z"}` once there is one. The agent polls it
 * (agent.ts); this module only asks.
 */

/** A notice: what the provider will do, and when (as it said it). */
export interface InterruptionNotice {
  readonly action: string;
  readonly time: string | null;
}

/** Where the notices come from: `none`, or `ec2` (the instance metadata service). */
export const INTERRUPTION_SOURCES = ['none', 'ec2'] as const;
export type InterruptionSource = (typeof INTERRUPTION_SOURCES)[number];

/** The EC2 instance metadata service's address. */
export const EC2_METADATA_URL = 'http://169.254.169.254';

/** How long an IMDSv2 session token is asked for, in seconds; a new one is asked for before it ends. */
const TOKEN_TTL_SECONDS = 300;

/**
 * A poll of EC2's spot notice: null while there is none; the notice once there is. Errors (the
 * service unreachable, a malformed answer) are thrown for the caller to log and try again.
 */
export function ec2SpotNotice(
  baseUrl: string,
  timeoutMs: number,
  fetchImpl: typeof fetch = fetch,
): () => Promise<InterruptionNotice | null> {
  const base = baseUrl.replace(/\/+$/, '');
  let token: { value: string; until: number } | null = null;
  return async () => {
    if (!token || Date.now() > token.until) {
      const r = await fetchImpl(`${base}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aws-ec2-metadata-token-ttl-seconds': String(TOKEN_TTL_SECONDS) },
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!r.ok) throw new Error(`the instance metadata service answered ${r.status} to a token request`);
      token = { value: (await r.text()).trim(), until: Date.now() + (TOKEN_TTL_SECONDS - 30) * 1000 };
    }
    const r = await fetchImpl(`${base}/latest/meta-data/spot/instance-action`, {
      headers: { 'X-aws-ec2-metadata-token': token.value },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (r.status === 404) return null;
    if (r.status === 401) {
      token = null; // expired: a new one next time
      throw new Error('the instance metadata service refused its session token');
    }
    if (!r.ok) throw new Error(`the instance metadata service answered ${r.status} for spot/instance-action`);
    const body = (await r.json()) as { action?: unknown; time?: unknown };
    const action = typeof body.action === 'string' && body.action ? body.action.slice(0, 40) : 'terminate';
    const time =
      typeof body.time === 'string' && !Number.isNaN(Date.parse(body.time)) ? new Date(body.time).toISOString() : null;
    return { action, time };
  };
}
