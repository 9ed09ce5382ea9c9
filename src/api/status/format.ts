/** How the status pages write times, durations and sizes. */

/** "12 s ago", "5 min ago", "3 h ago", then the UTC date and time. */
export function ago(date: Date | null | undefined, now: Date): string {
  if (!date) return 'never';
  const s = Math.round((now.getTime() - date.getTime()) / 1000);
  if (s < 0) return utc(date);
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return utc(date);
}

/** "2026-11-23 05:12:07 UTC". */
export function utc(date: Date): string {
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How far from now: "12 s ago", "5 min ago", "3 h ago", "2 d ago"; "in 40 s" and so on for the future. */
export function relative(date: Date, now: Date): string {
  const ms = now.getTime() - date.getTime();
  const s = Math.round(Math.abs(ms) / 1000);
  const text =
    s < 60
      ? `${s} s`
      : s < 3600
        ? `${Math.floor(s / 60)} min`
        : s < 86400
          ? `${Math.floor(s / 3600)} h`
          : `${Math.floor(s / 86400)} d`;
  return ms >= 0 ? `${text} ago` : `in ${text}`;
}

/** An instant to the second with its age: "2026-11-23 05:12:07 UTC (3 min ago)". */
export function when(date: Date, now: Date): string {
  return `${utc(date)} (${relative(date, now)})`;
}

/** A duration in seconds as "850 ms", "42 s", "3 min 5 s", "2 h 10 min", "3 d 4 h". */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return '—';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s < 86400)
    return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
  return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ''}`;
}

/** Seconds between two dates (the second one defaulting to now), or null when the first is missing. */
export function between(from: Date | null | undefined, to: Date | null | undefined, now: Date): number | null {
  if (!from) return null;
  return ((to ?? now).getTime() - from.getTime()) / 1000;
}

/** Bytes as "512 B", "12.5 KiB", "3.1 MiB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
