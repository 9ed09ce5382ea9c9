/**
 * Cost (docs/operating/pools.md, "Cost"), in its one home, shared by the SQL that sums a pool's month
 * (storage/pool-runtime.ts), the API, the pages and the metrics: the price of an instance-hour, what
 * an instance cost, the part of it in a calendar month, what it commits its pool's budget to, and a
 * work request's share. Prices are in the
 * site's currency, per hour; billing by period is scale-in.ts's rule (billedSeconds). Pure and
 * table-tested (test/scheduler/rules/cost.test.ts).
 */
import { billedSeconds, billedSecondsSql } from './scale-in.js';

/** The highest price per hour accepted (a pool's or an offering's). */
export const MAX_PRICE_PER_HOUR = 1e6;

/**
 * The smallest price per hour above 0 accepted: a price nearer 0 than any real one would make
 * PostgreSQL's arithmetic underflow (an error) where the month's cost is summed.
 */
export const MIN_PRICE_PER_HOUR = 1e-9;

/** Whether a price per hour is in range: 0, or from MIN_PRICE_PER_HOUR to MAX_PRICE_PER_HOUR (the input schemas refine with it). */
export const isPricePerHour = (v: number): boolean =>
  Number.isFinite(v) && (v === 0 || (v >= MIN_PRICE_PER_HOUR && v <= MAX_PRICE_PER_HOUR));

/** What {@link isPricePerHour} says to a bad price. */
export const PRICE_PER_HOUR_RANGE = `must be 0 or from ${MIN_PRICE_PER_HOUR} to ${MAX_PRICE_PER_HOUR}`;

/**
 * The smallest spot maximum price per hour accepted: EC2 takes it as a decimal string, which a smaller
 * number would not print as (JavaScript writes 1e-7).
 */
export const MIN_SPOT_MAX_PRICE = 0.0001;

/** The highest monthly cost budget accepted. */
export const MAX_MONTHLY_COST_BUDGET = 1e12;

/**
 * The price per hour of an instance launched from `offering` of a pool priced `poolPrice`: the
 * offering's own price (the admin's word wins); else the price the provider's API gave for what it
 * started (`providerPrice`: Hetzner's); else, for a spot offering, its maxPricePerHour (an upper bound:
 * the spot price paid is at most that); else the pool's. Null when none is known.
 */
export function launchPrice(
  offering:
    | { readonly market: string; readonly maxPricePerHour: number | null; readonly pricePerHour?: number | null }
    | null
    | undefined,
  poolPrice: number | null,
  providerPrice: number | null = null,
): number | null {
  if (offering?.pricePerHour != null) return offering.pricePerHour;
  // A provider's price out of the range the input accepts (none is, really) is not taken.
  if (providerPrice != null && isPricePerHour(providerPrice)) return providerPrice;
  if (offering?.market === 'spot' && offering.maxPricePerHour != null && isPricePerHour(offering.maxPricePerHour))
    return offering.maxPricePerHour;
  return poolPrice ?? null;
}

/**
 * The price per hour a pool's next launch is recorded at (services/pools/instances.ts: recordLaunch),
 * before its provider says which offering started it: {@link launchPrice} of the first of its
 * offerings as they are stored (services/pools/pool-specifications.ts keeps them as
 * providers/offerings.ts reads them), else the pool's. Demand reckons the budget's room with it.
 */
export function nextLaunchPrice(pool: {
  readonly specifications?: Readonly<Record<string, unknown>>;
  readonly pricePerHour?: number | null;
}): number | null {
  const list = pool.specifications?.offerings;
  const first =
    Array.isArray(list) && list[0] && typeof list[0] === 'object' ? (list[0] as Record<string, unknown>) : null;
  const num = (v: unknown) => (typeof v === 'number' ? v : null);
  const offering = first
    ? {
        market: first.market === 'spot' ? 'spot' : 'on-demand',
        maxPricePerHour: num(first.maxPricePerHour),
        pricePerHour: num(first.pricePerHour),
      }
    : null;
  return launchPrice(offering, pool.pricePerHour ?? null);
}

/** The price an instance is costed at: the one it was launched at, else (launched before its pool had one) its pool's now. */
export function instancePrice(instancePricePerHour: number | null, poolPricePerHour: number | null): number | null {
  return instancePricePerHour ?? poolPricePerHour ?? null;
}

/** {@link instancePrice} in SQL, of the instance's and the pool's table aliases. */
export const instancePriceSql = (instance: string, pool: string): string =>
  `coalesce(${instance}.price_per_hour, ${pool}.price_per_hour)`;

const seconds = (from: Date, to: Date) => (to.getTime() - from.getTime()) / 1000;

/** What an instance cost from its request to `end` (its termination, or now): price × billed hours; null without a price. */
export function instanceCost(
  pricePerHour: number | null,
  requestedAt: Date,
  end: Date,
  billingPeriodSeconds: number | null | undefined,
): number | null {
  if (pricePerHour == null) return null;
  return (pricePerHour * billedSeconds(seconds(requestedAt, end), billingPeriodSeconds)) / 3600;
}

