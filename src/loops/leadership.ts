/**
 * Leadership (docs/operating/replicas.md): what must happen once across the server processes of one
 * database (the provisioner's cycles, the periodic chores) is done by the process that holds the duty's
 * lease (storage/db/leader-lease.ts). A process follows the duties it can do: it tries to take each one's
 * lease every second, and at once when its holder gives it up (the leaseReleased event); while it leads,
 * it renews the lease every fifth of TAGSCHED_LEADER_LEASE_SECONDS.
 *
 * A hold is valid until its local deadline: two thirds of the lease's length after the renewal that
 * extended it was sent, which is before the database lets anyone else take it (the lease runs from the
 * database's `now()`, at or after the sending). A leader that cannot renew in time (its database
 * unreachable, the process paused) stops acting by itself: its hold's signal is aborted at the deadline,
 * and every step of a cycle checks it. Writes that must not be made by two leaders also check the term in
 * their own transaction (holdsLease), which the database decides.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '../core/log.js';
import { claimLease, releaseLease } from '../storage/db/leader-lease.js';
import type { Events } from '../storage/events.js';

/** The duties a process may lead. A host-bound provider's pools are the duty of one process of their host. */
export const DUTIES = {
  /** The provisioner's cycles over the pools of providers that are not bound to a host. */
  PROVISIONER: 'provisioner',
  /** The lease sweep, the quarantine probes, the hourly housekeeping and the take-over of dead processes. */
  CHORES: 'chores',
} as const;

/** The duty of the provisioner's cycles over the host-bound pools (local, qemu) of one host. */
export function hostProvisionerDuty(hostName: string): string {
  return `${DUTIES.PROVISIONER}@${hostName}`;
}

/** A lease this process holds. */
export interface LeaseHold {
  readonly duty: string;
  readonly holder: string;
  readonly term: number;
  /** When this term began (the database's clock). */
  readonly since: Date;
  /** Aborted when the lease is lost, given up, or not renewed by its local deadline. */
  readonly lost: AbortSignal;
  /** Whether the lease is still held, as far as this process knows (not lost, before its local deadline). */
  valid(): boolean;
}

/** The leadership of one process. */
export interface Leadership {
  /** This process's name, the holder of the leases it takes. */
  readonly holder: string;
  /** The hold of a duty this process leads now, or null. */
  held(duty: string): LeaseHold | null;
  /** Takes (or renews) the lease of a duty now: its hold, or null when another process holds it. */
  claim(duty: string): Promise<LeaseHold | null>;
  /** Follows a duty from now on: its lease taken whenever it is free, kept while held; `onLead` is called with each new term's hold. */
  follow(duty: string, onLead?: (hold: LeaseHold) => void): void;
  /** The duties followed and whether this process leads each (for /metrics). */
  leading(): { duty: string; leads: boolean }[];
  /** Stops following, and gives up every lease held (other processes hear it and take them at once). */
  stop(): Promise<void>;
}

interface Held {
  hold: LeaseHold;
  abort: AbortController;
  deadline: NodeJS.Timeout;
  /** The local deadline (Date.now()) of the hold. */
  until: { at: number };
}

export interface LeadershipDeps {
  readonly orm: MikroORM;
  readonly events: Events;
  readonly log: Logger;
  /** This process's name (config.server.processName). */
  readonly holder: string;
  /** The length of a lease, in milliseconds (config.leases.leaderLeaseMs). */
  readonly leaseMs: number;
}

