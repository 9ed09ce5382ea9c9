/**
 * The database side of the cluster suite and its load balancer, everything on 127.0.0.1 under one temporary
 * directory, started by the suite with Debian's packages:
 *
 *   - etcd (etcd-server), the store Patroni keeps its leader key in;
 *   - two PostgreSQL 15 nodes managed by Patroni, synchronous replication (`synchronous_mode: true`), a
 *     crashed primary failed over at once (`primary_start_timeout: 0`);
 *   - HAProxy: two PostgreSQL ports routed to whichever node answers 200 to Patroni's `GET /primary` (the
 *     session port, for the tagsched processes' session URL, the suite's own SQL and a process without a
 *     pooler; the pooled port, for PgBouncer alone, whose connections HAProxy makes from 127.0.0.2 so that
 *     pg_stat_activity tells them apart), and the tagsched processes round robin in http mode (WebSocket
 *     upgrades, `timeout tunnel 1h`, `option forwardfor`, health check `GET /readyz`);
 *   - PgBouncer in transaction mode in front of the pooled port, with `idle_transaction_timeout` set as
 *     docs/operating/replicas.md asks (a paused process's open transaction, and its locks, end after 10 s).
 *
 * PostgreSQL and PgBouncer refuse to run as root: they run as the `postgres` user (setpriv, which execs,
 * so that the pid the suite holds is theirs). Every process is started in a process group of its own and
 * recorded in reaper.ts, which ends them whatever happens.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { killGroup, postmasterPid, trackDataDir, trackDir, trackGroup, untrackGroup } from './reaper.js';
import { until } from '../faults/harness.js';

export const PG_BIN = '/usr/lib/postgresql/15/bin';
/** The database the tagsched processes share. */
export const DATABASE = 'tagsched';
/** The application_name of the suite's own connections (left out of every count of the service's). */
export const SUITE_APP = 'cluster-suite';
/** The address HAProxy makes PgBouncer's server connections from. */
export const POOLED_SOURCE = '127.0.0.2';

