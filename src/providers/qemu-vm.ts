/**
 * The mechanics of one QEMU virtual machine booted from a worker image's disk, as a cloud would boot
 * it (used by the qemu provider, qemu.ts, and by the boot tests): a copy-on-write overlay (qcow2,
 * backed by the image, as big as the machine's disk), a NoCloud seed (a vfat volume labelled CIDATA
 * holding user-data and meta-data), user-mode networking with `restrict=on` and one guest address
 * forwarded to one host port (the guest reaches the server and nothing else), BIOS (SeaBIOS) or UEFI
 * (OVMF) firmware, the serial console in a file, KVM when it works and TCG otherwise.
 *
 * QEMU runs detached (`-daemonize`, a pid file) with its monitor on a unix socket in the machine's
 * directory, so it outlives the process that started it; an ACPI power-off is `system_powerdown` on
 * that socket.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** OVMF's firmware and the template of its variable store (Debian's ovmf package). */
export const OVMF = { code: '/usr/share/OVMF/OVMF_CODE_4M.fd', vars: '/usr/share/OVMF/OVMF_VARS_4M.fd' } as const;

/** The programs a machine needs on the host, and the Debian packages that bring them. */
export const QEMU_PROGRAMS = [
  { program: 'qemu-system-x86_64', debianPackage: 'qemu-system-x86' },
  { program: 'qemu-img', debianPackage: 'qemu-utils' },
  { program: 'mkfs.vfat', debianPackage: 'dosfstools' },
  { program: 'mcopy', debianPackage: 'mtools' },
] as const;

/** The files of a machine in its directory. */
export const VM_FILES = {
  overlay: 'overlay.qcow2',
  seed: 'seed.vfat',
  uefiVars: 'uefi-vars.fd',
  pid: 'qemu.pid',
  monitor: 'monitor.sock',
  pipe: 'tcp-pipe.mjs',
} as const;

