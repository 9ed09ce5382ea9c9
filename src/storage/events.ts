import { createPubSub, Repeater, SlidingBuffer, type PubSub, type PubSubEventTarget } from 'graphql-yoga';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { WorkRequestStatus } from '../core/work-request-status.js';
import type { Logger } from '../core/log.js';

/** What an assignment event carries. */
export interface AssignmentEvent {
  workRequestId: number;
  workerId: number;
}

/**
 * The events the service publishes after a commit. Payloads are small ids, never entities: a
 * subscriber reloads what it shows through its own EntityManager, with its own visibility rules.
 */
export type Topics = {
  /**
   * `status`, when set, is the request's status after the change; `slotRefilled`, that the worker
   * whose slot a completion freed was given its next work already (the scheduler's pass trigger reads
   * both: changeMayAllowAssignments in scheduler.ts).
   */
  workRequestChanged: [{ id: number; workspaceId: number; status?: WorkRequestStatus; slotRefilled?: boolean }];
  workerChanged: [{ id: number; name: string }];
  /** A pool was created or changed (enabled, disabled, its limits or specifications): the provisioner runs a cycle. */
  poolChanged: [{ id: number; name: string }];
  /** A request was assigned to a worker; routed by worker id, so each worker's subscription hears only its own. */
  workAssigned: [workerId: string, payload: AssignmentEvent];
  /** Tokens were revoked: every process closes their open WebSockets (services/identity/token-lifecycle.ts). */
  tokensRevoked: [{ tokenIds: number[] }];
  /** Output was added to a request's log; routed by request id, so only its followers hear it. */
  workRequestLogAppended: [workRequestId: string, payload: { id: number; totalBytes: number }];
};

/**
 * The pub/sub every operation publishes to. `listening` (cross-process events only) resolves when
 * every subscription opened so far also hears the other processes: call it after a stream's first
 * next() (which is what subscribes) and before reading the state the stream will keep current.
 */
export type Events = PubSub<Topics> & { close?: () => Promise<void>; listening?: () => Promise<void> };

/**
 * How many events one subscription holds that its reader has not taken yet. Events come in bursts: a
 * process that stops records every worker connected to it as disconnected, a network failure
 * disconnects thousands at once, one event each, and through PostgreSQL they arrive in one message
 * and are handed to every subscription at once, before any reader runs. yoga's subscriptions held
 * as many, then threw: the event was lost for that subscription and for every listener after it. Past
 * this many, a subscription now drops its oldest events (its reader, which reloads what an event
 * names, is left with the newest), and says so in the log once. The bound, and so the memory a burst
 * can take per subscription, is the one yoga had.
 */
export const SUBSCRIPTION_BUFFER_EVENTS = 1_024;

/** A subscription's buffer: the newest `capacity` events, and a call of `dropped` each time an older one is let go. */
class EventBuffer extends SlidingBuffer {
  private held = 0;

  constructor(
    private readonly capacity: number,
    private readonly dropped: () => void,
  ) {
    super(capacity);
  }

  override add(value: unknown): void {
    if (this.held === this.capacity) this.dropped();
    else this.held++;
    super.add(value);
  }

  override remove(): unknown {
    const value = super.remove();
    this.held--;
    return value;
  }
}

/** What a listener hears of a published payload: a copy as JSON makes it, as another process reads it. */
const jsonCopy = (payload: unknown): unknown => JSON.parse(JSON.stringify(payload ?? null));

/**
 * yoga's pub/sub on `target`, each subscription with a buffer of its own (SUBSCRIPTION_BUFFER_EVENTS):
 * yoga's own subscriptions have none, or share the one buffer given. What is published is copied
 * first (jsonCopy), so that no listener holds or sees the publisher's own object, which it may change
 * or keep after publishing, whether the target is in-process or PostgreSQL.
 */
function bufferedPubSub(target: PubSubEventTarget<Topics>, log?: Logger): Events {
  const pubsub = createPubSub<Topics>({ eventTarget: target });
  // yoga's publish takes (topic, payload) or (topic, routing id, payload): the payload is the last argument.
  const publish = (routingKey: string, ...args: unknown[]) => {
    const copied = args.slice();
    if (copied.length) copied[copied.length - 1] = jsonCopy(copied[copied.length - 1]);
    (pubsub.publish as (routingKey: string, ...args: unknown[]) => void)(routingKey, ...copied);
  };
  const subscribe = (routingKey: string, id?: string) => {
    const topic = id === undefined ? routingKey : `${routingKey}:${id}`;
    let warned = false;
    const buffer = new EventBuffer(SUBSCRIPTION_BUFFER_EVENTS, () => {
      if (warned) return;
      warned = true;
      log?.warn(
        { topic, held: SUBSCRIPTION_BUFFER_EVENTS },
        'a subscription fell behind its events: the oldest are dropped',
      );
    });
    return new Repeater<unknown>((push, stop) => {
      const listener = (event: Event) => void push((event as CustomEvent).detail);
      void stop.then(() => target.removeEventListener(topic, listener));
      target.addEventListener(topic, listener);
    }, buffer);
  };
  return { publish, subscribe } as unknown as Events;
}

