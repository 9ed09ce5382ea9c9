/**
 * A QEMU machine the boot test starts itself (not through a pool), with the qemu provider's own
 * machinery (src/providers/qemu-vm.ts): the same overlay, seed, networking and detached
 * QEMU, plus what a test needs to watch it: its serial console, and a promise of its end.
 */
import fs from 'node:fs';
import { killVm, powerdown, startVm, vmRunning, type VmOptions } from '../../src/providers/qemu-vm.js';

/** A running machine. */
export interface Vm {
  readonly dir: string;
  /** Resolves when QEMU is gone. */
  readonly exited: Promise<void>;
  /** The serial console so far. */
  serial(): string;
  /** Presses the ACPI power button (the monitor's `system_powerdown`). */
  powerdown(): Promise<void>;
  kill(): Promise<void>;
}

/** Starts a machine (nice'd: the test shares the machine) and watches it. */
export async function bootVm(options: VmOptions, cloudInit: { userData: string; metaData: string }): Promise<Vm> {
  fs.rmSync(options.serialLog, { force: true });
  await startVm({ ...options, nice: true }, cloudInit);
  let gone: () => void;
  const exited = new Promise<void>((resolve) => (gone = resolve));
  const watch = setInterval(() => {
    if (!vmRunning(options.dir)) {
      clearInterval(watch);
      gone();
    }
  }, 500);
  return {
    dir: options.dir,
    exited,
    serial: () => (fs.existsSync(options.serialLog) ? fs.readFileSync(options.serialLog, 'utf8') : ''),
    powerdown: () => powerdown(options.dir),
    kill: async () => {
      killVm(options.dir);
      await exited;
    },
  };
}