/** A host program from PATH or the sbin directories; null when there is none. */
export function findProgram(name: string): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/sbin']) {
    if (dir && fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

/** The programs of QEMU_PROGRAMS missing here, named with their packages. */
export function missingPrograms(): string[] {
  return QEMU_PROGRAMS.filter((p) => !findProgram(p.program)).map(
    (p) => `${p.program} (Debian package ${p.debianPackage})`,
  );
}

/** How long GRUB may take to print its banner under KVM before KVM counts as unusable (TCG takes a few seconds). */
const KVM_PROBE_MS = 20_000;

/**
 * Whether QEMU's KVM acceleration runs this image here: /dev/kvm may exist while QEMU aborts on it
 * ("failed to set MSR 0x10a") or crawls (GRUB's menu after minutes), so the image itself is started
 * under KVM until GRUB prints its banner on the serial console; no banner in time means TCG.
 */
export async function probeAccel(image: string, imageFormat: 'raw' | 'qcow2', dir: string): Promise<'kvm' | 'tcg'> {
  if (!fs.existsSync('/dev/kvm')) return 'tcg';
  fs.mkdirSync(dir, { recursive: true });
  const overlay = path.join(dir, `kvm-probe-${process.pid}.qcow2`);
  const log = path.join(dir, `kvm-probe-${process.pid}.log`);
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', imageFormat, '-b', image, overlay]);
  const args = [
    '-accel',
    'kvm',
    '-cpu',
    'host',
    '-machine',
    'q35',
    '-m',
    '512',
    '-nodefaults',
    '-display',
    'none',
    '-no-reboot',
    '-serial',
    `file:${log}`,
  ];
  const child = spawn('qemu-system-x86_64', [...args, '-drive', `file=${overlay},if=virtio,format=qcow2`], {
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', () => undefined);
  const deadline = Date.now() + KVM_PROBE_MS;
  let banner = false;
  while (!banner && child.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    banner = fs.existsSync(log) && fs.readFileSync(log, 'latin1').includes('GNU GRUB');
  }
  child.kill('SIGKILL');
  await exited;
  fs.rmSync(overlay, { force: true });
  fs.rmSync(log, { force: true });
  return banner ? 'kvm' : 'tcg';
}

/** Writes a NoCloud seed volume (vfat, label CIDATA) with this user data and meta data. */
export async function makeSeed(file: string, userData: string, metaData: string): Promise<void> {
  const dir = fs.mkdtempSync(`${file}-`);
  try {
    fs.writeFileSync(path.join(dir, 'user-data'), userData, { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'meta-data'), metaData);
    fs.rmSync(file, { force: true });
    await run(findProgram('mkfs.vfat') ?? 'mkfs.vfat', ['-n', 'CIDATA', '-C', file, '2048']);
    fs.chmodSync(file, 0o600); // it holds the activation token
    await run('mcopy', ['-i', file, path.join(dir, 'user-data'), path.join(dir, 'meta-data'), '::/'], {
      env: { ...process.env, MTOOLS_SKIP_CHECK: '1' },
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The program QEMU runs for each connection the guest opens to the forwarded address (guestfwd
 * `cmd:`): it copies that connection, on its stdin and stdout, to one TCP port of the host.
 */
export const TCP_PIPE_PROGRAM = `import net from 'node:net';
const socket = net.connect(Number(process.argv[3]), process.argv[2]);
process.stdin.pipe(socket);
socket.pipe(process.stdout);
socket.on('close', () => process.exit(0));
socket.on('error', () => process.exit(1));
`;

/** How to boot one machine. */
export interface VmOptions {
  /** The machine's directory: overlay, seed, pid file, monitor socket (QEMU's working directory). */
  readonly dir: string;
  readonly image: string;
  readonly imageFormat: 'raw' | 'qcow2';
  readonly firmware: 'bios' | 'uefi';
  readonly accel: 'kvm' | 'tcg';
  readonly cpus: number;
  readonly memoryMib: number;
  /** The overlay's size: the disk the machine sees. */
  readonly diskBytes: number;
  /** The guest address and port forwarded to `hostPort` on `hostAddress`. */
  readonly forward: {
    readonly guestAddress: string;
    readonly guestPort: number;
    readonly hostAddress: string;
    readonly hostPort: number;
  };
  /** Where the serial console goes. */
  readonly serialLog: string;
  /** The node binary that runs the TCP pipe (default: this process's). */
  readonly node?: string;
  /** Run QEMU under `nice -n 10` (tests on a shared machine). */
  readonly nice?: boolean;
}

/** A value inside a QEMU option list (`key=value,key=value`): commas doubled. */
function optionValue(value: string): string {
  return value.replaceAll(',', ',,');
}

/** A word of the shell command line QEMU runs for guestfwd `cmd:` (through /bin/sh -c). */
function shellWord(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** QEMU's arguments for a machine (pure): everything but the program itself. */
export function qemuArgs(o: VmOptions): string[] {
  const file = (name: string) => optionValue(path.join(o.dir, name));
  const { guestAddress, guestPort, hostAddress, hostPort } = o.forward;
  const pipe = [o.node ?? process.execPath, path.join(o.dir, VM_FILES.pipe), hostAddress, String(hostPort)]
    .map(shellWord)
    .join(' ');
  const args = [
    '-name',
    path.basename(o.dir),
    '-accel',
    // TCG emulates all the guest's processors on one host thread: with one thread each (MTTCG),
    // Debian's kernel was seen to die at boot on an int3 of its own code patching.
    o.accel === 'kvm' ? 'kvm' : 'tcg,thread=single',
    ...(o.accel === 'kvm' ? ['-cpu', 'host'] : []),
    '-machine',
    'q35',
    '-m',
    String(o.memoryMib),
    '-smp',
    String(o.cpus),
    '-nodefaults',
    '-display',
    'none',
    '-no-reboot',
    '-daemonize',
    '-pidfile',
    path.join(o.dir, VM_FILES.pid),
    // Relative to the machine's directory (QEMU's working directory): a unix socket's path is short.
    '-monitor',
    `unix:${VM_FILES.monitor},server=on,wait=off`,
    '-serial',
    `file:${o.serialLog}`,
    '-drive',
    `file=${file(VM_FILES.overlay)},if=virtio,format=qcow2`,
    '-drive',
    `file=${file(VM_FILES.seed)},if=virtio,format=raw,readonly=on`,
    '-netdev',
    `user,id=net0,restrict=on,guestfwd=tcp:${guestAddress}:${guestPort}-cmd:${optionValue(pipe)}`,
    '-device',
    'virtio-net-pci,netdev=net0',
  ];
  if (o.firmware === 'uefi') {
    args.push(
      '-drive',
      `if=pflash,format=raw,unit=0,readonly=on,file=${optionValue(OVMF.code)}`,
      '-drive',
      `if=pflash,format=raw,unit=1,file=${file(VM_FILES.uefiVars)}`,
    );
  }
  return args;
}

/**
 * Makes the machine's overlay, seed (and UEFI variables) and starts QEMU detached; resolves with its
 * pid once QEMU has daemonized (its errors, such as a missing image, reject with QEMU's message).
 */
export async function startVm(o: VmOptions, cloudInit: { userData: string; metaData: string }): Promise<number> {
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const overlay = path.join(o.dir, VM_FILES.overlay);
  fs.rmSync(overlay, { force: true });
  fs.rmSync(path.join(o.dir, VM_FILES.pid), { force: true });
  await run('qemu-img', [
    'create',
    '-q',
    '-f',
    'qcow2',
    '-F',
    o.imageFormat,
    '-b',
    o.image,
    overlay,
    String(o.diskBytes),
  ]);
  await makeSeed(path.join(o.dir, VM_FILES.seed), cloudInit.userData, cloudInit.metaData);
  fs.writeFileSync(path.join(o.dir, VM_FILES.pipe), TCP_PIPE_PROGRAM);
  if (o.firmware === 'uefi') fs.copyFileSync(OVMF.vars, path.join(o.dir, VM_FILES.uefiVars));
  const [program, ...prefix] = o.nice ? ['nice', '-n', '10', 'qemu-system-x86_64'] : ['qemu-system-x86_64'];
  try {
    await run(program, [...prefix, ...qemuArgs(o)], { cwd: o.dir, timeout: 60_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`QEMU did not start: ${(e.stderr || e.message).trim().slice(0, 2000)}`);
  }
  const pid = readPid(o.dir);
  if (pid === null) throw new Error(`QEMU started but wrote no pid file in ${o.dir}`);
  return pid;
}

/** The pid in a machine's pid file; null when there is none. */
export function readPid(dir: string): number | null {
  try {
    const pid = Number(fs.readFileSync(path.join(dir, VM_FILES.pid), 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Whether the QEMU of a machine's directory runs: its pid file names a live process (not a zombie)
 * whose command line names that pid file, so that a later process with the same pid is not taken for it.
 */
export function vmRunning(dir: string): boolean {
  const pid = readPid(dir);
  if (pid === null) return false;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(path.join(dir, VM_FILES.pid));
  } catch {
    return false;
  }
}

/** Runs one command on the machine's monitor (through its socket, by a short path) and resolves once it was sent. */
export async function monitorCommand(dir: string, command: string, timeoutMs = 5_000): Promise<void> {
  // A unix socket's path is at most 107 bytes: a long directory is reached through a descriptor of it.
  let fd: number | null = null;
  let socketPath = path.join(dir, VM_FILES.monitor);
  if (Buffer.byteLength(socketPath) > 100) {
    fd = fs.openSync(dir, 'r');
    socketPath = `/proc/self/fd/${fd}/${VM_FILES.monitor}`;
  }
  try {
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(socketPath);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`QEMU's monitor in ${dir} did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      // The monitor greets with its banner and a prompt; the command is sent after it, and the
      // connection closed once the monitor answered (its echo or next prompt), or after a second.
      socket.once('data', () => {
        socket.write(`${command}\n`);
        const done = () => {
          clearTimeout(timer);
          clearTimeout(answered);
          socket.end();
          resolve();
        };
        const answered = setTimeout(done, 1_000);
        socket.once('data', done);
      });
    });
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/** Presses the machine's ACPI power button. */
export function powerdown(dir: string): Promise<void> {
  return monitorCommand(dir, 'system_powerdown');
}

/** Kills the machine's QEMU (SIGKILL) if it runs. */
export function killVm(dir: string): void {
  const pid = readPid(dir);
  if (pid !== null && vmRunning(dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

/** The size in bytes of a disk image as a machine sees it. */
export async function virtualSize(image: string): Promise<number> {
  const { stdout } = await run('qemu-img', ['info', '--output=json', image]);
  return (JSON.parse(stdout) as { 'virtual-size': number })['virtual-size'];
}
