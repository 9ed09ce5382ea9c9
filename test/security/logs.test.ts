import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS } from '../helpers/fixtures.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

// docs/design.md: limits and tokens: logs never carry SQL parameters, secrets or unbounded client strings; client mistakes
// are logged below error level. The service's real logger, captured, behind the real app.
const capture = captureLog('info');
const t = useTestApp({}, { log: () => capture.log });

describe('what the log keeps of client input', () => {
  it('a database error caused by a huge argument is logged without the SQL or its values', async () => {
    const marker = 'HUGE-ARGUMENT-';
    const huge = `${marker.repeat(50_000)}\u0000`; // 700 kB with a NUL, which PostgreSQL refuses
    const from = capture.mark();
    const res = await t.gql(`query($n: String!) { workRequests(filter: { taskName: $n }) { edges { node { id } } } }`, { n: huge });
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

describe('client mistakes are not errors', () => {
  it('a wrong token, a forbidden mutation and a malformed cursor log nothing at error level', async () => {
    const from = capture.mark();
    const bad = await t.gql(`{ me { username } }`, {}, 'tsk_user_not-a-real-token-at-all-0000000000');
    expect(bad.status).toBe(401);
    const user = await t.gql(`mutation { createUser(input: { username: "logs-user" }) { ... on UserTokenPayload { token } } }`);
    const token = user.data!.createUser.token as string;
    const forbidden = await t.gql(`mutation { createUser(input: { username: "nope" }) { __typename ${ERROR_FIELDS} } }`, {}, token);
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

describe('capText', () => {
  it('cuts long client strings and says how much was cut', async () => {
    const { capText } = await import('../../src/log.js');
    expect(capText('short')).toBe('short');
    const cut = capText('x'.repeat(10_000));
    expect(cut.length).toBeLessThan(300);
    expect(cut).toContain('9800 more characters');
  });
});
