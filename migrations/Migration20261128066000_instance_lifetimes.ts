import { Migration } from '@mikro-orm/migrations';

/**
 * Pool workers that retire (src/scheduler/rules/instance-retirement.ts): a pool's maximum requests
 * per instance, maximum instance lifetime and replacements at a time (rollouts); a worker's count of
 * assignments and why it retires; what each instance was launched from.
 * The count is kept by PostgreSQL: statement triggers on work_request (transition tables: one UPDATE
 * of the workers per statement) count the requests newly ASSIGNED to each worker of a pool with a
 * limit, and drain the worker in the same transaction when it reaches it. Workers of pools without
 * a limit are neither counted nor written.
 */
export class Migration20261128066000_instance_lifetimes extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "worker_pool" add column "max_instance_lifetime_seconds" int null, add column "max_work_requests_per_instance" int null;`,
    );
    this.addSql(
      `alter table "worker" add column "assigned_total" int not null default 0, add column "retiring_reason" varchar(20) null;`,
    );
    // Rollouts: what each instance was launched from, and how many a pool replaces at a time.
    this.addSql(`alter table "instance" add column "template_fingerprint" varchar(64) null;`);
    this.addSql(`alter table "worker_pool" add column "max_replacing_instances" int not null default 1;`);
    const body = (newlyAssigned: string) => `
      begin
        with counted as (${newlyAssigned})
        update "worker" w
           set "assigned_total" = w."assigned_total" + c.n,
               "draining" = w."draining" or w."assigned_total" + c.n >= p."max_work_requests_per_instance",
               "retiring_reason" = coalesce(w."retiring_reason", case when w."assigned_total" + c.n >= p."max_work_requests_per_instance" then 'WORK_REQUESTS' end)
          from counted c, "worker_pool" p
         where w."id" = c."worker_id" and p."id" = w."pool_id" and p."max_work_requests_per_instance" is not null;
        return null;
      end`;
    this.addSql(
      `create or replace function "worker_assignment_count_update"() returns trigger language plpgsql as $$${body(
        `select n."worker_id", count(*)::int as n from "new_rows" n join "old_rows" o on o."id" = n."id"
        where n."status" = 'ASSIGNED' and n."worker_id" is not null and (o."status" <> 'ASSIGNED' or o."worker_id" is distinct from n."worker_id")
        group by n."worker_id"`,
      )}$$;`,
    );
    this.addSql(
      `create or replace function "worker_assignment_count_insert"() returns trigger language plpgsql as $$${body(
        `select n."worker_id", count(*)::int as n from "new_rows" n where n."status" = 'ASSIGNED' and n."worker_id" is not null group by n."worker_id"`,
      )}$$;`,
    );
    this.addSql(
      `create trigger "worker_assignment_count_update" after update on "work_request" referencing old table as "old_rows" new table as "new_rows" for each statement execute function "worker_assignment_count_update"();`,
    );
    this.addSql(
      `create trigger "worker_assignment_count_insert" after insert on "work_request" referencing new table as "new_rows" for each statement execute function "worker_assignment_count_insert"();`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger "worker_assignment_count_insert" on "work_request";`);
    this.addSql(`drop trigger "worker_assignment_count_update" on "work_request";`);
    this.addSql(`drop function "worker_assignment_count_insert"();`);
    this.addSql(`drop function "worker_assignment_count_update"();`);
    this.addSql(`alter table "worker" drop column "assigned_total", drop column "retiring_reason";`);
    this.addSql(`alter table "instance" drop column "template_fingerprint";`);
    this.addSql(
      `alter table "worker_pool" drop column "max_instance_lifetime_seconds", drop column "max_work_requests_per_instance", drop column "max_replacing_instances";`,
    );
  }
}