/** An in-process pub/sub (one server process, or the embedded database whose single session cannot LISTEN across connections). */
export function createLocalEvents(log?: Logger): Events {
  return bufferedPubSub(new EventTarget() as PubSubEventTarget<Topics>, log);
}

const CHANNEL_PREFIX = 'tagsched:';
const RECONNECT_MS = { first: 250, max: 5_000 } as const;
/**
 * How long the listening and publishing connections wait for PostgreSQL to accept them. Without a
 * bound, an attempt made while the server shuts down (a restart) can wait for ever, and the process
 * then hears no other process's events again.
 */
const CONNECT_TIMEOUT_MS = 10_000;

type Listener = EventListenerOrEventListenerObject;

/** The property of a notification's payload that names the process that published it (createPgEventTarget). */
const ORIGIN_KEY = '_origin';
/** What `unmarked` answers for a notification of this process's own. */
const OWN = Symbol('own event');

/** An event's payload as a notification carries it: an object (as every topic's is) with the publishing process's mark. */
function marked(detail: unknown, origin: string): string {
  return JSON.stringify(
    detail !== null && typeof detail === 'object' && !Array.isArray(detail)
      ? { ...detail, [ORIGIN_KEY]: origin }
      : detail,
  );
}

/** A notification's payload without its mark, or OWN when `origin` (this process) published it. */
function unmarked(payload: unknown, origin: string): unknown {
  if (payload === null || typeof payload !== 'object' || !(ORIGIN_KEY in payload)) return payload;
  const { [ORIGIN_KEY]: from, ...detail } = payload as Record<string, unknown>;
  return from === origin ? OWN : detail;
}

/**
 * A yoga event target on PostgreSQL LISTEN/NOTIFY, so that events cross server processes: one
 * dedicated listening connection that reconnects with backoff (and LISTENs again) when PostgreSQL
 * restarts, and one connection for NOTIFY (kept in order). Payloads are JSON of ids, far below NOTIFY's 8000 bytes.
 * An event published here reaches this process's own listeners at once, not after a round trip
 * through PostgreSQL (for a push to a worker connected here, that round trip was a millisecond or
 * more of its latency); its notification, marked with the process's own random id, is passed over
 * when it comes back. The listeners of either hear a copy of the payload, as JSON makes it (bufferedPubSub).
 */