/** The uid and gid of the `postgres` user. */
export function postgresUser(): { uid: number; gid: number } {
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('no postgres user (the postgresql package creates it)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Whether a TCP port on 127.0.0.1 can be listened on now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/**
 * `n` distinct free ports, below Linux's ephemeral range (32768 and up), so that no outgoing connection
 * takes one of them while a process is restarted on it.
 */
export async function freePorts(n: number): Promise<number[]> {
  const out: number[] = [];
  const start = 20_000 + Math.floor(Math.random() * 10_000);
  for (let p = start; out.length < n; p = p >= 32_000 ? 20_000 : p + 1) {
    if (await portFree(p)) out.push(p);
  }
  return out;
}

/** A long-running child of the suite, its output in a file. */
export interface Daemon {
  name: string;
  child: ChildProcess;
  logFile: string;
  exited: Promise<void>;
  running(): boolean;
  signal(signal: NodeJS.Signals): void;
  /** SIGKILLs its process group and waits for the process itself. */
  kill(): Promise<void>;
  /** Sends `signal` (SIGTERM) and waits up to `timeoutMs` for it to exit, then SIGKILLs the group. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<void>;
  /** The end of its log, for an error message. */
  tail(lines?: number): string;
}

/** Starts `cmd` in a process group of its own with stdout and stderr to `logFile` (as `postgres` when asked). */
export function startDaemon(
  name: string,
  cmd: string,
  args: readonly string[],
  options: { logFile: string; asPostgres?: boolean; env?: Record<string, string>; cwd?: string },
): Daemon {
  const fd = fs.openSync(options.logFile, 'a');
  const argv = options.asPostgres
    ? ['/usr/bin/setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', cmd, ...args]]
    : [cmd, [...args]];
  const child = spawn(argv[0] as string, argv[1] as string[], {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: options.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' },
    cwd: options.cwd,
  });
  fs.closeSync(fd);
  trackGroup(child.pid!);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      untrackGroup(child.pid!);
      resolve();
    }),
  );
  const running = () => child.exitCode === null && child.signalCode === null;
  const tail = (lines = 40) => {
    try {
      return fs.readFileSync(options.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  };
  return {
    name,
    child,
    logFile: options.logFile,
    exited,
    running,
    tail,
    signal: (signal) => {
      if (running()) child.kill(signal);
    },
    async kill() {
      if (!running()) return;
      killGroup(child.pid!);
      await exited;
    },
    async stop(signal = 'SIGTERM', timeoutMs = 15_000) {
      if (!running()) return;
      child.kill(signal);
      const timer = setTimeout(() => killGroup(child.pid!), timeoutMs);
      await exited;
      clearTimeout(timer);
      killGroup(child.pid!); // what it left in its group
    },
  };
}

/** The fault suites' `until` (test/faults/harness.ts), with the cluster's defaults: a minute, every 200 ms. */
export function waitFor<T>(
  what: string | (() => string),
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  return until(what, fn, timeoutMs, intervalMs);
}

/** The HTTP status of a GET, or 0 when nothing answered within `timeoutMs`. */
export async function httpStatus(url: string, timeoutMs = 2000): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** One PostgreSQL node and its Patroni. */
export interface PgNode {
  name: string;
  pgPort: number;
  apiPort: number;
  dir: string;
  dataDir: string;
  configFile: string;
  patroni: Daemon | null;
}

/** The ports the cluster listens on. */
export interface ClusterPorts {
  etcdClient: number;
  etcdPeer: number;
  /** HAProxy's PostgreSQL port for session connections (and for a process without a pooler). */
  pgSession: number;
  /** HAProxy's PostgreSQL port PgBouncer connects to. */
  pgPooled: number;
  pgbouncer: number;
  /** HAProxy's port in front of the tagsched processes. */
  http: number;
  /** The tagsched processes' own ports, in HAProxy's order. */
  tagsched: number[];
}

export interface Infra {
  dir: string;
  ports: ClusterPorts;
  nodes: PgNode[];
  scope: string;
  /** A URL of the primary through HAProxy's session port. */
  sessionUrl(db?: string): string;
  /** A URL through PgBouncer (transaction mode). */
  poolerUrl(db?: string): string;
  /** The GraphQL URL through HAProxy. */
  graphqlUrl: string;
  /** One statement on the primary (through the session port), as the suite (application_name cluster-suite). */
  sql<T = Record<string, any>>(query: string, params?: unknown[], db?: string): Promise<T[]>;
  /** The node whose Patroni answers 200 to GET /primary now, if one does. */
  primary(): Promise<PgNode | null>;
  /**
   * Waits for one primary (not `not`) that the session port reaches, and (unless `standby` is false) a
   * synchronous standby of it; returns the primary.
   */
  healthy(options?: { timeoutMs?: number; not?: PgNode; standby?: boolean }): Promise<PgNode>;
  /** `patronictl restart` of the primary's PostgreSQL (no failover). */
  restartPrimary(): Promise<PgNode>;
  /** SIGKILLs the primary's postmaster; returns the node and when it was killed (ms since the epoch). */
  killPrimaryPostmaster(): Promise<{ node: PgNode; pid: number; at: number }>;
  /** A command on HAProxy's admin socket (`disable server tagsched/t2`). */
  haproxy(command: string): Promise<string>;
  /** HAProxy's view of a backend's servers: name → status (UP, DOWN, MAINT…). */
  backendStatus(backend: string): Promise<Record<string, string>>;
  stop(): Promise<void>;
  daemons: Daemon[];
}

/** Options of startInfra. */
export interface InfraOptions {
  /** How many tagsched ports HAProxy balances over. */
  tagschedPorts: number;
  /** Where the processes' logs go (kept after the run); default: inside the temporary directory. */
  logDir?: string;
}

/**
 * Starts etcd, the two Patroni nodes (bootstrapped at once: one initialises, the other copies it), HAProxy
 * and PgBouncer, and creates the database `tagsched`; waits until the primary has a synchronous standby.
 */
export async function startInfra(options: InfraOptions): Promise<Infra> {
  const user = postgresUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-cluster-'));
  trackDir(dir);
  fs.chmodSync(dir, 0o755);
  const logDir = options.logDir ?? path.join(dir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  const all = await freePorts(10 + options.tagschedPorts);
  const [etcdClient, etcdPeer, pgSession, pgPooled, pgbouncerPort, http, pg1, api1, pg2, api2] = all;
  const ports: ClusterPorts = {
    etcdClient,
    etcdPeer,
    pgSession,
    pgPooled,
    pgbouncer: pgbouncerPort,
    http,
    tagsched: all.slice(10),
  };
  const scope = `tagsched-${path.basename(dir).slice(-6).toLowerCase()}`;
  const daemons: Daemon[] = [];
  const baseEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' };

  // etcd: one member, its data in the temporary directory.
  const etcdDir = path.join(dir, 'etcd');
  fs.mkdirSync(etcdDir);
  const etcd = startDaemon(
    'etcd',
    '/usr/bin/etcd',
    [
      '--name=e1',
      `--data-dir=${etcdDir}/data`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=e1=http://127.0.0.1:${etcdPeer}`,
      '--initial-cluster-state=new',
      '--logger=zap',
      '--log-level=warn',
    ],
    { logFile: path.join(logDir, 'etcd.log'), env: { ...baseEnv, HOME: etcdDir } },
  );
  daemons.push(etcd);
  await waitFor(
    () => `etcd to be healthy:\n${etcd.tail()}`,
    async () => {
      if (!etcd.running()) throw new Error('etcd exited');
      return (await httpStatus(`http://127.0.0.1:${etcdClient}/health`)) === 200;
    },
    30_000,
  );

  const nodes: PgNode[] = [
    { name: 'pg1', pgPort: pg1, apiPort: api1 },
    { name: 'pg2', pgPort: pg2, apiPort: api2 },
  ].map((n) => {
    const nodeDir = path.join(dir, n.name);
    fs.mkdirSync(nodeDir, { mode: 0o700 });
    fs.chownSync(nodeDir, user.uid, user.gid);
    const node: PgNode = {
      ...n,
      dir: nodeDir,
      dataDir: path.join(nodeDir, 'data'),
      configFile: path.join(dir, `${n.name}.yml`),
      patroni: null,
    };
    fs.writeFileSync(node.configFile, JSON.stringify(patroniConfig(node, scope, etcdClient), null, 2), { mode: 0o644 });
    trackDataDir(node.dataDir, user);
    return node;
  });
  const startPatroni = (node: PgNode) => {
    node.patroni = startDaemon('patroni', '/usr/bin/patroni', [node.configFile], {
      logFile: path.join(logDir, `patroni-${node.name}.log`),
      asPostgres: true,
      env: { ...baseEnv, HOME: node.dir },
      cwd: node.dir,
    });
    daemons.push(node.patroni);
  };
  for (const node of nodes) startPatroni(node);

  const haproxyDir = path.join(dir, 'haproxy');
  fs.mkdirSync(haproxyDir);
  const haproxyCfg = path.join(haproxyDir, 'haproxy.cfg');
  const haproxySocket = path.join(haproxyDir, 'admin.sock');
  fs.writeFileSync(haproxyCfg, haproxyConfig(ports, nodes, haproxySocket));
  const check = spawnSync('/usr/sbin/haproxy', ['-c', '-q', '-f', haproxyCfg], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`haproxy refused its configuration:\n${check.stdout}${check.stderr}`);
  const haproxy = startDaemon('haproxy', '/usr/sbin/haproxy', ['-db', '-f', haproxyCfg], {
    logFile: path.join(logDir, 'haproxy.log'),
    env: baseEnv,
  });
  daemons.push(haproxy);

  const bouncerDir = path.join(dir, 'pgbouncer');
  fs.mkdirSync(bouncerDir, { mode: 0o755 });
  fs.writeFileSync(path.join(bouncerDir, 'userlist.txt'), '"postgres" ""\n', { mode: 0o644 });
  fs.writeFileSync(path.join(bouncerDir, 'pgbouncer.ini'), pgbouncerConfig(ports, bouncerDir), { mode: 0o644 });
  const bouncer = startDaemon('pgbouncer', '/usr/sbin/pgbouncer', [path.join(bouncerDir, 'pgbouncer.ini')], {
    logFile: path.join(logDir, 'pgbouncer.log'),
    asPostgres: true,
    env: { ...baseEnv, HOME: bouncerDir },
  });
  daemons.push(bouncer);

  const url = (port: number, db: string) => `postgres://postgres@127.0.0.1:${port}/${db}`;
  const sql: Infra['sql'] = async (query, params = [], db = DATABASE) => {
    const c = new pg.Client({
      connectionString: url(pgSession, db),
      application_name: SUITE_APP,
      connectionTimeoutMillis: 5000,
      query_timeout: 20_000,
    });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query(query, params)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  const primary = async () => {
    for (const node of nodes) if ((await httpStatus(`http://127.0.0.1:${node.apiPort}/primary`)) === 200) return node;
    return null;
  };
  const healthy: Infra['healthy'] = async (options = {}) => {
    const timeoutMs = options.timeoutMs ?? 90_000;
    const describe = () => nodes.map((n) => `${n.name}:\n${n.patroni?.tail(15) ?? ''}`).join('\n');
    // One node says it is the primary, it is not the one to avoid, and the session port reaches it (a
    // Patroni that just lost its PostgreSQL may still answer from its cached role for a moment).
    const leader = await waitFor(
      () => `a Patroni primary${options.not ? ` other than ${options.not.name}` : ''}:\n${describe()}`,
      async () => {
        const said: PgNode[] = [];
        for (const node of nodes)
          if ((await httpStatus(`http://127.0.0.1:${node.apiPort}/primary`)) === 200) said.push(node);
        if (said.length !== 1 || said[0] === options.not) return null;
        const [row] = await sql<{ port: number; r: boolean }>(
          'select inet_server_port() as port, pg_is_in_recovery() as r',
          [],
          'postgres',
        );
        return row.port === said[0].pgPort && !row.r && said[0];
      },
      timeoutMs,
    );
    if (options.standby ?? true)
      await waitFor(
        () => `a synchronous standby of ${leader.name}:\n${describe()}`,
        async () => {
          for (const node of nodes)
            if (node !== leader && (await httpStatus(`http://127.0.0.1:${node.apiPort}/sync`)) === 200) return true;
          return false;
        },
        timeoutMs,
      );
    return leader;
  };
  const haproxyCommand = (command: string) =>
    new Promise<string>((resolve, reject) => {
      const s = net.connect(haproxySocket);
      let out = '';
      s.on('connect', () => s.end(`${command}\n`));
      s.on('data', (d) => (out += d.toString()));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });

  const infra: Infra = {
    dir,
    ports,
    nodes,
    scope,
    daemons,
    sessionUrl: (db = DATABASE) => url(pgSession, db),
    poolerUrl: (db = DATABASE) => url(pgbouncerPort, db),
    graphqlUrl: `http://127.0.0.1:${http}/graphql`,
    sql,
    primary,
    healthy,
    async restartPrimary() {
      const leader = await healthy();
      const r = spawnSync('/usr/bin/patronictl', ['-c', leader.configFile, 'restart', scope, leader.name, '--force'], {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...baseEnv, HOME: dir },
      });
      if (r.status !== 0) throw new Error(`patronictl restart failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
      return leader;
    },
    async killPrimaryPostmaster() {
      const leader = await healthy();
      const pid = postmasterPid(leader.dataDir);
      if (pid === null) throw new Error(`no postmaster.pid in ${leader.dataDir}`);
      process.kill(pid, 'SIGKILL');
      return { node: leader, pid, at: Date.now() };
    },
    haproxy: haproxyCommand,
    async backendStatus(backend) {
      const csv = await haproxyCommand('show stat');
      const out: Record<string, string> = {};
      for (const line of csv.split('\n')) {
        const [px, sv, ...rest] = line.split(',');
        if (px === backend && sv !== 'FRONTEND' && sv !== 'BACKEND') out[sv] = rest[15] ?? '';
      }
      return out;
    },
    async stop() {
      for (const d of [...daemons].reverse()) await d.stop('SIGTERM', 10_000);
    },
  };

  await infra.healthy();
  const exists = await sql('select 1 from pg_database where datname = $1', [DATABASE], 'postgres');
  if (!exists.length) await sql(`create database ${DATABASE}`, [], 'postgres');
  await waitFor(
    () => `PgBouncer to reach the primary:\n${bouncer.tail()}`,
    async () => {
      const c = new pg.Client({ connectionString: infra.poolerUrl(), connectionTimeoutMillis: 3000 });
      c.on('error', () => undefined);
      await c.connect();
      try {
        return (await c.query('select 1 as up')).rows[0].up === 1;
      } finally {
        await c.end().catch(() => undefined);
      }
    },
    30_000,
  );
  return infra;
}

/** Patroni's configuration of one node (JSON is YAML). */
function patroniConfig(node: PgNode, scope: string, etcdPort: number): Record<string, unknown> {
  const hba = ['local all all trust', 'host all all 127.0.0.0/8 trust', 'host replication all 127.0.0.0/8 trust'];
  return {
    scope,
    namespace: '/tagsched-cluster/',
    name: node.name,
    log: { level: 'INFO' },
    restapi: { listen: `127.0.0.1:${node.apiPort}`, connect_address: `127.0.0.1:${node.apiPort}` },
    etcd3: { host: `127.0.0.1:${etcdPort}` },
    bootstrap: {
      dcs: {
        ttl: 20,
        loop_wait: 1,
        retry_timeout: 5,
        maximum_lag_on_failover: 16 * 1024 * 1024,
        synchronous_mode: true,
        // A crashed primary is failed over at once rather than restarted in place (older name, newer name).
        master_start_timeout: 0,
        primary_start_timeout: 0,
        postgresql: {
          use_pg_rewind: true,
          use_slots: true,
          parameters: {
            max_connections: 300,
            wal_level: 'replica',
            hot_standby: 'on',
            wal_log_hints: 'on',
            max_wal_senders: 10,
            max_replication_slots: 10,
            wal_keep_size: '256MB',
          },
        },
      },
      initdb: [{ encoding: 'UTF8' }, { locale: 'C.UTF-8' }, 'data-checksums'],
    },
    postgresql: {
      listen: `127.0.0.1:${node.pgPort}`,
      connect_address: `127.0.0.1:${node.pgPort}`,
      data_dir: node.dataDir,
      bin_dir: PG_BIN,
      pgpass: path.join(node.dir, 'pgpass'),
      authentication: {
        superuser: { username: 'postgres', password: 'postgres' },
        replication: { username: 'replicator', password: 'replicator' },
        rewind: { username: 'rewinder', password: 'rewinder' },
      },
      parameters: { unix_socket_directories: node.dir },
      pg_hba: hba,
      remove_data_directory_on_rewind_failure: true,
      remove_data_directory_on_diverged_timelines: true,
    },
    tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
  };
}

/** HAProxy's configuration: the two PostgreSQL ports and the tagsched frontend. */
function haproxyConfig(ports: ClusterPorts, nodes: readonly PgNode[], socket: string): string {
  const pgServers = (extra = '') =>
    nodes.map((n) => `  server ${n.name} 127.0.0.1:${n.pgPort} check port ${n.apiPort}${extra}`).join('\n');
  const pgChecks = [
    '  mode tcp',
    '  option httpchk GET /primary',
    '  http-check expect status 200',
    '  timeout client 1h',
    '  timeout server 1h',
    // A node that stops being the primary loses its sessions at once: their clients reconnect to the new one.
    '  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions',
  ].join('\n');
  return `global
  maxconn 4096
  nbthread 1
  stats socket ${socket} mode 600 level admin
defaults
  log global
  timeout connect 2s
  timeout check 2s
  retries 3
listen pg_session
  bind 127.0.0.1:${ports.pgSession}
${pgChecks}
${pgServers()}
listen pg_pooled
  bind 127.0.0.1:${ports.pgPooled}
${pgChecks}
  source ${POOLED_SOURCE}
${pgServers()}
frontend tagsched
  bind 127.0.0.1:${ports.http}
  mode http
  option forwardfor
  timeout client 30s
  timeout http-request 10s
  timeout http-keep-alive 10s
  default_backend tagsched
backend tagsched
  mode http
  balance roundrobin
  option redispatch
  option httpchk GET /readyz
  http-check expect status 200
  timeout server 30s
  timeout tunnel 1h
  default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
${ports.tagsched.map((p, i) => `  server t${i + 1} 127.0.0.1:${p} check`).join('\n')}
`;
}

/** PgBouncer's configuration: transaction mode, every database to HAProxy's pooled port. */
function pgbouncerConfig(ports: ClusterPorts, dir: string): string {
  return `[databases]
* = host=127.0.0.1 port=${ports.pgPooled}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${ports.pgbouncer}
unix_socket_dir =
auth_type = trust
auth_file = ${dir}/userlist.txt
admin_users = postgres
stats_users = postgres
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
server_connect_timeout = 3
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
idle_transaction_timeout = 10
`;
}
