import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectExactlyOnce, settled, until, useFleet } from './harness.js';

// A handler writes numbered lines on stdout and stderr in three parts, each released by the test
// through a gate file, while the network between its agent and the server fails in every way the TCP
// proxy knows: answers lost (the chunks arrive, the agent never hears so and sends them again),
// connections reset, and new ones refused for a while. The gates make each fault meet output however
// slow the machine is.
const f = useFleet();

const LINES = 400;
const PARTS = [
  [1, 200],
  [201, 300],
  [301, 400],
] as const;
const gate = (n: number) => path.join(f.dir, `log-gate-${n}`);
// "out N" on stdout and "err N" on stderr, interleaved; before the second and third parts the handler
// waits for its gate. Then a NUL and a byte that is not UTF-8, which the server stores as ␀ and U+FFFD.
const part = ([from, to]: readonly [number, number]) =>
  `i=${from}; while [ $i -le ${to} ]; do echo "out $i"; echo "err $i" >&2; i=$((i + 1)); done`;
const waitFor = (n: number) => `while [ ! -e "${gate(n)}" ]; do sleep 0.05; done`;
const output = () =>
  [part(PARTS[0]), waitFor(1), part(PARTS[1]), waitFor(2), part(PARTS[2]), `printf 'nul:\\000 bad:\\377 end\\n'`].join(
    '; ',
  );
const LINES_TEXT = Array.from({ length: LINES }, (_, k) => `out ${k + 1}\nerr ${k + 1}\n`).join('');
const LOCAL = Buffer.concat([
  Buffer.from(`${LINES_TEXT}nul:`),
  Buffer.from([0]),
  Buffer.from(' bad:'),
  Buffer.from([0xff]),
  Buffer.from(' end\n'),
]);
const EXPECTED = `${LINES_TEXT}nul:\u2400 bad:\ufffd end\n`;
const open = (n: number) => fs.writeFileSync(gate(n), '');

async function logOf(url: string, id: string): Promise<string> {
  let text = '';
  let offset = 0;
  for (;;) {
    const r = await f.gql(
      url,
      `query($id: ID!, $o: Float) { workRequest(id: $id) { log(offset: $o, limit: 1000) { text nextOffset totalBytes complete } } }`,
      { id, o: offset },
    );
    const page = r.data!.workRequest.log as { text: string; nextOffset: number; totalBytes: number; complete: boolean };
    text += page.text;
    if (page.nextOffset >= page.totalBytes) return text;
    offset = page.nextOffset;
  }
}

describe.sequential('job output over a failing network', () => {
  it('reaches the server whole, once and in order, through lost answers, reset connections and refused ones', async () => {
    const server = await f.server({ TAGSCHED_ACK_TIMEOUT_SECONDS: '30', TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS: '30' });
    const proxy = await f.proxy(server.port);
    const a = await f.agent({
      name: 'log-a',
      url: proxy.urlFor(server.url),
      sleep: '0',
      output: output(),
      env: { TAGSCHED_LOG_INTERVAL: '0.05' },
    });
    const id = await f.createNoop(server.url);
    const stored = async () =>
      Number(
        (await f.sql(`select total_bytes from work_request_log where work_request_id = $1`, [Number(id)]))[0]
          ?.total_bytes ?? 0,
      );
    await until('the first output on the server', async () => (await stored()) > 0);

    // Answers lost: what the agent sends arrives, and it sends it again after its request times out.
    proxy.dropAnswers(true);
    const before = await stored();
    open(1);
    await until('more output to arrive while answers are lost', async () => (await stored()) > before);
    await a.waitForLog('retrying', (l) => l.operation === 'appendWorkRequestLog');
    proxy.dropAnswers(false);

    // Reset, and refused until the agent has tried again twice.
    await proxy.close();
    const cutAt = a.logs.length;
    open(2);
    await until(
      'the agent to retry the output',
      () =>
        a.logs.slice(cutAt).filter((l) => l.msg === 'retrying' && l.operation === 'appendWorkRequestLog').length >= 2,
    );
    await proxy.reopen();

    const [s] = await settled(f, [id]);
    expect(s).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', worker: 'log-a' });
    expectExactlyOnce(f, [s]);
    const local = fs.readFileSync(path.join(f.dir, 'agent-log-a', 'runs', id, 'log'));
    expect(local.equals(LOCAL), local.subarray(-40).toString('hex')).toBe(true);
    expect(await logOf(server.url, id)).toBe(EXPECTED);
    // Output arrived while its answers were lost, and the agent sent it again: each byte is stored once, in order.
    const chunks = await f.sql<{ start: string; bytes: number }>(
      `select start, bytes from work_request_log_chunk where work_request_id = $1 order by start`,
      [Number(id)],
    );
    let end = 0;
    for (const c of chunks) {
      expect(Number(c.start)).toBe(end);
      end += c.bytes;
    }
    expect(end).toBe(Buffer.byteLength(EXPECTED));
    const [row] = await f.sql(`select exit_code from work_request where id = $1`, [Number(id)]);
    expect(row.exit_code).toBe(0);
  }, 180_000);
});
