/**
 * `npm run build`: the service compiled by tsc into dist/ (dist/src/server.js, dist/migrations/),
 * and the self-contained bundles of src/cli/build/bundles.ts (dist/tagsched-worker.mjs,
 * dist/tagsched-handler.mjs, dist/tagsched-admin.mjs). dist/ is emptied first, so nothing stale survives a build.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBundles } from './bundles.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const dist = path.join(root, 'dist');

fs.rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
process.stdout.write(
  `compiled the service into ${path.relative(process.cwd(), dist) || '.'}/src (node dist/src/server.js)\n`,
);
for (const bundle of Object.values(await buildBundles(dist))) {
  process.stdout.write(
    `bundled ${path.relative(process.cwd(), bundle.file)}: ${(bundle.bytes / 1024).toFixed(0)} KiB (${bundle.packages.join(', ')})\n`,
  );
}
