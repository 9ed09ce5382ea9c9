/**
 * A QEMU virtual machine booted from a disk image for a test, as a cloud would boot it: a
 * copy-on-write overlay bigger than the image (so the root has room to grow), a NoCloud seed
 * (a vfat volume labelled CIDATA holding user-data and meta-data), user networking with
 * `restrict=on` and one guest address forwarded to a host port (the guest reaches the test
 * server and nothing else), BIOS (SeaBIOS) or UEFI (OVMF) firmware, the serial console in a log
 * file, and the monitor on stdin for an ACPI power-off. KVM when it works here, else TCG.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** OVMF's firmware and the template of its variable store (Debian's ovmf package). */
export const OVMF = { code: '/usr/share/OVMF/OVMF_CODE_4M.fd', vars: '/usr/share/OVMF/OVMF_VARS_4M.fd' } as const;

/** A host command from PATH or the sbin directories. */
function sbin(name: string): string {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/sbin']) {
    if (dir && fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return name;
}

/** How long GRUB may take to print its banner under KVM before KVM counts as unusable (TCG takes a few seconds). */
const KVM_PROBE_MS = 20_000;

/**
 * Whether QEMU's KVM acceleration runs this image here: /dev/kvm may exist while QEMU aborts on it
 * ("failed to set MSR 0x10a") or, as on this machine, crawls (GRUB's menu after minutes), so the
 * image itself is started under KVM until GRUB prints its banner on the serial console; no banner
 * in time means TCG.
 */
export async function probeAccel(image: string, imageFormat: 'raw' | 'qcow2', dir: string): Promise<'kvm' | 'tcg'> {
  if (!fs.existsSync('/dev/kvm')) return 'tcg';
  const overlay = path.join(dir, 'kvm-probe.qcow2');
  const log = path.join(dir, 'kvm-probe.log');
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', imageFormat, '-b', image, overlay]);
  const args = ['-accel', 'kvm', '-cpu', 'host', '-machine', 'q35', '-m', '512', '-nodefaults', '-display', 'none', '-no-reboot', '-serial', `file:${log}`];
  const child = spawn('qemu-system-x86_64', [...args, '-drive', `file=${overlay},if=virtio,format=qcow2`], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + KVM_PROBE_MS;
  let banner = false;
  while (!banner && child.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    banner = fs.existsSync(log) && fs.readFileSync(log, 'latin1').includes('GNU GRUB');
  }
  child.kill('SIGKILL');
  await exited;
  fs.rmSync(overlay, { force: true });
  return banner ? 'kvm' : 'tcg';
}

/** Writes a NoCloud seed volume (vfat, label CIDATA) with this user data and meta data. */
export async function makeSeed(file: string, userData: string, metaData: string): Promise<void> {
  const dir = fs.mkdtempSync(`${file}-`);
  try {
    fs.writeFileSync(path.join(dir, 'user-data'), userData);
    fs.writeFileSync(path.join(dir, 'meta-data'), metaData);
    fs.rmSync(file, { force: true });
    await run(sbin('mkfs.vfat'), ['-n', 'CIDATA', '-C', file, '2048']);
    await run('mcopy', ['-i', file, path.join(dir, 'user-data'), path.join(dir, 'meta-data'), '::/'], { env: { ...process.env, MTOOLS_SKIP_CHECK: '1' } });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Copies one TCP connection between stdin/stdout (QEMU's guest socket) and a host port. */
const PIPE_SCRIPT = `import net from 'node:net';
const socket = net.connect(Number(process.argv[3]), process.argv[2]);
process.stdin.pipe(socket);
socket.pipe(process.stdout);
socket.on('close', () => process.exit(0));
socket.on('error', () => process.exit(1));
`;

/** How to boot one machine. */
export interface VmOptions {
  readonly dir: string;
  readonly image: string;
  readonly imageFormat: 'raw' | 'qcow2';
  readonly firmware: 'bios' | 'uefi';
  readonly accel: 'kvm' | 'tcg';
  /** The overlay's size: the disk the machine sees. */
  readonly diskBytes: number;
  readonly userData: string;
  readonly metaData: string;
  /** The guest address and port forwarded to the host port `hostPort` on 127.0.0.1. */
  readonly forward: { readonly guestAddress: string; readonly guestPort: number; readonly hostPort: number };
  readonly serialLog: string;
  readonly memoryMib?: number;
}

/** A running machine. */
export interface Vm {
  readonly child: ChildProcess;
  /** Resolves when QEMU exits. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The serial console so far. */
  serial(): string;
  /** Presses the ACPI power button (QEMU's monitor `system_powerdown`). */
  powerdown(): void;
  kill(): Promise<void>;
}

/** Creates the overlay and the seed, and starts QEMU. */
export async function startVm(o: VmOptions): Promise<Vm> {
  const overlay = path.join(o.dir, `${o.firmware}-overlay.qcow2`);
  const seed = path.join(o.dir, `${o.firmware}-seed.vfat`);
  const pipe = path.join(o.dir, 'tcp-pipe.mjs');
  fs.rmSync(overlay, { force: true });
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', o.imageFormat, '-b', o.image, overlay, String(o.diskBytes)]);
  await makeSeed(seed, o.userData, o.metaData);
  fs.writeFileSync(pipe, PIPE_SCRIPT);
  fs.rmSync(o.serialLog, { force: true });
  const { guestAddress, guestPort, hostPort } = o.forward;
  const args = [
    '-accel',
    o.accel,
    ...(o.accel === 'kvm' ? ['-cpu', 'host'] : []),
    '-machine',
    'q35',
    '-m',
    String(o.memoryMib ?? 1024),
    '-smp',
    '2',
    '-nodefaults',
    '-display',
    'none',
    '-no-reboot',
    '-serial',
    `file:${o.serialLog}`,
    '-monitor',
    'stdio',
    '-drive',
    `file=${overlay},if=virtio,format=qcow2`,
    '-drive',
    `file=${seed},if=virtio,format=raw,readonly=on`,
    '-netdev',
    `user,id=net0,restrict=on,guestfwd=tcp:${guestAddress}:${guestPort}-cmd:${process.execPath} ${pipe} 127.0.0.1 ${hostPort}`,
    '-device',
    'virtio-net-pci,netdev=net0',
  ];
  if (o.firmware === 'uefi') {
    const vars = path.join(o.dir, 'uefi-vars.fd');
    fs.copyFileSync(OVMF.vars, vars);
    args.push('-drive', `if=pflash,format=raw,unit=0,readonly=on,file=${OVMF.code}`, '-drive', `if=pflash,format=raw,unit=1,file=${vars}`);
  }
  const child = spawn('nice', ['-n', '10', 'qemu-system-x86_64', ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const serial = () => {
    const console = fs.existsSync(o.serialLog) ? fs.readFileSync(o.serialLog, 'utf8') : '';
    return stderr ? `${console}\n[qemu stderr]\n${stderr}` : console;
  };
  return {
    child,
    exited,
    serial,
    powerdown: () => child.stdin!.write('system_powerdown\n'),
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The size in bytes of a disk image as a machine sees it. */
export function virtualSize(image: string): number {
  return (JSON.parse(execFileSync('qemu-img', ['info', '--output=json', image], { encoding: 'utf8' })) as { 'virtual-size': number })['virtual-size'];
}
