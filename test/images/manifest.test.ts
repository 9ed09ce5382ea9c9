import { describe, expect, it } from 'vitest';
import { imagePackages, imageTags } from '../../src/cli/image/contents.js';
import { buildManifest, installedProblems, parseDpkgStatus, upstreamMajorMinor } from '../../src/cli/image/manifest.js';
import { parseManifest } from '../../src/core/manifest-format.js';
import { parseRecipe } from '../../src/cli/image/recipe.js';

const STATUS = `Package: nodejs
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 20.19.2+dfsg-1+deb13u3
Description: evented I/O for V8 javascript - runtime executable
 Node.js is a platform built on Chrome's JavaScript runtime.
 .
 More text.

Package: removed-but-configured
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: base-files
Status: install ok installed
Architecture: amd64
Version: 13.8+deb13u1
`;

describe('dpkg status', () => {
  it('lists the installed packages with their versions, sorted, skipping what is only configured', () => {
    expect(parseDpkgStatus(STATUS)).toEqual([
      { name: 'base-files', version: '13.8+deb13u1', architecture: 'amd64' },
      { name: 'nodejs', version: '20.19.2+dfsg-1+deb13u3', architecture: 'amd64' },
    ]);
  });

  it('refuses a file that is not deb822', () => {
    expect(() => parseDpkgStatus(' orphan continuation\n')).toThrow(/not deb822: line 1/);
  });

  it.each([
    ['20.19.2+dfsg-1', { major: 20, minor: 19 }],
    ['1:22.3.0-1', { major: 22, minor: 3 }],
    ['18.19.0+dfsg-6~deb12u2', { major: 18, minor: 19 }],
    ['garbage', null],
  ])('reads the upstream version of %s', (version, expected) => {
    expect(upstreamMajorMinor(version)).toEqual(expected);
  });
});

describe('the installed packages of a build', () => {
  const recipe = parseRecipe({ enable_tasks: ['sbuild'] }, 'amd64');
  const planned = imagePackages(recipe);
  const all = planned.map((p) => ({
    name: p.name,
    version: p.name === 'nodejs' ? '20.19.2+dfsg-1' : '1.0',
    architecture: 'amd64',
  }));

  it('are fine when every planned package is there with a recent nodejs', () => {
    expect(installedProblems(planned, all)).toEqual([]);
  });

  it('name each planned package that is missing, with what needed it', () => {
    expect(
      installedProblems(
        planned,
        all.filter((p) => p.name !== 'sbuild' && p.name !== 'uidmap'),
      ),
    ).toEqual([
      'package sbuild (for task:sbuild) is not installed',
      'package uidmap (for backend:unshare) is not installed',
    ]);
  });

  it.each(['18.19.0+dfsg-6~deb12u2', '20.18.0-1', 'x'])('refuse nodejs %s', (version) => {
    const old = all.map((p) => (p.name === 'nodejs' ? { ...p, version } : p));
    expect(installedProblems(planned, old)).toEqual([
      expect.stringMatching(/^nodejs .* is older than the agent needs \(20.19\)/),
    ]);
  });
});

describe('manifests', () => {
  it('round-trips through JSON and parseManifest', () => {
    const recipe = parseRecipe({ enable_tasks: ['sbuild'] }, 'amd64');
    const file = { path: 'x.tar', bytes: 10, sha256: 'a'.repeat(64) };
    const manifest = buildManifest({
      name: 'x',
      createdAt: new Date('2026-11-23T00:00:00Z'),
      builtWith: { tagsched: '0.1.0', mmdebstrap: '1.5.7' },
      recipe,
      files: { rootfs: file, diskImage: null },
      agent: {
        path: '/usr/lib/tagsched-worker/tagsched-worker.mjs',
        sha256: 'b'.repeat(64),
        handlers: ['noop', 'sbuild'],
        tasksWithoutHandler: [],
      },
      packages: parseDpkgStatus(STATUS),
      tags: imageTags(recipe),
    });
    expect(parseManifest(JSON.parse(JSON.stringify(manifest)))).toEqual(manifest);
    expect(manifest).toMatchObject({
      format: 1,
      createdAt: '2026-11-23T00:00:00.000Z',
      recipe: { enable_tasks: ['sbuild'] },
    });
  });

  it('refuses what is not a manifest, naming the fields', () => {
    expect(() => parseManifest({ format: 1, name: 'x' })).toThrow(/not a tagsched image manifest: createdAt: .*/);
    expect(() => parseManifest({ format: 2 })).toThrow(/format/);
  });
});
