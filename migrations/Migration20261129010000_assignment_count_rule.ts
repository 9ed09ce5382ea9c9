import { Migration } from '@mikro-orm/migrations';

/**
 * The functions of the triggers that count a pool worker's assignments (migration 20261128066000),
 * written again as src/scheduler/rules/instance-retirement.ts's assignmentCountFunctionsSql() wrote
 * them on this migration's day: the request limit as that module states it. They count as the earlier
 * ones did. A migration keeps its text; test/provisioner/retirement-cycle.test.ts checks that the
 * database's functions are the module's, so a change of the rule there needs a migration of its own.
 */
export class Migration20261129010000_assignment_count_rule extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create or replace function "worker_assignment_count_update"() returns trigger language plpgsql as $$
      begin
        with counted as (select n."worker_id", count(*)::int as n from "new_rows" n join "old_rows" o on o."id" = n."id"
        where n."status" = 'ASSIGNED' and n."worker_id" is not null and (o."status" <> 'ASSIGNED' or o."worker_id" is distinct from n."worker_id")
        group by n."worker_id")
        update "worker" w
           set "assigned_total" = w."assigned_total" + c.n,
               "draining" = w."draining" or (p."max_work_requests_per_instance" is not null and w."assigned_total" + c.n >= p."max_work_requests_per_instance"),
               "retiring_reason" = coalesce(w."retiring_reason", case when (p."max_work_requests_per_instance" is not null and w."assigned_total" + c.n >= p."max_work_requests_per_instance") then 'WORK_REQUESTS' end)
          from counted c, "worker_pool" p
         where w."id" = c."worker_id" and p."id" = w."pool_id" and p."max_work_requests_per_instance" is not null;
        return null;
      end$$;`);
    this.addSql(`create or replace function "worker_assignment_count_insert"() returns trigger language plpgsql as $$
      begin
        with counted as (select n."worker_id", count(*)::int as n from "new_rows" n where n."status" = 'ASSIGNED' and n."worker_id" is not null group by n."worker_id")
        update "worker" w
           set "assigned_total" = w."assigned_total" + c.n,
               "draining" = w."draining" or (p."max_work_requests_per_instance" is not null and w."assigned_total" + c.n >= p."max_work_requests_per_instance"),
               "retiring_reason" = coalesce(w."retiring_reason", case when (p."max_work_requests_per_instance" is not null and w."assigned_total" + c.n >= p."max_work_requests_per_instance") then 'WORK_REQUESTS' end)
          from counted c, "worker_pool" p
         where w."id" = c."worker_id" and p."id" = w."pool_id" and p."max_work_requests_per_instance" is not null;
        return null;
      end$$;`);
  }

  override async down(): Promise<void> {
    // Nothing to undo: the functions count as the earlier ones did, and 20261128066000's down drops them.
  }
}
