import { DriverException } from '@mikro-orm/postgresql';
import { describe, expect, it } from 'vitest';
import { serializeError } from '../../src/core/log.js';
import { useTestApp } from '../helpers/app.js';
import { createPool, ERROR_FIELDS, expectResult, registerWorker } from '../helpers/fixtures.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

// docs/design.md: limits and tokens: logs never carry SQL parameters, secrets or unbounded client strings; client mistakes
// are logged below error level. The service's real logger, captured, behind the real app.
const capture = captureLog('info');
const t = useTestApp({ limits: { authFailuresPerMinute: 5 } }, { log: () => capture.log });

describe('what the log keeps of client input', () => {
  it('a database error caused by a huge argument is logged without the SQL or its values', async () => {
    const marker = 'HUGE-ARGUMENT-';
    const huge = `${marker.repeat(50_000)}\u0000`; // 700 kB with a NUL, which PostgreSQL refuses
    const from = capture.mark();
    const res = await t.gql(`query($n: String!) { workRequests(filter: { taskName: $n }) { edges { node { id } } } }`, {
      n: huge,
    });
    expect(res.status).toBeLessThan(500);
    const text = capture.textSince(from);
    expect(capture.bytesSince(from)).toBeLessThan(8 * 1024);
    expect(text.split(marker).length - 1).toBeLessThanOrEqual(20); // at most a capped excerpt
    expect(text).not.toMatch(/select .* from/i);
  });

  it('a failed pool insert does not log the sealed provider account', async () => {
    const from = capture.mark();
    await t.gql(`mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ${ERROR_FIELDS} } }`, {
      i: { name: 'leaky', providerAccount: { password: 'hunter2-TOP-SECRET' }, specifications: { image: `img\u0000` } },
    });
    const [row] = await t.sql<{ n: number }>(`select count(*)::int as n from worker_pool where name = 'leaky'`);
    const text = capture.textSince(from);
    expect(text).not.toContain('hunter2');
    expect(text).not.toMatch(/insert into/i);
    expect(text).not.toContain('provider_account');
    if (row.n === 1) return; // stored (the NUL accepted somewhere): nothing was logged about it
    expect(capture.bytesSince(from)).toBeLessThan(8 * 1024);
  });
});

describe('errors as logged', () => {
  it('a connection lost during a statement is logged with its own words, not the statement and its parameters', () => {
    const lost = new DriverException(
      new Error(`select t.* from token t where t.hash = 'c0ffee-TOKEN-HASH' - Connection terminated unexpectedly`),
    );
    const logged = serializeError(lost);
    expect(logged).toMatchObject({ type: 'DriverException', message: 'Connection terminated unexpectedly' });
    expect(JSON.stringify(logged)).not.toContain('c0ffee-TOKEN-HASH');
  });

  it('so is one lost during a statement of many lines, as the token lookup is', () => {
    const lost = new DriverException(
      new Error(
        `\n  select t.*\n    from token t\n   where t.hash = 'c0ffee-TOKEN-HASH' - Connection terminated unexpectedly`,
      ),
    );
    const logged = serializeError(lost);
    expect(logged).toMatchObject({ type: 'DriverException', message: 'Connection terminated unexpectedly' });
    expect(JSON.stringify(logged)).not.toContain('c0ffee-TOKEN-HASH');
  });

  it('keeps PostgreSQL’s words when its error has a hint and no detail', () => {
    const refused = new DriverException(
      Object.assign(
        new Error(
          `select no_such('secret-arg') - function no_such(unknown) does not exist\n - hint: No function matches the given name and argument types.`,
        ),
        {
          routine: 'ParseFuncOrColumn',
          code: '42883',
        },
      ),
    );
    expect(serializeError(refused)).toMatchObject({
      message: 'function no_such(unknown) does not exist',
      code: '42883',
      routine: 'ParseFuncOrColumn',
    });
  });

  it('leaves another library’s exception whole', () => {
    const other = Object.assign(new Error('snapshot snap-1 - not found in region eu-central-1'), {
      name: 'ResourceNotFoundException',
    });
    expect(serializeError(other)).toMatchObject({
      type: 'ResourceNotFoundException',
      message: 'snapshot snap-1 - not found in region eu-central-1',
    });
  });
});