export function createPgEventTarget(
  connectionString: string,
  log: Logger,
): PubSubEventTarget<Topics> & { close(): Promise<void>; ready: Promise<void>; listening(): Promise<void> } {
  const listeners = new Map<string, Set<Listener>>();
  // One publishing connection: NOTIFYs sent on it are delivered in the order they were published, so
  // every process hears a process's events in that order (two pooled connections could swap them).
  const notifier = new pg.Pool({
    connectionString,
    max: 1,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
  });
  notifier.on('error', (err) => log.warn({ err: err.message }, 'event publisher connection lost'));
  // This process's mark on the events it publishes: a notification that carries it is an event of this
  // process, which its listeners heard when it was published.
  const origin = randomUUID();
  let client: pg.Client | null = null;
  let closed = false;
  // LISTEN and UNLISTEN go one at a time on the listening connection (pg wants no concurrent queries).
  let commands: Promise<void> = Promise.resolve();
  const onListener = (c: pg.Client, sql: string): Promise<void> =>
    (commands = commands.then(async () => {
      if (client !== c) return; // lost meanwhile: the reconnect LISTENs to every channel again
      try {
        await c.query(sql);
      } catch (err) {
        if (!closed && client === c) log.warn({ err: (err as Error).message, sql }, 'event listener command failed');
      }
    }));
  // Events published while a NOTIFY is on its way wait here, and go together in the next statement
  // (in order): one round trip for a burst instead of one each. PostgreSQL delivers the NOTIFYs of one
  // statement in order, and folds only identical ones (the same event twice says nothing more).
  let queued: { channel: string; payload: string; type: string }[] = [];
  let sending: Promise<void> | null = null;
  const sendQueued = (): void => {
    if (sending || !queued.length) return;
    const batch = queued;
    queued = [];
    const sql =
      batch.length === 1
        ? notifier.query('select pg_notify($1, $2)', [batch[0].channel, batch[0].payload])
        : notifier.query(
            'select pg_notify(e.channel, e.payload) from unnest($1::text[], $2::text[]) as e(channel, payload)',
            [batch.map((b) => b.channel), batch.map((b) => b.payload)],
          );
    sending = sql
      .then(
        () => undefined,
        (err: Error) =>
          log.warn(
            { err: err.message, types: [...new Set(batch.map((b) => b.type))], events: batch.length },
            'event not published',
          ),
      )
      .finally(() => {
        sending = null;
        sendQueued();
      });
  };
  let delay: number = RECONNECT_MS.first;
  const quote = (channel: string) => `"${channel.replace(/"/g, '""')}"`;
  const channelOf = (type: string) => {
    const channel = CHANNEL_PREFIX + type;
    if (Buffer.byteLength(channel) > 63) throw new Error(`event channel too long: ${channel}`);
    return channel;
  };

  // Every listener hears the event, whatever one of them throws.
  const dispatchLocal = (type: string, detail: unknown) => {
    const event = new CustomEvent(type, { detail });
    for (const l of listeners.get(type) ?? []) {
      try {
        if (typeof l === 'function') l(event);
        else l.handleEvent(event);
      } catch (err) {
        log.error({ err, type }, 'event listener failed');
      }
    }
  };

  async function connect(): Promise<void> {
    const c = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
    c.on('notification', (msg) => {
      if (!msg.channel.startsWith(CHANNEL_PREFIX)) return;
      try {
        const detail = unmarked(msg.payload ? JSON.parse(msg.payload) : null, origin);
        if (detail !== OWN) dispatchLocal(msg.channel.slice(CHANNEL_PREFIX.length), detail);
      } catch (err) {
        log.error({ err, channel: msg.channel }, 'bad event payload');
      }
    });
    const lost = (err?: Error) => {
      if (client !== c) return;
      client = null;
      c.removeAllListeners();
      c.end().catch(() => undefined);
      if (!closed) {
        log.warn({ err: err?.message, retryInMs: delay }, 'event listener connection lost; reconnecting');
        scheduleReconnect();
      }
    };
    c.on('error', lost);
    c.on('end', () => lost());
    await c.connect();
    client = c;
    for (const type of listeners.keys()) await onListener(c, `LISTEN ${quote(channelOf(type))}`);
    delay = RECONNECT_MS.first;
    log.info('event listener connected');
  }

  function scheduleReconnect(): void {
    const wait = delay;
    delay = Math.min(delay * 2, RECONNECT_MS.max);
    setTimeout(() => {
      if (closed) return;
      connect().catch((err: Error) => {
        log.warn({ err: err.message, retryInMs: delay }, 'event listener reconnect failed');
        scheduleReconnect();
      });
    }, wait).unref();
  }

  const ready = connect();
  ready.catch(() => scheduleReconnect());

  return {
    ready,
    // After the first connection attempt too: before it, no LISTEN has been sent.
    listening: () =>
      ready.then(
        () => commands,
        () => commands,
      ),
    addEventListener(type: string, listener: Listener | null) {
      if (!listener) return;
      let set = listeners.get(type);
      if (!set) {
        listeners.set(type, (set = new Set()));
        if (client) void onListener(client, `LISTEN ${quote(channelOf(type))}`);
      }
      set.add(listener);
    },
    removeEventListener(type: string, listener: Listener | null) {
      const set = listeners.get(type);
      if (!set || !listener) return;
      set.delete(listener);
      if (!set.size) {
        listeners.delete(type);
        if (client && !closed) void onListener(client, `UNLISTEN ${quote(channelOf(type))}`);
      }
    },
    // This process's listeners hear it at once, the other processes' through PostgreSQL. The detail
    // is bufferedPubSub's copy already, what the other processes read.
    dispatchEvent(event: CustomEvent) {
      queued.push({ channel: channelOf(event.type), payload: marked(event.detail ?? null, origin), type: event.type });
      dispatchLocal(event.type, event.detail ?? null);
      sendQueued();
      return true;
    },
    async close() {
      closed = true;
      const c = client;
      client = null;
      await c?.end().catch(() => undefined);
      while (sending) await sending; // what was published before close() is sent
      await notifier.end();
    },
  } as PubSubEventTarget<Topics> & { close(): Promise<void>; ready: Promise<void>; listening(): Promise<void> };
}

/** Events that cross server processes through PostgreSQL. */
export function createPgEvents(connectionString: string, log: Logger): Events {
  const target = createPgEventTarget(connectionString, log);
  const pubsub = bufferedPubSub(target, log);
  pubsub.close = () => target.close();
  pubsub.listening = () => target.listening();
  return pubsub;
}
