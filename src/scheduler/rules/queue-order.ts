/**
 * The queue order of docs/design.md: scheduler with fair share between workspaces (docs/design.md: placement quality), in its one home: the
 * SQL every queue query orders by (queueOrderSql, headsOrderSql), the comparison of two requests in
 * SQL (aheadInQueueSql) and in TypeScript (queueBefore, queueRuleBetween), and the reasons one
 * request is ahead of another (QUEUE_RULES). test/scheduler/rules/queue-order.test.ts checks that the
 * two forms agree.
 *
 * Fair share is a virtual clock: every request gets a fair key when it is written, in milliseconds. A
 * workspace's clock starts at the time of its submission when it has nothing queued (no BLOCKED or
 * PENDING request: what it submitted before and was served leaves no debt), and each request it
 * submits moves its clock on by one quantum (storage/fair-keys.ts writes it). The queue order at equal
 * priority is by fair key, so a workspace that submitted a backlog has keys far in the future, and a
 * request another workspace submits later gets a key near now: it is served interleaved with the
 * backlog, not after it. Within one workspace keys grow with submission, so its own requests keep
 * their submission order.
 */

/** How far one request moves its workspace's fair clock, in milliseconds. */
export const FAIR_QUANTUM_MS = 1000;

/**
 * A request's effective priority (base + adjustment) over a work_request alias: the first key of the
 * queue order, written as the queue indexes have it so that they serve every query that uses it.
 */
export const effectivePrioritySql = (w: string) => `${w}.priority_base + ${w}.priority_adjustment`;

/**
 * The queue order over a work_request alias: effective priority descending, then fair key, then
 * oldest, then id. Every queue query (pass, pull, placement) orders by it, and the partial index
 * `work_request_pending_class_order` has the same columns.
 */
export const queueOrderSql = (w: string) => `${effectivePrioritySql(w)} desc, ${w}.fair_key, ${w}.created_at, ${w}.id`;

/**
 * Whether the request `o` comes before the request `r` in {@link queueOrderSql}'s order (both
 * work_request aliases): a higher effective priority, or the same and then an earlier fair key, an
 * earlier creation, a lower id. storage/queue-position.ts counts by it and names which of the columns decided.
 */
export const aheadInQueueSql = (o: string, r: string) =>
  `(${effectivePrioritySql(o)} > ${effectivePrioritySql(r)}
    or (${effectivePrioritySql(o)} = ${effectivePrioritySql(r)}
        and (${o}.fair_key, ${o}.created_at, ${o}.id) < (${r}.fair_key, ${r}.created_at, ${r}.id)))`;

/** The same order over queue heads already selected with their effective priority as `prio` (storage/queue-heads.ts). */
export const headsOrderSql = (t: string) => `${t}.prio desc, ${t}.fair_key, ${t}.created_at, ${t}.id`;

/**
 * A request's place in the queue order: its effective priority, fair key (ms), creation (µs since the
 * epoch, all of PostgreSQL's precision) and id. The fair key and creation as bigints, or as numbers
 * where they are known to be exact (below 2^53: creations until the year 2255), which compare faster;
 * two keys compared are of the same kind.
 */
export interface QueueKey<N extends bigint | number = bigint> {
  readonly prio: number;
  readonly fairKey: N;
  readonly createdUs: N;
  readonly id: number;
}

/** Whether request `a` comes before request `b` in the queue order: exactly {@link queueOrderSql} and {@link aheadInQueueSql}. */
export function queueBefore<N extends bigint | number>(a: QueueKey<N>, b: QueueKey<N>): boolean {
  if (a.prio !== b.prio) return a.prio > b.prio;
  if (a.fairKey !== b.fairKey) return a.fairKey < b.fairKey;
  if (a.createdUs !== b.createdUs) return a.createdUs < b.createdUs;
  return a.id < b.id;
}

/** Why a pending request of the same class is ahead of another in the queue (docs/design.md: scheduler and placement quality), as data. */
export const QUEUE_RULES = {
  /** Its effective priority (base + adjustment) is higher. */
  HIGHER_PRIORITY: 'HIGHER_PRIORITY',
  /**
   * The same priority and an earlier fair key, though submitted after it: only its workspace's turn
   * (the fair clock) puts it ahead, typically another workspace's request next to this one's backlog.
   */
  FAIR_SHARE: 'FAIR_SHARE',
  /** The same priority, and submitted before it (or at the same instant with a lower id): ahead by age, whatever the workspaces. */
  AGE: 'AGE',
} as const;
export type QueueRule = (typeof QUEUE_RULES)[keyof typeof QUEUE_RULES];

/**
 * The rule that puts `o` ahead of `r` in the queue, or null when `o` is not ahead of it: a higher
 * priority; at equal priority, submitted later (fair share alone puts it ahead) or earlier (age).
 * storage/queue-position.ts counts the same in SQL.
 */
export function queueRuleBetween(o: QueueKey, r: QueueKey): QueueRule | null {
  if (!queueBefore(o, r)) return null;
  if (o.prio > r.prio) return QUEUE_RULES.HIGHER_PRIORITY;
  return o.createdUs > r.createdUs || (o.createdUs === r.createdUs && o.id > r.id)
    ? QUEUE_RULES.FAIR_SHARE
    : QUEUE_RULES.AGE;
}

/**
 * The SQL condition of each rule of {@link queueRuleBetween}, for a request `o` already known to be
 * ahead of `r` (aheadInQueueSql): used as count filters by storage/queue-position.ts.
 */
export const queueRuleSql = (o: string, r: string): Record<QueueRule, string> => ({
  HIGHER_PRIORITY: `${effectivePrioritySql(o)} > ${effectivePrioritySql(r)}`,
  FAIR_SHARE: `${effectivePrioritySql(o)} = ${effectivePrioritySql(r)} and (${o}.created_at, ${o}.id) > (${r}.created_at, ${r}.id)`,
  AGE: `${effectivePrioritySql(o)} = ${effectivePrioritySql(r)} and (${o}.created_at, ${o}.id) < (${r}.created_at, ${r}.id)`,
});

/** Where a pending request stands in the queue of its class: how many are ahead of it, by the rule that puts them there. */
export interface QueuePosition {
  /** Pending requests of its class ahead of it, all rules together. */
  readonly ahead: number;
  /** The same, per rule, in the order the rules apply (every rule, zero or not). */
  readonly aheadBy: readonly { readonly rule: QueueRule; readonly count: number }[];
}
