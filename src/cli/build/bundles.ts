/**
 * The self-contained files that go onto machines other than the server: the agent, the task
 * handlers of worker images, and tagsched-admin. Each is one ES module bundled by esbuild for
 * Debian's Node.js (20.19 in trixie), needing no node_modules at run time. A build fails when a
 * server-only package (the ORM, yoga, pg, Pothos) ends up in a bundle: they talk to the server over
 * GraphQL only.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** One bundle: its entry in src/ and the file it becomes. */
export interface BundleSpec {
  readonly entry: string;
  readonly outFile: string;
}

/** The bundles `npm run build` makes, relative to the repository root (entry) and to dist/ (outFile). */
export const BUNDLES = {
  agent: { entry: 'src/agent/main.ts', outFile: 'tagsched-worker.mjs' },
  handler: { entry: 'src/cli/image/handler-main.ts', outFile: 'tagsched-handler.mjs' },
  admin: { entry: 'src/cli/admin/main.ts', outFile: 'tagsched-admin.mjs' },
} as const satisfies Record<string, BundleSpec>;

/** Packages of the server that must never be in a bundle (a prefix matches a scope). */
export const SERVER_ONLY_PACKAGES = [
  '@mikro-orm/',
  '@pothos/',
  'graphql-yoga',
  '@graphql-yoga/',
  'pg',
  'pg-pool',
  '@electric-sql/',
  'knex',
] as const;

/** The oldest Node.js the bundles run on: Debian trixie's nodejs. */
export const BUNDLE_TARGET = 'node20.19';

// esbuild's ESM output turns the `require` of CommonJS packages (pino, ws) into a shim that throws
// for Node's built-in modules; a real `require` made from the bundle's own URL answers them.
const BANNER =
  "import { createRequire as __tagschedCreateRequire } from 'node:module';\nconst require = __tagschedCreateRequire(import.meta.url);";

/** A bundle that was written, with what it holds. */
export interface BuiltBundle {
  readonly file: string;
  /** `<file>.LICENSES`: the license of every package bundled, which their terms ask to travel with the code. */
  readonly licenses: string;
  readonly bytes: number;
  /** The npm packages bundled in it, by name. */
  readonly packages: string[];
}

/** The npm package an esbuild input path belongs to, or null for the project's own files. */
export function packageOfInput(input: string): string | null {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) return null;
  const rest = input.slice(at + 'node_modules/'.length).split('/');
  return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
}

/** The server-only packages among `packages`. */
export function serverOnlyAmong(packages: readonly string[]): string[] {
  return packages.filter((name) =>
    SERVER_ONLY_PACKAGES.some((p) => (p.endsWith('/') ? name.startsWith(p) : name === p)),
  );
}

/** Bundles one entry into `outDir`; throws when a server-only package got in. */
export async function buildBundle(spec: BundleSpec, outDir: string): Promise<BuiltBundle> {
  const file = path.join(outDir, spec.outFile);
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [path.join(root, spec.entry)],
    outfile: file,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: BUNDLE_TARGET,
    minify: true,
    legalComments: 'eof',
    banner: { js: `#!/usr/bin/env node\n${BANNER}` },
    // ws loads these native speed-ups when present and does without them otherwise.
    external: ['bufferutil', 'utf-8-validate'],
    metafile: true,
    logLevel: 'silent',
  });
  // What ends up in the file: inputs that tree-shaking dropped entirely (graphql, which graphql-ws
  // imports for its server half only) carry no byte into the output.
  const output = Object.values(result.metafile.outputs)[0];
  const used = Object.entries(output.inputs)
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([name]) => name);
  const packages = [...new Set(used.map(packageOfInput).filter((p): p is string => p !== null))].sort();
  const forbidden = serverOnlyAmong(packages);
  if (forbidden.length) {
    fs.rmSync(file, { force: true });
    throw new Error(`${spec.entry} pulls server-only packages into ${spec.outFile}: ${forbidden.join(', ')}`);
  }
  fs.chmodSync(file, 0o755);
  const licenses = `${file}.LICENSES`;
  fs.writeFileSync(licenses, licenseNotices(spec.outFile, packages));
  return { file, licenses, bytes: fs.statSync(file).size, packages };
}

/** The notices file of a bundle: tagsched's license, then each bundled package's license file. */
function licenseNotices(outFile: string, packages: readonly string[]): string {
  const parts = [
    `${outFile} is tagsched (GPL-3.0-or-later, see LICENSE in its source) bundled with the packages below.\n`,
  ];
  for (const name of packages) {
    const dir = path.join(root, 'node_modules', name);
    const { version, license } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
      version: string;
      license?: string;
    };
    const file = fs.readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(f));
    if (!file) throw new Error(`${name} ships no license file to go with ${outFile}`);
    parts.push(
      `----- ${name} ${version} (${license ?? 'see below'}) -----\n\n${fs.readFileSync(path.join(dir, file), 'utf8').trim()}\n`,
    );
  }
  return parts.join('\n');
}

/** Builds every bundle of BUNDLES into `outDir`. */
export async function buildBundles(outDir: string): Promise<Record<keyof typeof BUNDLES, BuiltBundle>> {
  fs.mkdirSync(outDir, { recursive: true });
  return {
    agent: await buildBundle(BUNDLES.agent, outDir),
    handler: await buildBundle(BUNDLES.handler, outDir),
    admin: await buildBundle(BUNDLES.admin, outDir),
  };
}
