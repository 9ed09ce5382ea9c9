/**
 * Runs a systemd service of an unpacked image the way systemd would start it, without booting
 * the image: the unit's ExecStart as its User (root without one), with its Environment= and then its
 * EnvironmentFiles (read as root, as PID 1 reads them), its StateDirectory made, its WorkingDirectory, and the variables systemd gives a service, in a chroot with
 * its own mount and pid namespaces and a fresh /proc (gone when the process ends). The network is
 * the host's, so the agent reaches a server on 127.0.0.1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseAgentConfigFile } from '../../src/providers/user-data.js';

/** The [Service] settings the runner honours; anything else in the unit is for systemd only. */
export interface ServiceSettings {
  execStart: string[];
  user: string;
  group: string;
  /** Environment= assignments, in order. */
  environment: Record<string, string>;
  environmentFiles: string[];
  workingDirectory: string;
  /** StateDirectory= (under /var/lib) and its mode, or null. */
  stateDirectory: { name: string; mode: number } | null;
}

/** The values of each key of a unit section (a key may repeat, as EnvironmentFile= does). */
export function unitSection(text: string, section: string): Map<string, string[]> {
  const values = new Map<string, string[]>();
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = header[1];
      continue;
    }
    if (current !== section) continue;
    const eq = line.indexOf('=');
    const key = line.slice(0, eq).trim();
    values.set(key, [...(values.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return values;
}

/** Reads the settings of a service unit; fails on what this runner cannot honour. */
export function serviceSettings(unitText: string): ServiceSettings {
  const s = unitSection(unitText, 'Service');
  const one = (key: string) => {
    const v = s.get(key);
    if (!v || v.length !== 1) throw new Error(`the unit must have exactly one ${key}=, has ${JSON.stringify(v ?? [])}`);
    return v[0];
  };
  const execStart = one('ExecStart').split(/\s+/);
  if (!execStart[0].startsWith('/'))
    throw new Error(`ExecStart= must start with an absolute path, got ${execStart[0]}`);
  const optional = (key: string) => (s.has(key) ? one(key) : null);
  const environment: Record<string, string> = {};
  for (const assignment of s.get('Environment') ?? []) {
    const eq = assignment.indexOf('=');
    if (eq < 1 || /\s/.test(assignment))
      throw new Error(`Environment=${assignment}: only one unquoted KEY=VALUE per line is understood here`);
    environment[assignment.slice(0, eq)] = assignment.slice(eq + 1);
  }
  const stateDirectory = optional('StateDirectory');
  return {
    execStart,
    user: optional('User') ?? 'root',
    group: optional('Group') ?? 'root',
    environment,
    environmentFiles: s.get('EnvironmentFile') ?? [],
    workingDirectory: one('WorkingDirectory'),
    stateDirectory: stateDirectory
      ? { name: stateDirectory, mode: parseInt(optional('StateDirectoryMode') ?? '0755', 8) }
      : null,
  };
}

/** The environment systemd gives the service: its defaults, the user's, then each file in order (a later one wins). */
export function serviceEnvironment(root: string, settings: ServiceSettings): Record<string, string> {
  const env: Record<string, string> = {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin',
    LANG: 'C.UTF-8',
    USER: settings.user,
    LOGNAME: settings.user,
    HOME: settings.workingDirectory,
    SHELL: '/usr/sbin/nologin',
    ...settings.environment,
  };
  for (const file of settings.environmentFiles) {
    const optional = file.startsWith('-');
    const inTree = path.join(root, optional ? file.slice(1) : file);
    if (!fs.existsSync(inTree)) {
      if (optional) continue;
      throw new Error(`EnvironmentFile ${file} is missing from the image`);
    }
    Object.assign(env, parseAgentConfigFile(fs.readFileSync(inTree, 'utf8')));
  }
  return env;
}

/** A started service: `child` is unshare, `signal` reaches the service's own process, as systemctl's would. */
export interface StartedService {
  child: ChildProcess;
  settings: ServiceSettings;
  env: Record<string, string>;
  /**
   * Signals the service's process (the init of its pid namespace: it gets the signals it handles).
   * unshare forwards none, and the kernel drops its --kill-child when chroot changes the user, so
   * the signal goes to unshare's child by its pid; unshare then exits with the service's status.
   */
  signal(signal: NodeJS.Signals): void;
}

/** The pid, in this pid namespace, of the process unshare forked (the service itself, once chroot and env exec'd). */
function forkedChild(unsharePid: number): number | null {
  try {
    const children = fs
      .readFileSync(`/proc/${unsharePid}/task/${unsharePid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean);
    return children.length ? Number(children[0]) : null;
  } catch {
    return null;
  }
}

/** Starts the service's process in the tree at `root`; the caller stops it. */
export function startService(root: string, unitPath: string): StartedService {
  const settings = serviceSettings(fs.readFileSync(path.join(root, unitPath), 'utf8'));
  const env = serviceEnvironment(root, settings);
  if (settings.stateDirectory) {
    // systemd makes it, owned by the service's user (root here when the unit names none).
    const dir = path.join(root, 'var/lib', settings.stateDirectory.name);
    fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dir, settings.stateDirectory.mode);
  }
  const child = spawn(
    'unshare',
    [
      '--mount',
      '--pid',
      '--fork',
      `--mount-proc=${path.join(root, 'proc')}`,
      'chroot',
      `--userspec=${settings.user}:${settings.group}`,
      root,
      '/usr/bin/env',
      '-i',
      `--chdir=${settings.workingDirectory}`,
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      ...settings.execStart,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  return {
    child,
    settings,
    env,
    signal(signal) {
      const pid = child.pid === undefined ? null : forkedChild(child.pid);
      if (pid === null) throw new Error('the service process is not running');
      process.kill(pid, signal);
    },
  };
}
