/**
 * tagsched-admin's executable entry: runs the command with this process's streams and environment;
 * the first SIGINT or SIGTERM ends a --watch or --follow cleanly (exit 0), a second one at once.
 */
import { runAdmin } from './program.js';

const stop = new AbortController();
let signals = 0;
const onSignal = (signal: NodeJS.Signals) => {
  signals += 1;
  if (signals > 1) process.exit(signal === 'SIGINT' ? 130 : 143);
  stop.abort();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// A reader that went away (`… | head -1`) is no error: stop quietly, as other commands do.
process.stdout.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? 0 : 1));

const code = await runAdmin(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  signal: stop.signal,
});
// Exit once stdout has taken everything (a pipe to jq or head may still be draining).
process.stdout.write('', () => process.exit(code));
