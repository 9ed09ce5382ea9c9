/**
 * The history the suite judges by. The API keeps no history of a request's assignments or of a worker's
 * connected state (a request shows its last worker and its retry count), so the suite installs two
 * triggers of its own on the primary, in a schema of its own: every change of a work request's status,
 * worker or retry count, and every change of a worker between connected and disconnected (or of the
 * process holding it), is appended to a table with the time (clock_timestamp()) and the application_name
 * of the session that made it (each process names its connections after itself, PGAPPNAME). A trigger's
 * row is written in the transaction that made the change: only what was committed is there.
 */
import type { Infra } from './infra.js';

const SETUP = `
create schema if not exists cluster_audit;
create table if not exists cluster_audit.work_request_change (
  seq bigserial primary key,
  request int not null,
  status text not null,
  worker_id int,
  retry_count int not null,
  at timestamptz not null default clock_timestamp(),
  by text not null default current_setting('application_name')
);
create table if not exists cluster_audit.worker_change (
  seq bigserial primary key,
  worker_id int not null,
  name text not null,
  connected boolean not null,
  process_id int,
  at timestamptz not null default clock_timestamp(),
  by text not null default current_setting('application_name')
);
create or replace function cluster_audit.on_work_request() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' or old.status is distinct from new.status or old.worker_id is distinct from new.worker_id
     or old.retry_count is distinct from new.retry_count then
    insert into cluster_audit.work_request_change (request, status, worker_id, retry_count)
    values (new.id, new.status, new.worker_id, new.retry_count);
  end if;
  return new;
end $$;
create or replace function cluster_audit.on_worker() returns trigger language plpgsql as $$
declare
  before_process text := case when tg_op = 'INSERT' then null else to_jsonb(old) ->> 'connected_process_id' end;
  after_process text := to_jsonb(new) ->> 'connected_process_id';
begin
  if tg_op = 'INSERT' or (old.connected_at is null) <> (new.connected_at is null)
     or before_process is distinct from after_process then
    insert into cluster_audit.worker_change (worker_id, name, connected, process_id)
    values (new.id, new.name, new.connected_at is not null, after_process::int);
  end if;
  return new;
end $$;
drop trigger if exists cluster_audit_work_request on work_request;
create trigger cluster_audit_work_request after insert or update on work_request
  for each row execute function cluster_audit.on_work_request();
drop trigger if exists cluster_audit_worker on worker;
create trigger cluster_audit_worker after insert or update on worker
  for each row execute function cluster_audit.on_worker();
`;

/** Installs the triggers (once the first process has migrated the database). */
export async function installAudit(infra: Infra): Promise<void> {
  await infra.sql(SETUP);
}

/** One recorded change of a work request. */
export interface RequestChange {
  request: string;
  status: string;
  workerId: number | null;
  retryCount: number;
  at: number;
  by: string;
}

/** One recorded change of a worker's connected state. */
export interface WorkerChange {
  workerId: number;
  name: string;
  connected: boolean;
  processId: number | null;
  at: number;
  by: string;
}

/** The recorded changes of work requests, in order. */
export async function requestChanges(infra: Infra, since = 0): Promise<RequestChange[]> {
  const rows = await infra.sql<{
    request: number;
    status: string;
    worker_id: number | null;
    retry_count: number;
    at: Date;
    by: string;
  }>(
    `select request, status, worker_id, retry_count, at, by from cluster_audit.work_request_change
      where at >= to_timestamp($1 / 1000.0) order by seq`,
    [since],
  );
  return rows.map((r) => ({
    request: String(r.request),
    status: r.status,
    workerId: r.worker_id,
    retryCount: r.retry_count,
    at: r.at.getTime(),
    by: r.by,
  }));
}

/** The recorded changes of workers' connected state, in order. */
export async function workerChanges(infra: Infra, since = 0): Promise<WorkerChange[]> {
  const rows = await infra.sql<{
    worker_id: number;
    name: string;
    connected: boolean;
    process_id: number | null;
    at: Date;
    by: string;
  }>(
    `select worker_id, name, connected, process_id, at, by from cluster_audit.worker_change
      where at >= to_timestamp($1 / 1000.0) order by seq`,
    [since],
  );
  return rows.map((r) => ({
    workerId: r.worker_id,
    name: r.name,
    connected: r.connected,
    processId: r.process_id,
    at: r.at.getTime(),
    by: r.by,
  }));
}
