/**
 * Progress of the long phases on stderr: a cli-progress bar on a terminal, and otherwise one line
 * per phase (when it ends, with its duration), so that logs of CI runs stay short.
 */
import cliProgress from 'cli-progress';

/** One phase being reported. */
export interface Phase {
  /** Sets how much of the phase is done (in its own units). */
  update(done: number): void;
  /** Ends the phase and returns its duration in milliseconds. */
  end(note?: string): number;
}

const tty = Boolean(process.stderr.isTTY);

/** Starts a phase; `total` in the phase's units (rows, calls), or 0 for a phase without steps. */
export function phase(label: string, total = 0): Phase {
  const started = performance.now();
  let bar: cliProgress.SingleBar | null = null;
  if (tty && total > 0) {
    bar = new cliProgress.SingleBar(
      {
        stream: process.stderr,
        format: `  ${label.padEnd(34)} [{bar}] {percentage}% {value}/{total} {duration_formatted}`,
        hideCursor: true,
        clearOnComplete: true,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0);
  } else if (tty) {
    process.stderr.write(`  ${label} …\r`);
  }
  return {
    update(done) {
      bar?.update(done);
    },
    end(note) {
      bar?.stop();
      const ms = performance.now() - started;
      process.stderr.write(`  ${label.padEnd(34)} ${formatMs(ms).padStart(9)}${note ? `  ${note}` : ''}\n`);
      return ms;
    },
  };
}

/** Milliseconds as people read them: `0.84 ms`, `12.3 ms`, `4.2 s`, `3 min 05 s`. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}
