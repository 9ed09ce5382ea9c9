/**
 * The cluster suite's measurements: each phase records what it measured and its target, the report is
 * written to test/artifacts/cluster-report.json and printed as a short table, whatever passed or failed.
 */
import fs from 'node:fs';
import path from 'node:path';

/** One measurement: its value, the target it is held to (when the issue gives one), and whether it met it. */
export interface Measure {
  phase: string;
  name: string;
  value: number | string | null;
  unit?: string;
  target?: string;
  ok?: boolean;
}

export class Report {
  readonly measures: Measure[] = [];
  readonly details: Record<string, unknown> = {};
  readonly startedAt = new Date();
  /** The phases that ended with an error, and the error's first line. */
  readonly failures: Record<string, string> = {};

  /** Records a measure (a later one of the same phase and name replaces it). */
  add(measure: Measure): Measure {
    const i = this.measures.findIndex((m) => m.phase === measure.phase && m.name === measure.name);
    if (i >= 0) this.measures[i] = measure;
    else this.measures.push(measure);
    return measure;
  }

  /** Keeps a phase's raw figures in the JSON (not in the table). */
  detail(phase: string, value: unknown): void {
    this.details[phase] = value;
  }

  fail(phase: string, err: unknown): void {
    this.failures[phase] = String(err instanceof Error ? err.message : err)
      .split('\n')[0]!
      .slice(0, 300);
  }

  /** Writes the JSON and returns the table. */
  write(file = path.resolve('test/artifacts/cluster-report.json')): string {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const finishedAt = new Date();
    fs.writeFileSync(
      file,
      `${JSON.stringify(
        {
          startedAt: this.startedAt.toISOString(),
          finishedAt: finishedAt.toISOString(),
          durationSeconds: Math.round((finishedAt.getTime() - this.startedAt.getTime()) / 1000),
          measures: this.measures,
          failures: this.failures,
          details: this.details,
        },
        null,
        2,
      )}\n`,
    );
    return this.table();
  }

  /** The measures as a fixed-width table. */
  table(): string {
    const rows = [
      ['phase', 'measure', 'value', 'target', ''],
      ...this.measures.map((m) => [
        m.phase,
        m.name,
        m.value === null
          ? '—'
          : `${typeof m.value === 'number' ? round(m.value) : m.value}${m.unit ? ` ${m.unit}` : ''}`,
        m.target ?? '',
        m.ok === undefined ? '' : m.ok ? 'ok' : 'MISSED',
      ]),
    ];
    const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
    const line = (r: string[]) => r.map((cell, c) => cell.padEnd(widths[c]!)).join('  ');
    const out = [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)];
    for (const [phase, error] of Object.entries(this.failures)) out.push(`FAILED ${phase}: ${error}`);
    return out.join('\n');
  }
}

function round(v: number): string {
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
}