/** The start of the calendar month (UTC) `now` is in. */
export function monthStartUtc(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/**
 * The part of an instance's cost that falls in the month starting at `monthStart`: what it cost up to
 * `end` less what it cost up to the month's start; billed by period, a period counts in the month it
 * started in. 0 without a price or when it ended before the month.
 */
export function costInMonth(
  pricePerHour: number | null,
  requestedAt: Date,
  end: Date,
  monthStart: Date,
  billingPeriodSeconds: number | null | undefined,
): number {
  if (pricePerHour == null || end.getTime() <= monthStart.getTime()) return 0;
  const from = requestedAt.getTime() > monthStart.getTime() ? requestedAt : monthStart;
  return (
    (pricePerHour *
      (billedSeconds(seconds(requestedAt, end), billingPeriodSeconds) -
        billedSeconds(seconds(requestedAt, from), billingPeriodSeconds))) /
    3600
  );
}

/**
 * {@link costInMonth} in SQL, summed by the caller: `end` and `monthStart` are SQL expressions, `i` the
 * instance's alias and `p` its pool's.
 */
export function costInMonthSql(i: string, p: string, end: string, monthStart: string): string {
  const billed = (s: string) => billedSecondsSql(`extract(epoch from ${s})`, `${p}.billing_period_seconds`);
  const cost = `${instancePriceSql(i, p)} * (${billed(`${end} - ${i}.requested_at`)} - ${billed(`greatest(${i}.requested_at, ${monthStart}) - ${i}.requested_at`)}) / 3600`;
  return `(case when ${end} > ${monthStart} then coalesce(${cost}, 0) else 0 end)`;
}

/** A launch's first charge, for a pool billed by the second: one hour, the unit prices are given in. */
export const FIRST_CHARGE_SECONDS = 3600;

/**
 * What starting an instance commits its pool's budget to: one billing period of its price, or
 * {@link FIRST_CHARGE_SECONDS} for a pool billed by the second; 0 without a price.
 */
export function firstCharge(pricePerHour: number | null, billingPeriodSeconds: number | null | undefined): number {
  if (pricePerHour == null) return 0;
  return (pricePerHour * (billingPeriodSeconds || FIRST_CHARGE_SECONDS)) / 3600;
}

/**
 * An instance's part of its pool's **committed cost**, what `monthlyCostBudget` limits
 * (pool-capacity.ts: underCostBudget): its cost in the month ({@link costInMonth}), but, while it lives
 * (not TERMINATED nor FAILED) and was launched in the month, at least its {@link firstCharge}: a launch
 * counts against the budget from the moment it is recorded, not only as its runtime adds up.
 */
export function committedCostInMonth(
  pricePerHour: number | null,
  requestedAt: Date,
  end: Date,
  monthStart: Date,
  billingPeriodSeconds: number | null | undefined,
  live: boolean,
): number {
  const cost = costInMonth(pricePerHour, requestedAt, end, monthStart, billingPeriodSeconds);
  return live && requestedAt.getTime() >= monthStart.getTime()
    ? Math.max(cost, firstCharge(pricePerHour, billingPeriodSeconds))
    : cost;
}

/**
 * {@link committedCostInMonth} in SQL, summed by the caller (storage/pool-runtime.ts): as
 * {@link costInMonthSql}; an instance lives while its `terminated_at` is null.
 */
export function committedCostInMonthSql(i: string, p: string, end: string, monthStart: string): string {
  const cost = costInMonthSql(i, p, end, monthStart);
  const first = `(coalesce(${instancePriceSql(i, p)}, 0) * coalesce(nullif(${p}.billing_period_seconds, 0), ${FIRST_CHARGE_SECONDS}) / 3600)`;
  return `(case when ${i}.terminated_at is null and ${i}.requested_at >= ${monthStart} then greatest(${cost}, ${first}) else ${cost} end)`;
}

/**
 * A work request's share of its instance's cost: the price per hour × its run time on the instance
 * (from its start to its completion, or now) ÷ the worker's concurrency (the requests it runs at once
 * share the machine). Billing periods are not shared out. Null without a price or before it started.
 */
export function workRequestCost(
  pricePerHour: number | null,
  startedAt: Date | null,
  end: Date,
  concurrency: number,
): number | null {
  if (pricePerHour == null || startedAt == null) return null;
  return (pricePerHour * Math.max(0, seconds(startedAt, end))) / 3600 / Math.max(1, concurrency);
}

/** An amount in words for pages and the CLI: two decimals, four below 0.01 (prices per hour of small machines are that small). */
export function formatCost(amount: number): string {
  if (amount === 0) return '0';
  return Math.abs(amount) < 0.01 ? amount.toFixed(4) : amount.toFixed(2);
}
