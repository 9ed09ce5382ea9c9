import { Migration } from '@mikro-orm/migrations';

/**
 * A narrow copy of what changes about a worker while it runs (availability, last completion) and
 * of its shape version, kept by PostgreSQL itself: an AFTER trigger on `worker` writes the copy when
 * a worker is inserted or one of those columns changes (a heartbeat, which only moves last_seen_at,
 * does not fire it), and the copy goes with its worker (on delete cascade). The bulk questions
 * (scheduler/worker-snapshot.ts) read 10,000 workers' state from this table, about 1 MB, instead of
 * the worker rows, about 40 MB with their tags, metadata and provenance. Its two times are also kept
 * as epoch milliseconds, computed as availabilityColumns computes them, once per change rather than
 * for every worker at every read (the numeric arithmetic was most of the statement).
 */
export class Migration20261126100000_worker_state extends Migration {
  override async up(): Promise<void> {
    // No write to worker between the copy below and the triggers: the copy starts exact (the migration is one transaction).
    this.addSql(`lock table "worker" in share row exclusive mode;`);
    this.addSql(
      `create table "worker_state" ("worker_id" int not null, "shape_version" bigint not null, "type" text not null, "enabled" boolean not null, "draining" boolean not null, "shutting_down" boolean not null, "connected_at" timestamptz null, "metadata_reported_at" timestamptz null, "quarantined_at" timestamptz null, "terminated_at" timestamptz null, "last_completed_at" timestamptz null, "reported_ms" double precision null, "last_completed_ms" double precision null, constraint "worker_state_pkey" primary key ("worker_id"));`,
    );
    this.addSql(
      `alter table "worker_state" add constraint "worker_state_worker_id_foreign" foreign key ("worker_id") references "worker" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(`create or replace function "worker_state_copy"() returns trigger language plpgsql as $$
      begin
        insert into "worker_state" ("worker_id", "shape_version", "type", "enabled", "draining", "shutting_down", "connected_at",
                                    "metadata_reported_at", "quarantined_at", "terminated_at", "last_completed_at", "reported_ms", "last_completed_ms")
        values (new."id", new."shape_version", new."type", new."enabled", new."draining", new."shutting_down", new."connected_at",
                new."metadata_reported_at", new."quarantined_at", new."terminated_at", new."last_completed_at",
                (extract(epoch from new."metadata_reported_at") * 1000)::float8, (extract(epoch from new."last_completed_at") * 1000)::float8)
        on conflict ("worker_id") do update set
          "shape_version" = excluded."shape_version", "type" = excluded."type", "enabled" = excluded."enabled",
          "draining" = excluded."draining", "shutting_down" = excluded."shutting_down", "connected_at" = excluded."connected_at",
          "metadata_reported_at" = excluded."metadata_reported_at", "quarantined_at" = excluded."quarantined_at",
          "terminated_at" = excluded."terminated_at", "last_completed_at" = excluded."last_completed_at",
          "reported_ms" = excluded."reported_ms", "last_completed_ms" = excluded."last_completed_ms";
        return null;
      end
    $$;`);
    this.addSql(
      `create trigger "worker_state_new" after insert on "worker" for each row execute function "worker_state_copy"();`,
    );
    // The id too: worker_state follows it by the foreign key, and the copy is written again to be sure.
    this.addSql(`create trigger "worker_state_changed" after update on "worker" for each row when (
         old.id is distinct from new.id or old.shape_version is distinct from new.shape_version or old.type is distinct from new.type
      or old.enabled is distinct from new.enabled or old.draining is distinct from new.draining or old.shutting_down is distinct from new.shutting_down
      or old.connected_at is distinct from new.connected_at or old.metadata_reported_at is distinct from new.metadata_reported_at
      or old.quarantined_at is distinct from new.quarantined_at or old.terminated_at is distinct from new.terminated_at
      or old.last_completed_at is distinct from new.last_completed_at)
      execute function "worker_state_copy"();`);
    this
      .addSql(`insert into "worker_state" ("worker_id", "shape_version", "type", "enabled", "draining", "shutting_down", "connected_at",
                                   "metadata_reported_at", "quarantined_at", "terminated_at", "last_completed_at", "reported_ms", "last_completed_ms")
      select "id", "shape_version", "type", "enabled", "draining", "shutting_down", "connected_at", "metadata_reported_at", "quarantined_at",
             "terminated_at", "last_completed_at", (extract(epoch from "metadata_reported_at") * 1000)::float8,
             (extract(epoch from "last_completed_at") * 1000)::float8 from "worker";`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists "worker_state_changed" on "worker";`);
    this.addSql(`drop trigger if exists "worker_state_new" on "worker";`);
    this.addSql(`drop function if exists "worker_state_copy"();`);
    this.addSql(`drop table if exists "worker_state" cascade;`);
  }
}
