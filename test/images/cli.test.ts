import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BOOT_PACKAGES } from '../../src/cli/image/boot-files.js';
import { BUILD_AUTH_PATH } from '../../src/cli/image/build.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-image-cli-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const image = (...args: string[]) =>
  spawnSync(process.execPath, ['bin/tagsched-image.js', ...args], { encoding: 'utf8' });

describe('tagsched-image build', () => {
  it('--dry-run --json prints the recipe, packages, handlers and tags of flags over a recipe file', () => {
    const recipe = path.join(dir, 'recipe.json');
    fs.writeFileSync(
      recipe,
      JSON.stringify({ suite: 'sid', enable_backends: ['qemu'], enable_tasks: ['autopkgtest'] }),
    );
    const r = image(
      'build',
      '--recipe',
      recipe,
      '--enable-tasks',
      'sbuild,debsign',
      '--architecture',
      'arm64',
      '--dry-run',
      '--json',
    );
    expect(r.status).toBe(0);
    const plan = JSON.parse(r.stdout) as {
      recipe: unknown;
      packages: { name: string }[];
      handlers: string[];
      tasksWithoutHandler: string[];
      tags: { tag: string }[];
    };
    expect(plan.recipe).toEqual({
      suite: 'sid',
      architecture: 'arm64',
      mirror: null,
      source: null,
      enable_backends: ['qemu'],
      enable_tasks: ['sbuild', 'debsign'],
    });
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
    const r = image(
      'build',
      '--enable-backends',
      'docker',
      '--enable-tasks',
      'lintian',
      '--suite',
      'bookworm',
      '--source',
      source,
      '--output',
      out,
    );
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

  it('refuses a mirror with a user or password, naming the apt auth.conf way, without repeating it, and writes nothing', () => {
    const out = path.join(dir, 'never-with-credentials');
    const flag = image('build', '--mirror', 'https://user:secret@mirror.example.org/debian', '--output', out);
    expect(flag.status).toBe(64);
    expect(flag.stderr).toMatch(/mirror: the URL holds a user name or password.*apt auth\.conf file.*--apt-auth FILE/);
    const recipe = path.join(dir, 'credentials.json');
    fs.writeFileSync(recipe, JSON.stringify({ mirror: 'https://user:secret@mirror.example.org/debian' }));
    const file = image('build', '--recipe', recipe, '--output', out, '--dry-run', '--json');
    expect(file.status).toBe(64);
    expect(file.stderr).toMatch(/mirror: the URL holds a user name or password/);
    for (const r of [flag, file]) expect(r.stdout + r.stderr).not.toContain('secret');
    expect(fs.existsSync(out)).toBe(false);
  });

  it('--apt-auth: the file is in the mmdebstrap hooks (put where apt reads it, mode 0600, removed before the image is made), not in the recipe', () => {
    const auth = path.join(dir, 'auth.conf');
    fs.writeFileSync(auth, 'machine mirror.example.org/debian login builder password secret\n', { mode: 0o600 });
    const r = image(
      'build',
      '--mirror',
      'https://mirror.example.org/debian',
      '--apt-auth',
      auth,
      '--dry-run',
      '--json',
    );
    expect(r.status).toBe(0);
    const plan = JSON.parse(r.stdout) as { recipe: Record<string, unknown>; mmdebstrap: string[] };
    expect(plan.recipe.mirror).toBe('https://mirror.example.org/debian');
    expect(JSON.stringify(plan.recipe)).not.toContain(auth);
    const hooks = plan.mmdebstrap.filter((a) => a.includes('auth.conf'));
    expect(hooks).toEqual([
      '--setup-hook=mkdir -p "$1/etc/apt/auth.conf.d"',
      `--setup-hook=upload ${auth} ${BUILD_AUTH_PATH}`,
      `--setup-hook=chmod 0600 "$1${BUILD_AUTH_PATH}"`,
      `--customize-hook=rm -f "$1${BUILD_AUTH_PATH}"`,
    ]);
    // Removed by the first customize hook, after the last download and before anything is put in the tree.
    expect(plan.mmdebstrap.find((a) => a.startsWith('--customize-hook='))).toBe(
      `--customize-hook=rm -f "$1${BUILD_AUTH_PATH}"`,
    );
    expect(plan.mmdebstrap.slice(-3)).toEqual([
      'trixie',
      path.resolve(`images/tagsched-worker-trixie-${String(plan.recipe.architecture)}.tar`),
      'https://mirror.example.org/debian',
    ]);
    // The password stays in the file.
    expect(r.stdout).not.toContain('secret');
    const without = JSON.parse(image('build', '--dry-run', '--json').stdout) as { mmdebstrap: string[] };
    expect(without.mmdebstrap.filter((a) => a.includes('auth.conf'))).toEqual([]);

    const missing = image('build', '--apt-auth', path.join(dir, 'no-such-auth.conf'), '--dry-run');
    expect(missing.status).toBe(64);
    expect(missing.stderr).toMatch(/--apt-auth: cannot read .*no-such-auth\.conf \(ENOENT\)/);
  });

  it('--dry-run --disk-image lists what the disk build installs (the cloud kernel, GRUB, cloud-init), the list mmdebstrap is given', () => {
    const r = image(
      'build',
      '--architecture',
      'amd64',
      '--enable-tasks',
      'sbuild',
      '--disk-image',
      '--dry-run',
      '--json',
    );
    expect(r.status).toBe(0);
    const plan = JSON.parse(r.stdout) as { packages: { name: string; neededBy: string[] }[]; mmdebstrap: string[] };
    const names = plan.packages.map((p) => p.name);
    for (const name of ['linux-image-cloud-amd64', 'grub-pc-bin', 'grub-efi-amd64-bin', ...BOOT_PACKAGES])
      expect(names, name).toContain(name);
    expect(plan.packages.find((p) => p.name === 'cloud-init')!.neededBy).toEqual(['boot']);
    expect(plan.mmdebstrap).toContain(`--include=${names.join(',')}`);
    expect(plan.mmdebstrap.some((a) => a.includes('grub-mkimage'))).toBe(true);
    const people = image('build', '--architecture', 'arm64', '--disk-image', '--dry-run');
    expect(people.stdout).toMatch(/^ {2}linux-image-cloud-arm64 +boot$/m);
    expect(people.stdout).toMatch(/^ {2}grub-efi-arm64-bin +boot$/m);
    // Without a disk image, none of them.
    const tree = JSON.parse(
      image('build', '--architecture', 'amd64', '--enable-tasks', 'sbuild', '--dry-run', '--json').stdout,
    ) as { packages: { name: string }[] };
    expect(tree.packages.map((p) => p.name)).not.toContain('cloud-init');
    // A disk the build cannot make is refused by the dry run as by the build.
    const riscv = image('build', '--architecture', 'riscv64', '--disk-image', '--dry-run');
    expect(riscv.status).toBe(64);
    expect(riscv.stderr).toContain('--disk-image: no bootable disk is built for riscv64 (only amd64 and arm64)');
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