describe('client mistakes are not errors', () => {
  it('a wrong token, a forbidden mutation and a malformed cursor log nothing at error level', async () => {
    const from = capture.mark();
    const bad = await t.gql(`{ me { username } }`, {}, 'tsk_user_not-a-real-token-at-all-0000000000');
    expect(bad.status).toBe(401);
    const user = await t.gql(
      `mutation { createUser(input: { username: "logs-user" }) { ... on UserTokenPayload { token } } }`,
    );
    const token = user.data!.createUser.token as string;
    const forbidden = await t.gql(
      `mutation { createUser(input: { username: "nope" }) { __typename ${ERROR_FIELDS} } }`,
      {},
      token,
    );
    expect(forbidden.data!.createUser.code).toBe('FORBIDDEN');
    const cursor = await t.gql(`{ workRequests(after: "!!not-a-cursor!!") { edges { node { id } } } }`);
    expect(cursor.errors?.[0]?.extensions?.code).toBe('INVALID_INPUT');
    const lines = capture.lines().slice(from);
    expect(lines.filter((l) => l.level >= LEVEL.error)).toEqual([]);
    // The failed authentication is worth a line (an operator looks for guessing), without the token.
    const failed = lines.find((l) => l.msg === 'authentication failed');
    expect(failed?.level).toBe(LEVEL.warn);
    expect(JSON.stringify(lines)).not.toContain('not-a-real-token');
  });
});

describe('a stopped worker is no guesser', () => {
  it("its agent's calls after a scale-down are refused (401) without a warning, and do not count toward the failed-authentication throttle", async () => {
    await createPool(t, { name: 'logs-pool' });
    const token = await registerWorker(t, 'logs-pool-1', { pool: 'logs-pool' });
    await expectResult(
      t,
      'Worker',
      `mutation { terminateWorker(input: { name: "logs-pool-1" }) { __typename ${ERROR_FIELDS} } }`,
    );
    const from = capture.mark();
    // More calls than the throttle's 5 failures a minute: an agent draining after its stop keeps calling.
    for (let i = 0; i < 8; i++) {
      const refused = await t.gql(`{ me { __typename } }`, {}, token);
      expect(refused.status).toBe(401);
      expect(refused.errors?.[0]?.message).toBe('the worker of this token is terminated');
    }
    const lines = capture.lines().slice(from);
    expect(lines.filter((l) => l.msg === 'authentication failed' || l.level >= LEVEL.warn)).toEqual([]);
    expect(lines.filter((l) => l.msg === 'a stopped worker was turned away' && l.level === LEVEL.info)).toHaveLength(8);
    expect(JSON.stringify(lines)).not.toContain(token);
    // Had the 8 counted, the first guess would be refused (429). Guesses are still cut at the limit of 5
    // (an earlier test of this file may have used one of them).
    const guesses: number[] = [];
    for (let i = 0; i < 7; i++)
      guesses.push((await t.gql(`{ me { __typename } }`, {}, `tsk_user_guess-${i}-000000000000000000000000`)).status);
    expect(guesses[0]).toBe(401);
    expect(guesses.filter((s) => s === 401).length).toBeGreaterThanOrEqual(4);
    expect(guesses.slice(5)).toEqual([429, 429]);
  });
});

describe('capText', () => {
  it('cuts long client strings and says how much was cut', async () => {
    const { capText } = await import('../../src/core/log.js');
    expect(capText('short')).toBe('short');
    const cut = capText('x'.repeat(10_000));
    expect(cut.length).toBeLessThan(300);
    expect(cut).toContain('9800 more characters');
  });
});
