/**
 * What the tests of pools with real local agents share: the handler their agents run (it records
 * each execution in the fleet's runs log under the worker's name, and sleeps as long as a file
 * says), the pool input that runs it, reading the instances, and killing every local agent a
 * server left behind (a SIGKILLed server's agents outlive it).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach } from 'vitest';
import { alive, until, type Execution, type Fleet } from '../faults/harness.js';

/**
 * The environment of servers that provision quickly: every second, changes after 100 ms. Leases are
 * long (a loaded machine starts agents slowly): work comes back from a lost agent because its
 * instance is found gone, not because a lease ran out.
 */
export const PROVISIONER_ENV = {
  TAGSCHED_ACK_TIMEOUT_SECONDS: '60',
  TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS: '60',
  TAGSCHED_PROVISIONER_INTERVAL_SECONDS: '1',
  TAGSCHED_PROVISIONER_DEBOUNCE_MS: '100',
  TAGSCHED_STOP_GRACE_SECONDS: '5',
  TAGSCHED_BOOT_TIMEOUT_SECONDS: '120',
  TAGSCHED_LAUNCH_BACKOFF_SECONDS: '1',
} as const;

/** Writes the handler; returns the pool specifications that run it for `task`, and the file its sleep is read from. */
export function poolHandler(
  fleet: Fleet,
  task = 'sbuild',
  seconds = '0.2',
): { handlers: { task: string; command: string }[]; sleepFile: string } {
  const script = path.join(fleet.dir, 'pool-handler.sh');
  const sleepFile = path.join(fleet.dir, 'sleep');
  fs.writeFileSync(
    script,
    [
      '#!/bin/sh',
      // Read before the start is recorded: a test that changes the file once it sees the start changes the next runs only.
      'seconds=$(cat "$SLEEP_FILE")',
      'echo "start $TAGSCHED_WORK_REQUEST_ID $TAGSCHED_WORKER_NAME $$" >> "$RUNS"',
      'sleep "$seconds"',
      'echo "done $TAGSCHED_WORK_REQUEST_ID $TAGSCHED_WORKER_NAME $$" >> "$RUNS"',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(sleepFile, seconds);
  return {
    handlers: [{ task, command: `RUNS=${path.join(fleet.dir, 'runs.log')} SLEEP_FILE=${sleepFile} sh ${script}` }],
    sleepFile,
  };
}

/** An instance row, as the tests read it. */
export interface InstanceRow {
  name: string;
  state: string;
  provider_id: string | null;
  error: string | null;
  requested_at: Date;
  started_at: Date | null;
  terminated_at: Date | null;
  runtime: number;
}

/** The instances of a pool, oldest first. */
export function poolInstances(fleet: Fleet, pool: string): Promise<InstanceRow[]> {
  return fleet.sql<InstanceRow>(
    `select i.name, i.state, i.provider_id, i.error, i.requested_at, i.started_at, i.terminated_at,
            extract(epoch from coalesce(i.terminated_at, now()) - i.requested_at)::float as runtime
       from instance i join worker_pool p on p.id = i.pool_id where p.name = $1 order by i.id`,
    [pool],
  );
}

/** The pids of the local agents recorded under the fleet's data directory. */
export function localAgentPids(fleet: Fleet): { name: string; pid: number }[] {
  const root = path.join(fleet.dir, 'data', 'local-workers');
  const out: { name: string; pid: number }[] = [];
  for (const pool of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    for (const name of fs.readdirSync(path.join(root, pool))) {
      try {
        const record = JSON.parse(fs.readFileSync(path.join(root, pool, name, 'instance.json'), 'utf8')) as {
          pid: number;
        };
        out.push({ name, pid: record.pid });
      } catch {
        // not written yet, or removed
      }
    }
  }
  return out;
}

/**
 * Whether a process of a handler's run is left, by its environment (its work request and worker): a
 * local agent runs handlers in a PID namespace of their own, so the pid a handler records is not one
 * this process can look up.
 */
export function runLeft(run: Pick<Execution, 'id' | 'agent'>): boolean {
  const marks = [`\0TAGSCHED_WORK_REQUEST_ID=${run.id}\0`, `\0TAGSCHED_WORKER_NAME=${run.agent}\0`];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(pid)) continue;
    try {
      const env = `\0${fs.readFileSync(`/proc/${pid}/environ`, 'latin1')}`;
      if (marks.every((m) => env.includes(m))) return true;
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return false;
}

/** After each test: no local agent left running, and no pool of it that would take the next test's work (register after useFleet). */
export function killLocalAgentsAfterEach(fleet: Fleet): void {
  afterEach(async () => {
    // The pools first: a server still running would launch again for a pool's minimum idle instances.
    // A cycle already under way may still launch one: looked for again until a second passes with none.
    await fleet.sql(`update worker_pool set enabled = false`);
    for (let quiet = 0, round = 0; quiet < 2; round++) {
      if (round > 40) throw new Error('local agents kept being started after their pools were disabled');
      const left = localAgentPids(fleet).filter((a) => alive(a.pid));
      for (const a of left) process.kill(a.pid, 'SIGKILL');
      await until('the local agents to be gone', () => left.every((a) => !alive(a.pid)));
      quiet = left.length ? 0 : quiet + 1;
      if (quiet < 2) await new Promise((r) => setTimeout(r, 500));
    }
  });
}
