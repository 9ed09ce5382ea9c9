/**
 * A local pool's handler cannot act as a worker (issue 31, 7): the real server starts real agents
 * through the local provider, and one runs a handler that tries every way to a worker token this
 * test knows of, from its directory, its environment and /proc: its own agent's state file (two and
 * three directories up, and where TAGSCHED_STATE_FILE says), the other agent's, the whole data
 * directory, the agents' processes, its descriptors, and unmounting or binding around what hides
 * them. It finds none, while both tokens are live (they answer heartbeat).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { settled, until, useFleet } from '../faults/harness.js';
import { killLocalAgentsAfterEach, poolInstances, PROVISIONER_ENV } from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

// A token is tsk_ and many more characters; the probe's own grep, whose pattern it reads in
// /proc/*/cmdline while that grep runs, shows "tsk_" followed by "[": not a token.
const PROBE = `#!/bin/sh
exec >"$OUT" 2>&1
found() { grep -a -o -h -E 'tsk_[A-Za-z0-9_-]{8,}' | sort -u | sed "s|^|FOUND $1 |"; }
data=\${PWD%/local-workers/*}
echo "probe uid=$(id -u) pwd=$PWD data=$data"
cat ../../state.json ../../../state.json 2>/dev/null | found state-relative
cat "$TAGSCHED_STATE_FILE" 2>/dev/null | found state-variable
cat "$data"/local-workers/*/*/state.json "$data"/local-workers/*/*/work/state.json 2>/dev/null | found state-any-agent
grep -r -a -o -h -E 'tsk_[A-Za-z0-9_-]{8,}' ../../../../../.. "$data" "$TAGSCHED_WORK_DIR" "$TAGSCHED_HIDDEN_DIR" 2>/dev/null | found data-dir
env | found environment
cat /proc/$PPID/environ /proc/$PPID/cmdline 2>/dev/null | found parent
for p in /proc/[0-9]*; do timeout 2 cat $p/environ $p/cmdline 2>/dev/null; done | found any-process
for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; done 2>/dev/null | grep -q 'bin/tagsched-worke[r]' && echo "AGENT-VISIBLE"
for d in /proc/self/fd/*; do [ -f "$d" ] && cat "$d"; done 2>/dev/null | found descriptors
umount "$data" 2>/dev/null && echo "UNMOUNTED"
cat "$TAGSCHED_STATE_FILE" 2>/dev/null | found state-after-umount
t=$(mktemp -d)
unshare --user --map-root-user --mount sh -c "mount --bind / $t && cat $t$data/local-workers/*/*/state.json" 2>/dev/null | found bind-root
unshare --user --map-root-user --mount sh -c "mount --rbind / $t && cat $t$data/local-workers/*/*/state.json" 2>/dev/null | found rbind-root
rmdir "$t"
echo "probe done"
`;

describe('a local pool’s handler that tries to read a worker token', () => {
  it('finds neither its own agent’s nor another agent’s, though both answer heartbeat', async () => {
    const server = await f.server(PROVISIONER_ENV);
    const probe = path.join(f.dir, 'token-probe.sh');
    const out = path.join(f.dir, 'token-probe.out');
    fs.writeFileSync(probe, PROBE, { mode: 0o755 });
    const created = await f.gql(
      server.url,
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on Error { message } } }`,
      {
        i: {
          name: 'probe',
          providerType: 'local',
          maxActiveInstances: 2,
          minIdleInstances: 2,
          idleTimeoutSeconds: 600,
          specifications: { enableTasks: ['noop'], handlers: [{ task: 'noop', command: `OUT=${out} sh ${probe}` }] },
        },
      },
    );
    expect(created.data?.createWorkerPool.__typename, JSON.stringify(created)).toBe('WorkerPool');
    await until(
      'two RUNNING instances',
      async () => (await poolInstances(f, 'probe')).filter((i) => i.state === 'RUNNING').length === 2,
      120_000,
    );

    const id = await f.createNoop(server.url);
    const [state] = await settled(f, [id], 120_000);
    expect(state).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS' });
    const said = fs.readFileSync(out, 'utf8');

    // Both agents' tokens, read from outside, and live.
    const root = path.join(f.dir, 'data', 'local-workers', 'probe');
    const stateOf = (name: string) =>
      [path.join(root, name, 'state.json'), path.join(root, name, 'work', 'state.json')].find((file) =>
        fs.existsSync(file),
      )!;
    const tokens = fs
      .readdirSync(root)
      .map((name) => (JSON.parse(fs.readFileSync(stateOf(name), 'utf8')) as { workerToken: string }).workerToken);
    expect(tokens).toHaveLength(2);
    for (const token of tokens) {
      const beat = await f.gql(server.url, `mutation { heartbeat(input: {}) { __typename } }`, {}, token);
      expect(beat.data?.heartbeat.__typename, JSON.stringify(beat)).toBe('HeartbeatPayload');
    }

    // As the server's user (root when the tests run as root): no other user shields the token.
    expect(said).toMatch(new RegExp(`^probe uid=${process.getuid!()} `, 'm'));
    expect(said).toContain('probe done');
    expect(said).not.toContain('FOUND');
    expect(said).not.toContain('AGENT-VISIBLE');
    expect(said).not.toContain('UNMOUNTED');
    for (const token of tokens) expect(said).not.toContain(token);
  }, 240_000);
});
