import { createPubSub, Repeater, SlidingBuffer, type PubSub, type PubSubEventTarget } from 'graphql-yoga';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { WorkRequestStatus } from '../core/work-request-status.js';
import type { Logger } from '../core/log.js';
import { PG_KEEPALIVE } from './orm.js';

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
  /** A process gave up the lease of a duty (loops/leadership.ts): the processes that follow it try to take it at once. */
  leaseReleased: [{ duty: string }];
};

/**
 * The pub/sub every operation publishes to. `listening` (cross-process events only) resolves when
 * every subscription opened so far also hears the other processes: call it after a stream's first
 * next() (which is what subscribes) and before reading the state the stream will keep current.
 */
export type Events = PubSub<Topics> & {
  close?: () => Promise<void>;
  listening?: () => Promise<void>;
  /**
   * Whether a payload a subscription handed over was published by another process (heard through
   * PostgreSQL), not by this one; false for every payload of in-process events.
   */
  fromAnotherProcess?: (payload: unknown) => boolean;
};

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

/**
 * The channels: one per topic, `tagsched:topic:<topic>`; an event's routing key (a worker's id, a
 * request's) travels in its notification. A process LISTENs to a topic's channel while one of its
 * subscriptions wants any event of that topic, and hands each event to the subscriptions of its key.
 */
const CHANNEL_PREFIX = 'tagsched:topic:';
const RECONNECT_MS = { first: 250, max: 5_000 } as const;
/**
 * How long the listening and publishing connections wait for PostgreSQL to accept them. Without a
 * bound, an attempt made while the server shuts down (a restart) can wait for ever, and the process
 * then hears no other process's events again.
 */
const CONNECT_TIMEOUT_MS = 10_000;
/** The longest payload NOTIFY takes, in bytes: PostgreSQL refuses 8000 or more (NOTIFY_PAYLOAD_MAX_LENGTH at its default block size). */
export const NOTIFY_PAYLOAD_MAX_BYTES = 7_999;
/**
 * The largest event (its routing key and payload, as JSON) sent to the other processes, in bytes: one
 * longer than a notification takes goes in fragments, each a notification of its own; one longer than
 * this is refused alone, with a warning, and only this process's listeners hear it.
 */
export const EVENT_MAX_BYTES = 1024 * 1024;
/**
 * Topics whose events come at a high rate and only wake their readers up (each reader then reads what is
 * new from where it stands: followLog in api/schema/job-output.ts), with how long, in milliseconds, what
 * this process publishes of them is held before it goes to the other processes: the newest event of each
 * routing key in that time, together in as few notifications as they fit in. Listeners in this process
 * hear each event at once.
 */
export const COALESCED_TOPICS: Readonly<Partial<Record<keyof Topics, number>>> = { workRequestLogAppended: 50 };

type Listener = EventListenerOrEventListenerObject;

/** The event target through PostgreSQL (createPgEventTarget). */
export type PgEventTarget = PubSubEventTarget<Topics> & {
  close(): Promise<void>;
  ready: Promise<void>;
  listening(): Promise<void>;
  fromAnotherProcess(payload: unknown): boolean;
};

/** Where the events' connections go: `session` for LISTEN (a session: PostgreSQL itself, or a pooler in session mode), `pool` for NOTIFY. */
export interface PgEventUrls {
  readonly pool: string;
  readonly session: string;
}

/** An event on its way to the other processes: its topic's channel and, as JSON, `[routing key or null, payload]`. */
interface Outgoing {
  readonly topic: string;
  readonly channel: string;
  readonly entry: string;
}

/** An event's type as yoga names it (`topic` or `topic:routing key`), cut into the two. */
function topicAndKey(type: string): [topic: string, key: string | null] {
  const at = type.indexOf(':');
  return at < 0 ? [type, null] : [type.slice(0, at), type.slice(at + 1)];
}

/** The name of a topic's channel. */
function channelOf(topic: string): string {
  const channel = CHANNEL_PREFIX + topic;
  if (Buffer.byteLength(channel) > 63) throw new Error(`event channel too long: ${channel}`);
  return channel;
}

const quote = (channel: string) => `"${channel.replace(/"/g, '""')}"`;

/**
 * `text` cut into pieces each of which, as a JSON string, takes at most `budget` bytes (a piece may end
 * between the two halves of a surrogate pair: JSON carries each half, and joining the pieces makes the pair again).
 */
