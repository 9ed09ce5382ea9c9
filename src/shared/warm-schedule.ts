/**
 * The shape of a pool's warm capacity by schedule (scheduler/rules/scale-in.ts says what it means): shared by
 * the pool's row, the API and the rule, without the ORM.
 */

/** The weekdays of a warm-capacity period, as the API names them. */
export const WEEKDAYS = ['MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT', 'SUN'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** A time of day when a pool keeps more instances idle (src/scheduler/rules/scale-in.ts): on these days, from `from` to `to` (HH:MM, local time of the schedule's zone, `to` up to 24:00). */
export interface WarmPeriod {
  readonly days: readonly Weekday[];
  readonly from: string;
  readonly to: string;
  readonly minIdleInstances: number;
}

/** A pool's warm capacity by schedule: its periods, in one IANA time zone. */
export interface WarmSchedule {
  readonly timeZone: string;
  readonly periods: readonly WarmPeriod[];
}

/** A template for dynamic workers on a provider, with tags, limits and an encrypted provider account. */
