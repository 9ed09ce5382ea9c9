/**
 * When a pool stops idle instances and how fast it launches (docs/operating/pools.md, "Scale-in and
 * warm capacity"), in its one home, shared by demand (which decides) and the pool's page (which
 * shows): billing-aware stops, a scale-down delay after a launch, a launch rate limit, and warm
 * capacity by schedule. Pure and table-tested (test/scheduler/rules/scale-in.test.ts).
 */

/** A warm schedule holds at most this many periods. */
export const WARM_PERIODS_MAX = 50;

/** An idle instance of a pool billed by period is stopped only in the last this many seconds of its paid period (stopWindowSeconds). */
export const BILLING_STOP_WINDOW_SECONDS = 300;

/**
 * The shortest stop window: a periodic provisioner cycle (every 30 s by default) must fall in it,
 * whatever the phase of the instance's period, or an idle instance would never be stopped.
 */
export const MIN_STOP_WINDOW_SECONDS = 60;

export { WEEKDAYS, type Weekday, type WarmPeriod, type WarmSchedule } from '../../shared/warm-schedule.js';
import type { Weekday, WarmSchedule } from '../../shared/warm-schedule.js';

/** What of a pool these rules read. */
export interface ScaleInPolicy {
  readonly minIdleInstances: number;
  readonly billingPeriodSeconds?: number | null;
  readonly scaleDownDelaySeconds?: number | null;
  readonly maxLaunchesPerMinute?: number | null;
  readonly warmSchedule?: WarmSchedule | null;
}

/** Seconds left in the paid period of an instance created at `createdAt` (a new period starts at every multiple of `periodSeconds`). */
export function paidPeriodLeft(createdAt: Date, periodSeconds: number, now: Date): number {
  const age = Math.max(0, (now.getTime() - createdAt.getTime()) / 1000);
  return periodSeconds - (age % periodSeconds);
}

/**
 * The seconds billed for `seconds` of runtime (the billing rule pool-cost.ts prices with): by the second, or,
 * for a pool billed by period, every started period in full: a period is paid when it starts, so
 * between two period starts this is the age plus {@link paidPeriodLeft}.
 */
export function billedSeconds(seconds: number, periodSeconds: number | null | undefined): number {
  const s = Math.max(0, seconds);
  return periodSeconds ? Math.ceil(s / periodSeconds) * periodSeconds : s;
}

/** {@link billedSeconds} in SQL, of an expression in seconds and one of the period (null: by the second). */
export function billedSecondsSql(seconds: string, periodSeconds: string): string {
  return `(case when ${periodSeconds} is null then greatest(${seconds}, 0) else ceil(greatest(${seconds}, 0) / ${periodSeconds}) * ${periodSeconds} end)`;
}

/**
 * The stop window of a billing period: the last BILLING_STOP_WINDOW_SECONDS, or the last tenth of a
 * shorter period, but at least MIN_STOP_WINDOW_SECONDS, and at most half the period (periods of 60 to
 * 119 s: a window of 30 s or more, which one of two cycles 30 s apart falls in).
 */
export function stopWindowSeconds(periodSeconds: number): number {
  return Math.min(
    periodSeconds / 2,
    Math.max(MIN_STOP_WINDOW_SECONDS, Math.min(BILLING_STOP_WINDOW_SECONDS, periodSeconds / 10)),
  );
}

/** Minutes since midnight of "HH:MM" (24:00 allowed), or null when malformed. */
export function minutesOf(hhmm: string): number | null {
  const m = /^([01]\d|2[0-4]):([0-5]\d)$/.exec(hhmm);
  if (!m) return null;
  const minutes = Number(m[1]) * 60 + Number(m[2]);
  return minutes <= 24 * 60 ? minutes : null;
}

/** The weekday and minute of day of `now` in `timeZone` (daylight saving time included, by Intl). */
export function localTime(now: Date, timeZone: string): { day: Weekday; minute: number } {
  const parts = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(now);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return {
    day: get('weekday').toUpperCase().slice(0, 3) as Weekday,
    minute: Number(get('hour')) * 60 + Number(get('minute')),
  };
}

/** Whether `timeZone` is one Intl knows (an IANA name such as Europe/Berlin, or UTC). */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-GB', { timeZone });
    return true;
  } catch {
    return false;
  }
}

/** The instances a pool keeps idle now: the largest of the periods it is in, else its minIdleInstances. */
export function minIdleNow(pool: Pick<ScaleInPolicy, 'minIdleInstances' | 'warmSchedule'>, now: Date): number {
  const schedule = pool.warmSchedule;
  if (!schedule?.periods.length) return pool.minIdleInstances;
  const { day, minute } = localTime(now, schedule.timeZone);
  const inPeriod = schedule.periods.filter(
    (p) => p.days.includes(day) && minute >= (minutesOf(p.from) ?? 0) && minute < (minutesOf(p.to) ?? 0),
  );
  return inPeriod.length ? Math.max(...inPeriod.map((p) => p.minIdleInstances)) : pool.minIdleInstances;
}

/** Why an idle instance past the idle timeout is not stopped yet; null when it may be stopped now. */
export type StopHold = 'SCALE_DOWN_DELAY' | 'PAID_PERIOD';

/**
 * Whether an idle instance past its idle timeout may be stopped now: not within the pool's
 * scale-down delay after its last launch, and, for a pool billed by period, only in the stop window
 * at the end of the instance's paid period (stopping earlier saves nothing).
 */
export function stopHold(
  pool: Pick<ScaleInPolicy, 'billingPeriodSeconds' | 'scaleDownDelaySeconds'>,
  createdAt: Date | null,
  lastLaunchAt: Date | null,
  now: Date,
): StopHold | null {
  if (
    pool.scaleDownDelaySeconds &&
    lastLaunchAt &&
    now.getTime() - lastLaunchAt.getTime() < pool.scaleDownDelaySeconds * 1000
  )
    return 'SCALE_DOWN_DELAY';
  if (
    pool.billingPeriodSeconds &&
    createdAt &&
    paidPeriodLeft(createdAt, pool.billingPeriodSeconds, now) > stopWindowSeconds(pool.billingPeriodSeconds)
  )
    return 'PAID_PERIOD';
  return null;
}

/** The order idle instances are stopped in: nearest the end of its paid period first (when billed by period), else idle longest first. */
export function stopOrder(pool: Pick<ScaleInPolicy, 'billingPeriodSeconds'>, now: Date) {
  return (
    a: { createdAt: Date | null; idleSince: Date | null },
    b: { createdAt: Date | null; idleSince: Date | null },
  ): number => {
    if (pool.billingPeriodSeconds && a.createdAt && b.createdAt) {
      const d =
        paidPeriodLeft(a.createdAt, pool.billingPeriodSeconds, now) -
        paidPeriodLeft(b.createdAt, pool.billingPeriodSeconds, now);
      if (d) return d;
    }
    return (a.idleSince?.getTime() ?? 0) - (b.idleSince?.getTime() ?? 0);
  };
}

/** How many launches the pool's rate limit leaves it this minute (Infinity without one). */
export function rateRoom(pool: Pick<ScaleInPolicy, 'maxLaunchesPerMinute'>, launchesLastMinute: number): number {
  return pool.maxLaunchesPerMinute == null ? Infinity : Math.max(0, pool.maxLaunchesPerMinute - launchesLastMinute);
}