function piecesOf(text: string, budget: number): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < text.length;) {
    let length = Math.min(text.length - at, budget);
    for (;;) {
      const bytes = Buffer.byteLength(JSON.stringify(text.slice(at, at + length)));
      if (bytes <= budget) break;
      length = Math.max(1, Math.min(length - 1, Math.floor((length * budget) / bytes)));
    }
    pieces.push(text.slice(at, at + length));
    at += length;
  }
  return pieces;
}

/**
 * The notifications that carry `batch` to the other processes, in its order. A notification's payload is
 * `{"o": origin, "e": [[key, payload], …]}`: the consecutive events of one channel, as many as fit in one
 * (NOTIFY_PAYLOAD_MAX_BYTES). An event that fits in none goes alone in fragments, `{"o": origin, "f":
 * [id, index, count, piece of its JSON]}`, consecutive, one fragment id each (`fragmentId`).
 */
function notificationsOf(
  batch: readonly Outgoing[],
  origin: string,
  fragmentId: () => number,
): { channel: string; payload: string }[] {
  const out: { channel: string; payload: string }[] = [];
  const head = `{"o":${JSON.stringify(origin)},"e":[`;
  const tail = ']}';
  const framing = Buffer.byteLength(head) + tail.length;
  let run: { channel: string; entries: string[]; bytes: number } | null = null;
  const flush = () => {
    if (run) out.push({ channel: run.channel, payload: head + run.entries.join(',') + tail });
    run = null;
  };
  for (const event of batch) {
    const bytes = Buffer.byteLength(event.entry);
    if (run && run.channel === event.channel && run.bytes + 1 + bytes <= NOTIFY_PAYLOAD_MAX_BYTES) {
      run.entries.push(event.entry);
      run.bytes += 1 + bytes;
      continue;
    }
    flush();
    if (framing + bytes <= NOTIFY_PAYLOAD_MAX_BYTES) {
      run = { channel: event.channel, entries: [event.entry], bytes: framing + bytes };
      continue;
    }
    const id = fragmentId();
    // Room for the fragment's numbers: an id, an index and a count of up to 15 digits each.
    const fragmentHead = `{"o":${JSON.stringify(origin)},"f":[`;
    const budget = NOTIFY_PAYLOAD_MAX_BYTES - Buffer.byteLength(fragmentHead) - 3 * 16 - tail.length;
    const pieces = piecesOf(event.entry, budget);
    pieces.forEach((piece, index) =>
      out.push({
        channel: event.channel,
        payload: `${fragmentHead}${id},${index},${pieces.length},${JSON.stringify(piece)}${tail}`,
      }),
    );
  }
  flush();
  return out;
}

/**
 * A yoga event target on PostgreSQL LISTEN/NOTIFY, so that events cross server processes: one
 * dedicated listening connection on the session URL that reconnects with backoff (and LISTENs again)
 * when PostgreSQL restarts, and one connection for NOTIFY on the pool's URL (kept in order), both with
 * TCP keepalives. Events go on one channel per topic, their routing keys in the payloads; the
 * events published close together go in one statement, those of one topic in a row packed into one
 * notification as far as they fit, those of the coalesced topics (COALESCED_TOPICS) held a moment and
 * folded by routing key; an event longer than a notification goes in fragments, and one longer than
 * EVENT_MAX_BYTES is refused alone (logged), never taking the others with it.
 * An event published here reaches this process's own listeners at once, not after a round trip
 * through PostgreSQL (for a push to a worker connected here, that round trip was a millisecond or
 * more of its latency); its notification, marked with the process's own random id, is passed over
 * when it comes back. The listeners of either hear a copy of the payload, as JSON makes it (bufferedPubSub).
 */
