/**
 * A worker's pull waits for its worker's row lock no longer than TAGSCHED_PULL_LOCK_TIMEOUT_MS: a
 * transaction that holds the row (another process's pass, or one whose host went silent) makes the
 * pull answer no work, by the one-trip path and by the transaction path, with no error; once the lock
 * is gone the same pull gets its work.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, sbuild, submitOk } from '../helpers/fixtures.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

const TIMEOUT_MS = 400;
const cap = captureLog('debug');
const t = useTestApp({ workers: { pullLockTimeoutMs: TIMEOUT_MS } }, { log: () => cap.log });

const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;

/** Another session, which holds the worker's row lock in an open transaction while `body` runs. */
let other: pg.Client;
async function withWorkerLocked<T>(workerId: number, body: () => Promise<T>): Promise<T> {
  await other.query('begin');
  await other.query('select id from worker where id = $1 for update', [workerId]);
  try {
    return await body();
  } finally {
    await other.query('rollback');
  }
}

/** A pull through the API, and how long it took. */
async function pull(token: string): Promise<{ ms: number; status: number; errors: unknown; id: string | null }> {
  const started = Date.now();
  const r = await t.gql(REQUEST_WORK, {}, token);
  return {
    ms: Date.now() - started,
    status: r.status,
    errors: r.errors,
    id: (r.data?.requestWork?.workRequest?.id as string | undefined) ?? null,
  };
}

beforeAll(async () => {
  other = new pg.Client({ connectionString: t.dbUrl });
  await other.connect();
});
afterAll(() => other?.end());

describe('a pull that waits for a lock', () => {
  it('answers no work after the lock timeout, by the transaction path and the one-trip path, and its work once the lock is gone', async () => {
    await createWorkspace(t, 'lock/main');
    const token = await connectedWorker(t, 'locked-1', { concurrency: 2 });
    const [{ id: workerId }] = await t.sql<{ id: number }>(`select id from worker where name = 'locked-1'`);
    const first = (await submitOk(t, sbuild('lock/main', 'one'))).id as string;
    const second = (await submitOk(t, sbuild('lock/main', 'two'))).id as string;
    const mark = cap.mark();

    // This process has not seen the worker pull yet: its first pull is the transaction path.
    const held = await withWorkerLocked(workerId, () => pull(token));
    expect(held).toMatchObject({ status: 200, errors: undefined, id: null });
    expect(held.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(held.ms).toBeLessThan(TIMEOUT_MS + 2_000);
    expect((await pull(token)).id).toBe(first); // the transaction path again, which learns the worker's shape

    // The worker's shape is known now: the one-trip path.
    const heldAgain = await withWorkerLocked(workerId, () => pull(token));
    expect(heldAgain).toMatchObject({ status: 200, errors: undefined, id: null });
    expect(heldAgain.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(heldAgain.ms).toBeLessThan(TIMEOUT_MS + 2_000);
    expect((await pull(token)).id).toBe(second);

    const lines = cap.lines().slice(mark);
    expect(lines.filter((l) => l.msg === 'pull waited too long for a lock: no work now')).toHaveLength(2);
    expect(lines.filter((l) => l.level >= LEVEL.warn)).toEqual([]);
    // The timeout was the pulls' own: what the pool's connections run next waits as long as it must.
    expect(await t.sql(`select current_setting('lock_timeout') as lock_timeout`)).toEqual([{ lock_timeout: '0' }]);
  });

  it("waits as long on a lock of the requests' table (another process's migration) as on the worker's row", async () => {
    await createWorkspace(t, 'lock/table');
    const token = await connectedWorker(t, 'locked-2');
    const id = (await submitOk(t, sbuild('lock/table', 'three'))).id as string;
    await other.query('begin');
    try {
      // EXCLUSIVE lets the pull read but not lock or change a request.
      await other.query('lock table work_request in exclusive mode');
      const r = await pull(token);
      expect(r).toMatchObject({ status: 200, errors: undefined, id: null });
      expect(r.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(r.ms).toBeLessThan(TIMEOUT_MS + 2_000);
    } finally {
      await other.query('rollback');
    }
    expect((await pull(token)).id).toBe(id);
  });
});
