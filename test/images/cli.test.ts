import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-image-cli-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const image = (...args: string[]) => spawnSync(process.execPath, ['bin/tagsched-image.js', ...args], { encoding: 'utf8' });

describe('tagsched-image build', () => {
  it('--dry-run --json prints the recipe, packages, handlers and tags of flags over a recipe file', () => {
    const recipe = path.join(dir, 'recipe.json');
    fs.writeFileSync(recipe, JSON.stringify({ suite: 'sid', enable_backends: ['qemu'], enable_tasks: ['autopkgtest'] }));
    const r = image('build', '--recipe', recipe, '--enable-tasks', 'sbuild,debsign', '--architecture', 'arm64', '--dry-run', '--json');
    expect(r.status).toBe(0);
    const plan = JSON.parse(r.stdout) as { recipe: unknown; packages: { name: string }[]; handlers: string[]; tasksWithoutHandler: string[]; tags: { tag: string }[] };
    expect(plan.recipe).toEqual({ suite: 'sid', architecture: 'arm64', mirror: null, source: null, enable_backends: ['qemu'], enable_tasks: ['sbuild', 'debsign'] });
    expect(plan.packages.map((p) => p.name)).toEqual([
      'arch-test',
      'ca-certificates',
      'devscripts',
      'gnupg',
      'mmdebstrap',
      'nodejs',
      'qemu-system-arm',
      'qemu-utils',
      'sbuild',
      'systemd-sysv',
    ]);
    expect(plan.handlers).toEqual(['noop', 'sbuild']);
    expect(plan.tasksWithoutHandler).toEqual(['debsign']);
    expect(plan.tags.map((t) => t.tag)).toContain('worker:executor:qemu');
  });

  it('--dry-run prints the packages and the tags for people', () => {
    const r = image('build', '--enable-tasks', 'sbuild', '--dry-run');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^ {2}sbuild +task:sbuild$/m);
    expect(r.stdout).toMatch(/^ {2}worker:task:worker:sbuild:version:1 +handler:sbuild$/m);
  });

  it('refuses a bad recipe with exit 64, every problem named, and nothing written', () => {
    const out = path.join(dir, 'never');
    const source = path.join(dir, 'bad.sources');
    fs.writeFileSync(source, 'deb http://deb.debian.org/debian trixie main\n');
    const r = image('build', '--enable-backends', 'docker', '--enable-tasks', 'lintian', '--suite', 'bookworm', '--source', source, '--output', out);
    expect(r.status).toBe(64);
    expect(r.stderr).toContain('suite: bookworm ships nodejs 18');
    expect(r.stderr).toContain('enable_backends: unknown backend "docker"');
    expect(r.stderr).toContain('enable_tasks: unknown task "lintian"');
    expect(r.stderr).toContain('source: line 1: this is the one-line format of sources.list');
    expect(fs.existsSync(out)).toBe(false);
  });

  it('refuses a recipe file that is not JSON, and one that cannot be read', () => {
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, '{ suite: trixie }');
    expect(image('build', '--recipe', bad, '--dry-run').stderr).toMatch(/--recipe: .*bad.json is not JSON/);
    const missing = image('build', '--recipe', path.join(dir, 'missing.json'), '--dry-run');
    expect(missing.status).toBe(64);
    expect(missing.stderr).toMatch(/--recipe: cannot read/);
  });

  it('refuses a disk image it cannot boot, and a disk format it does not write, with exit 64', () => {
    const riscv = image('build', '--architecture', 'riscv64', '--disk-image', '--output', path.join(dir, 'riscv'));
    expect(riscv.status).toBe(64);
    expect(riscv.stderr).toContain('--disk-image: no bootable disk is built for riscv64 (only amd64 and arm64)');
    const vmdk = image('build', '--disk-image', '--disk-format', 'vmdk', '--dry-run');
    expect(vmdk.status).toBe(64);
    expect(vmdk.stderr).toMatch(/'vmdk' is invalid\. Allowed choices are raw, qcow2/);
  });
});