export function createPgEventTarget(urls: string | PgEventUrls, log: Logger): PgEventTarget {
  const { pool: poolUrl, session: sessionUrl } = typeof urls === 'string' ? { pool: urls, session: urls } : urls;
  const listeners = new Map<string, Set<Listener>>();
  // Each topic some listener here wants, with how many event types (routing keys) of it have listeners.
  const topics = new Map<string, number>();
  // One publishing connection: NOTIFYs sent on it are delivered in the order they were published, so
  // every process hears a process's events in that order (two pooled connections could swap them).
  const notifier = new pg.Pool({
    connectionString: poolUrl,
    max: 1,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...PG_KEEPALIVE,
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
  let queued: Outgoing[] = [];
  let sending: Promise<void> | null = null;
  let fragments = 0;
  const sendQueued = (): void => {
    if (sending || !queued.length) return;
    const batch = queued;
    queued = [];
    const notes = notificationsOf(batch, origin, () => ++fragments);
    const sql =
      notes.length === 1
        ? notifier.query('select pg_notify($1, $2)', [notes[0].channel, notes[0].payload])
        : notifier.query(
            'select pg_notify(e.channel, e.payload) from unnest($1::text[], $2::text[]) as e(channel, payload)',
            [notes.map((n) => n.channel), notes.map((n) => n.payload)],
          );
    sending = sql
      .then(
        () => undefined,
        (err: Error) =>
          log.warn(
            { err: err.message, types: [...new Set(batch.map((b) => b.topic))], events: batch.length },
            'event not published',
          ),
      )
      .finally(() => {
        sending = null;
        sendQueued();
      });
  };
  // The events of coalesced topics held until their topic's timer, the newest of each type (routing key).
  const held = new Map<string, Map<string, Outgoing>>();
  const holding = new Map<string, NodeJS.Timeout>();
  const release = (topic: string): void => {
    clearTimeout(holding.get(topic));
    holding.delete(topic);
    const events = held.get(topic);
    held.delete(topic);
    if (events) queued.push(...events.values());
    sendQueued();
  };
  const enqueue = (type: string, detail: unknown): void => {
    const [topic, key] = topicAndKey(type);
    const event: Outgoing = { topic, channel: channelOf(topic), entry: JSON.stringify([key, detail]) };
    const bytes = Buffer.byteLength(event.entry);
    if (bytes > EVENT_MAX_BYTES) {
      log.warn(
        { type: topic, bytes, maxBytes: EVENT_MAX_BYTES },
        'event too large for the other processes: only this one heard it',
      );
      return;
    }
    const window = COALESCED_TOPICS[topic as keyof Topics];
    if (!window) {
      queued.push(event);
      sendQueued();
      return;
    }
    let events = held.get(topic);
    if (!events) held.set(topic, (events = new Map()));
    events.delete(type); // the newest goes last
    events.set(type, event);
    if (!holding.has(topic))
      holding.set(
        topic,
        setTimeout(() => release(topic), window),
      );
  };

  let delay: number = RECONNECT_MS.first;

  // Every listener hears the event, whatever one of them throws.
  const dispatchLocal = (type: string, detail: unknown) => {
    const set = listeners.get(type);
    if (!set) return;
    const event = new CustomEvent(type, { detail });
    for (const l of set) {
      try {
        if (typeof l === 'function') l(event);
        else l.handleEvent(event);
      } catch (err) {
        log.error({ err, type }, 'event listener failed');
      }
    }
  };
  const dispatchEntry = (topic: string, entry: unknown): void => {
    if (!Array.isArray(entry) || entry.length !== 2 || (entry[0] !== null && typeof entry[0] !== 'string'))
      throw new Error('not an event');
    const [key, detail] = entry as [string | null, unknown];
    if (detail !== null && typeof detail === 'object') heard.add(detail);
    dispatchLocal(key === null ? topic : `${topic}:${key}`, detail);
  };
  // The payloads heard from the other processes (fromAnotherProcess), for as long as a reader holds them.
  const heard = new WeakSet<object>();
  // An event in fragments being put together, per publishing process: its fragments come in a row.
  let partial = new Map<string, { id: number; count: number; pieces: string[] }>();
  const onFragment = (topic: string, from: string, fragment: unknown): void => {
    const [id, index, count, piece] = Array.isArray(fragment) ? (fragment as unknown[]) : [];
    if (
      !Number.isSafeInteger(id) ||
      !Number.isSafeInteger(index) ||
      !Number.isSafeInteger(count) ||
      typeof piece !== 'string'
    )
      throw new Error('not an event fragment');
    if (index === 0) partial.set(from, { id: id as number, count: count as number, pieces: [] });
    const p = partial.get(from);
    if (!p || p.id !== id || p.count !== count || p.pieces.length !== index) {
      partial.delete(from);
      log.warn({ type: topic }, 'an event came with fragments missing: it is passed over');
      return;
    }
    p.pieces.push(piece);
    if (p.pieces.length < p.count) return;
    partial.delete(from);
    dispatchEntry(topic, JSON.parse(p.pieces.join('')));
  };
  const onNotification = (msg: pg.Notification): void => {
    if (!msg.channel.startsWith(CHANNEL_PREFIX)) return;
    const topic = msg.channel.slice(CHANNEL_PREFIX.length);
    try {
      const note = JSON.parse(msg.payload ?? 'null') as { o?: unknown; e?: unknown; f?: unknown } | null;
      if (note === null || typeof note !== 'object' || typeof note.o !== 'string') throw new Error('not an event');
      if (note.o === origin) return; // heard when it was published
      if (note.f !== undefined) return onFragment(topic, note.o, note.f);
      if (!Array.isArray(note.e)) throw new Error('not an event');
      for (const entry of note.e) dispatchEntry(topic, entry);
    } catch (err) {
      log.error({ err, channel: msg.channel }, 'bad event payload');
    }
  };

  async function connect(): Promise<void> {
    const c = new pg.Client({
      connectionString: sessionUrl,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      ...PG_KEEPALIVE,
    });
    c.on('notification', onNotification);
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
    partial = new Map(); // fragments heard on the connection before are not followed by theirs
    for (const topic of topics.keys()) await onListener(c, `LISTEN ${quote(channelOf(topic))}`);
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
    fromAnotherProcess: (payload: unknown) => payload !== null && typeof payload === 'object' && heard.has(payload),
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
        const [topic] = topicAndKey(type);
        const types = (topics.get(topic) ?? 0) + 1;
        topics.set(topic, types);
        if (types === 1 && client) void onListener(client, `LISTEN ${quote(channelOf(topic))}`);
      }
      set.add(listener);
    },
    removeEventListener(type: string, listener: Listener | null) {
      const set = listeners.get(type);
      if (!set || !listener) return;
      set.delete(listener);
      if (set.size) return;
      listeners.delete(type);
      const [topic] = topicAndKey(type);
      const types = (topics.get(topic) ?? 1) - 1;
      if (types > 0) return void topics.set(topic, types);
      topics.delete(topic);
      if (client && !closed) void onListener(client, `UNLISTEN ${quote(channelOf(topic))}`);
    },
    // This process's listeners hear it at once, the other processes' through PostgreSQL. The detail
    // is bufferedPubSub's copy already, what the other processes read.
    dispatchEvent(event: CustomEvent) {
      enqueue(event.type, event.detail ?? null);
      dispatchLocal(event.type, event.detail ?? null);
      return true;
    },
    async close() {
      closed = true;
      const c = client;
      client = null;
      await c?.end().catch(() => undefined);
      for (const topic of [...holding.keys()]) release(topic); // what was published before close() is sent
      while (sending) await sending;
      await notifier.end();
    },
  } as PgEventTarget;
}