/** Creates the leadership of one process; it takes no lease until claim() or follow(). */
export function createLeadership(deps: LeadershipDeps): Leadership {
  const { orm, events, holder, leaseMs } = deps;
  const log = deps.log.child({ module: 'leadership' });
  const renewMs = Math.max(100, Math.floor(leaseMs / 5));
  // Followers try every second (or at the renewal interval, when it is shorter): a lease that expires is taken within a second.
  const tryMs = Math.min(renewMs, 1_000);
  // When each held lease's last renewal was sent.
  const renewedAt = new Map<string, number>();
  const validMs = Math.floor((leaseMs * 2) / 3);
  const holds = new Map<string, Held>();
  const followed = new Map<string, ((hold: LeaseHold) => void) | undefined>();
  // One claim at a time per duty: a renewal and a claim on an event share it.
  const claiming = new Map<string, Promise<LeaseHold | null>>();
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  let releasedStream: AsyncIterator<{ duty: string }> | null = null;

  function lose(duty: string, why: string): void {
    const h = holds.get(duty);
    if (!h) return;
    holds.delete(duty);
    clearTimeout(h.deadline);
    h.abort.abort(new Error(why));
    log.warn({ duty, term: h.hold.term, why }, 'no longer leading');
  }

  async function claimOnce(duty: string): Promise<LeaseHold | null> {
    const current = holds.get(duty);
    const sentAt = Date.now();
    renewedAt.set(duty, sentAt);
    let row;
    try {
      row = await claimLease(orm.em.fork(), duty, holder, current?.hold.term ?? null, leaseMs);
    } catch (err) {
      // Kept until its deadline: a renewal that fails once is tried again at the next interval.
      if (current) log.warn({ duty, err: err instanceof Error ? err.message : String(err) }, 'could not renew a lease');
      return current && current.hold.valid() ? current.hold : null;
    }
    if (stopped) {
      if (row) await releaseLease(orm.em.fork(), duty, holder, row.term).catch(() => undefined);
      return null;
    }
    if (!row) {
      if (current) lose(duty, 'another process took the lease');
      return null;
    }
    const until = sentAt + validMs;
    if (current && current.hold.term === row.term) {
      clearTimeout(current.deadline);
      current.deadline = deadlineTimer(duty, row.term, until);
      current.until.at = until;
      return current.hold;
    }
    if (current) lose(duty, `the lease passed to term ${row.term}`);
    const abort = new AbortController();
    const deadline = { at: until };
    const hold: LeaseHold = {
      duty,
      holder,
      term: row.term,
      since: row.acquiredAt,
      lost: abort.signal,
      valid: () => !abort.signal.aborted && Date.now() < deadline.at,
    };
    holds.set(duty, { hold, abort, until: deadline, deadline: deadlineTimer(duty, row.term, until) });
    log.info({ duty, term: row.term }, 'leading');
    try {
      followed.get(duty)?.(hold);
    } catch (err) {
      log.error({ err, duty }, 'starting a duty failed');
    }
    return hold;
  }

  function deadlineTimer(duty: string, term: number, until: number): NodeJS.Timeout {
    const t = setTimeout(
      () => {
        if (holds.get(duty)?.hold.term === term) lose(duty, 'the lease was not renewed in time');
      },
      Math.max(0, until - Date.now()),
    );
    t.unref();
    return t;
  }

  function claim(duty: string): Promise<LeaseHold | null> {
    if (stopped) return Promise.resolve(null);
    const running = claiming.get(duty);
    if (running) return running;
    const run = claimOnce(duty).finally(() => claiming.delete(duty));
    claiming.set(duty, run);
    return run;
  }

  function tick(): void {
    const now = Date.now();
    for (const duty of followed.keys()) {
      if (holds.has(duty) && now - (renewedAt.get(duty) ?? 0) < renewMs - tryMs / 2) continue; // not due yet
      void claim(duty).catch((err: unknown) => log.warn({ err, duty }, 'lease claim failed'));
    }
  }

  return {
    holder,
    held(duty) {
      const h = holds.get(duty);
      return h && h.hold.valid() ? h.hold : null;
    },
    claim,
    follow(duty, onLead) {
      if (stopped) return;
      followed.set(duty, onLead);
      if (!timer) {
        timer = setInterval(tick, tryMs);
        timer.unref();
        // A lease given up elsewhere is taken at once, not at the next interval.
        const stream = events.subscribe('leaseReleased')[Symbol.asyncIterator]();
        releasedStream = stream;
        void (async () => {
          for (let next = await stream.next(); !next.done && !stopped; next = await stream.next()) {
            const { duty: freed } = next.value;
            if (followed.has(freed) && !holds.has(freed)) void claim(freed).catch(() => undefined);
          }
        })().catch((err: unknown) => log.warn({ err }, 'stopped hearing released leases'));
      }
      void claim(duty).catch((err: unknown) => log.warn({ err, duty }, 'lease claim failed'));
    },
    leading() {
      return [...followed.keys()].map((duty) => ({ duty, leads: this.held(duty) !== null }));
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await releasedStream?.return?.();
      await Promise.allSettled([...claiming.values()]);
      for (const [duty, h] of [...holds]) {
        holds.delete(duty);
        clearTimeout(h.deadline);
        h.abort.abort(new Error('the process is stopping'));
        const released = await releaseLease(orm.em.fork(), duty, holder, h.hold.term).catch((err: unknown) => {
          log.warn({ err, duty }, 'could not give up a lease; it expires by itself');
          return false;
        });
        if (released) {
          events.publish('leaseReleased', { duty });
          log.info({ duty, term: h.hold.term }, 'gave up the lease');
        }
      }
    },
  };
}
