import { describe, expect, it } from 'vitest';
import { alive, settled, until, useFleet } from '../faults/harness.js';

// `npx tagsched-worker` runs the agent as npm → sh -c → node. npm passes a SIGTERM to the `sh` only,
// which dies of it; the agent sees its parent go and drains as if the signal had reached it.
const f = useFleet();

describe('the agent under npx', () => {
  it('drains when npx gets SIGTERM: the running job completes and the agent exits 0', async () => {
    const server = await f.server();
    try {
      const agent = await f.agent({ name: 'npx-1', url: server.url, viaNpx: true, sleep: '3' });
      const pid = agent.agentPid();
      expect(pid).not.toBe(agent.child.pid);
      const id = await f.createNoop(server.url);
      await until('the job to start', () => f.executions().some((e) => e.id === id));

      agent.signal('SIGTERM'); // to npm, as `kill -TERM <npx pid>` does
      await agent.exited;
      expect(f.executions().find((e) => e.id === id)!.done).toBe(false); // npm is gone before the job ends
      await agent.waitForLog('the process that started the agent is gone: draining as on SIGTERM');
      await agent.waitForLog('draining', (l) => l.signal === 'SIGTERM');
      const exited = await agent.waitForLog('exited');
      expect(exited.code).toBe(0);
      await until('the agent process to be gone', () => !alive(pid));

      const [final] = await settled(f, [id]);
      expect(final).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', worker: 'npx-1' });
      expect(
        f
          .executions()
          .filter((e) => e.id === id)
          .map((e) => e.done),
      ).toEqual([true]);
      expect(agent.logged('result reported', (l) => l.id === id && l.result === 'SUCCESS')).toHaveLength(1);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