/**
 * Events that cross server processes through PostgreSQL: `urls` a URL for both connections, or the
 * pool's URL (NOTIFY) and the session URL (LISTEN) apart (createPgEventTarget).
 */
export function createPgEvents(urls: string | PgEventUrls, log: Logger): Events {
  const target = createPgEventTarget(urls, log);
  const pubsub = bufferedPubSub(target, log);
  pubsub.close = () => target.close();
  pubsub.listening = () => target.listening();
  pubsub.fromAnotherProcess = target.fromAnotherProcess;
  return pubsub;
}

/**
 * Whether a LISTEN on `session` hears, within `timeoutMs`, a NOTIFY that `notify` sends on another
 * connection (the pool's), on a channel of its own (its LISTEN is undone after). It does not when the
 * session goes through a transaction pooler (PgBouncer in transaction mode runs each statement on any
 * of its server connections: the one that ran LISTEN is soon another client's, or idle), nor when the
 * two connections are to different databases.
 */
export async function listenHearsNotify(
  session: pg.Client,
  notify: (channel: string, payload: string) => Promise<unknown>,
  timeoutMs: number,
): Promise<boolean> {
  const channel = `tagsched:check:${randomUUID()}`;
  const payload = randomUUID();
  let heard = (): void => undefined;
  const got = new Promise<boolean>((resolve) => (heard = () => resolve(true)));
  const onNotification = (msg: pg.Notification) => {
    if (msg.channel === channel && msg.payload === payload) heard();
  };
  let timer: NodeJS.Timeout | undefined;
  session.on('notification', onNotification);
  try {
    await session.query(`LISTEN ${quote(channel)}`);
    await notify(channel, payload);
    return await Promise.race([
      got,
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
  } finally {
    clearTimeout(timer);
    session.off('notification', onNotification);
    await session.query(`UNLISTEN ${quote(channel)}`).catch(() => undefined);
  }
}
