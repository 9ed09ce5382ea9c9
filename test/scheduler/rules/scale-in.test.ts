/**
 * Scale-in and warm capacity (src/scheduler/rules/scale-in.ts), table-driven: the time left in a paid
 * period, when an idle instance may stop (scale-down delay, billing period), which stops first, the
 * launch rate, and warm capacity by schedule, across a daylight saving time change.
 */
import { describe, expect, it } from 'vitest';
import {
  localTime,
  minIdleNow,
  minutesOf,
  paidPeriodLeft,
  rateRoom,
  stopHold,
  stopOrder,
  type WarmSchedule,
} from '../../../src/scheduler/rules/scale-in.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const ago = (s: number) => new Date(NOW.getTime() - s * 1000);

describe('scale-in', () => {
  it.each([
    [ago(0), 3600, 3600],
    [ago(600), 3600, 3000],
    [ago(3599), 3600, 1],
    [ago(3600), 3600, 3600], // a new hour has started, and is paid
    [ago(7000), 3600, 200],
  ])('created %s, billed by %i s: %i s left', (created, period, left) => {
    expect(paidPeriodLeft(created, period, NOW)).toBeCloseTo(left, 6);
  });

  it.each([
    ['no policy', {}, ago(10_000), ago(10_000), null],
    ['within the scale-down delay', { scaleDownDelaySeconds: 600 }, ago(10_000), ago(300), 'SCALE_DOWN_DELAY'],
    ['past the scale-down delay', { scaleDownDelaySeconds: 600 }, ago(10_000), ago(601), null],
    ['billed by the hour, 50 min into it', { billingPeriodSeconds: 3600 }, ago(3000), null, 'PAID_PERIOD'],
    ['billed by the hour, in its last 5 minutes', { billingPeriodSeconds: 3600 }, ago(3400), null, null],
    ['billed by the hour, just into its second hour', { billingPeriodSeconds: 3600 }, ago(3700), null, 'PAID_PERIOD'],
    ['a short period: its last tenth', { billingPeriodSeconds: 600 }, ago(545), null, null],
    ['a short period: before its last tenth', { billingPeriodSeconds: 600 }, ago(500), null, 'PAID_PERIOD'],
    [
      'a short period: its last minute at least (a tenth would be 30 s)',
      { billingPeriodSeconds: 300 },
      ago(245),
      null,
      null,
    ],
    ['a short period: before its last minute', { billingPeriodSeconds: 300 }, ago(235), null, 'PAID_PERIOD'],
    ['the shortest period: its second half', { billingPeriodSeconds: 60 }, ago(31), null, null],
    ['the shortest period: its first half', { billingPeriodSeconds: 60 }, ago(29), null, 'PAID_PERIOD'],
    ['billed, no creation time known', { billingPeriodSeconds: 3600 }, null, null, null],
  ] as const)('%s', (_what, pool, created, lastLaunch, hold) => {
    expect(stopHold(pool, created, lastLaunch, NOW)).toBe(hold);
  });

  it.each([60, 61, 90, 119, 120, 300, 599, 600, 3600, 86_400])(
    'billed by %i s: a periodic cycle every 30 s reaches the stop window, whatever the phase',
    (period) => {
      for (let phase = 0; phase < 30; phase += 0.5) {
        const cycles = Array.from({ length: Math.ceil(period / 30) + 1 }, (_, i) => phase + 30 * i).filter(
          (t) => t <= period,
        );
        expect(cycles.some((t) => stopHold({ billingPeriodSeconds: period }, ago(t), null, NOW) === null)).toBe(true);
      }
    },
  );

  it('stops first the idle instance nearest the end of its paid period; without a period, the one idle longest', () => {
    const a = { name: 'a', createdAt: ago(3000), idleSince: ago(100) }; // 600 s left
    const b = { name: 'b', createdAt: ago(3500), idleSince: ago(50) }; // 100 s left
    const c = { name: 'c', createdAt: ago(1000), idleSince: ago(900) }; // 2600 s left
    expect([a, b, c].sort(stopOrder({ billingPeriodSeconds: 3600 }, NOW)).map((x) => x.name)).toEqual(['b', 'a', 'c']);
    expect([a, b, c].sort(stopOrder({ billingPeriodSeconds: null }, NOW)).map((x) => x.name)).toEqual(['c', 'a', 'b']);
  });

  it.each([
    [null, 50, Infinity],
    [5, 0, 5],
    [5, 3, 2],
    [5, 7, 0],
  ])('a rate limit of %s a minute after %i launches leaves %s', (limit, launched, room) => {
    expect(rateRoom({ maxLaunchesPerMinute: limit }, launched)).toBe(room);
  });

  it.each([
    ['08:00', 480],
    ['24:00', 1440],
    ['8:00', null],
    ['24:01', null],
    ['12:60', null],
    ['noon', null],
  ])('minutesOf(%s) = %s', (hhmm, minutes) => {
    expect(minutesOf(hhmm)).toBe(minutes);
  });

  describe('warm capacity by schedule', () => {
    const schedule: WarmSchedule = {
      timeZone: 'Europe/Berlin',
      periods: [
        { days: ['MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT', 'SUN'], from: '08:00', to: '18:00', minIdleInstances: 3 },
        { days: ['SUN'], from: '10:00', to: '12:00', minIdleInstances: 5 },
      ],
    };
    const pool = { minIdleInstances: 1, warmSchedule: schedule };

    it.each([
      // Saturday 28 March 2026 is still CET (UTC+1): 07:30 UTC is 08:30 local.
      ['2026-03-28T06:30:00Z', 'SAT', 7 * 60 + 30, 1],
      ['2026-03-28T07:30:00Z', 'SAT', 8 * 60 + 30, 3],
      // Sunday 29 March 2026: clocks go forward at 02:00 to 03:00 (CEST, UTC+2); 06:30 UTC is 08:30 local.
      ['2026-03-29T06:30:00Z', 'SUN', 8 * 60 + 30, 3],
      ['2026-03-29T08:30:00Z', 'SUN', 10 * 60 + 30, 5], // both periods: the larger
      ['2026-03-29T16:30:00Z', 'SUN', 18 * 60 + 30, 1],
      // Sunday 25 October 2026: back to CET at 03:00; 16:30 UTC is 17:30 local, still in.
      ['2026-10-25T16:30:00Z', 'SUN', 17 * 60 + 30, 3],
      ['2026-10-25T17:30:00Z', 'SUN', 18 * 60 + 30, 1],
    ])('at %s (%s %i min local): %i kept idle', (at, day, minute, idle) => {
      const now = new Date(at);
      expect(localTime(now, 'Europe/Berlin')).toEqual({ day, minute });
      expect(minIdleNow(pool, now)).toBe(idle);
    });

    it('without a schedule, minIdleInstances always', () => {
      expect(minIdleNow({ minIdleInstances: 2, warmSchedule: null }, NOW)).toBe(2);
      expect(minIdleNow({ minIdleInstances: 2, warmSchedule: { timeZone: 'UTC', periods: [] } }, NOW)).toBe(2);
    });
  });
});
