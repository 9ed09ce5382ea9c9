import { Migration } from '@mikro-orm/migrations';

/**
 * Pending work requests per task class, kept exact by PostgreSQL itself: statement triggers on
 * `work_request` (with transition tables, so a pass's one UPDATE of 14,000 rows costs one aggregate,
 * not 14,000 calls) append one row per class whose pending count the statement changed, with the
 * change. The count of a class is the sum of its rows, so concurrent writers only ever insert and
 * never wait on each other (a single counter row per class would serialise every assignment of a
 * class until its commit); scheduler/pending-counts.ts reads the sums and folds the rows. Whoever
 * changes a request (creation, assignment, release, abort, lease expiry, reclassification, deletion,
 * truncation) changes the counts in the same transaction. Demand and the metrics read these few
 * hundred rows instead of counting a million pending requests.
 */
export class Migration20261126100100_class_pending_count extends Migration {
  override async up(): Promise<void> {
    // No write to work_request between the copy below and the triggers: the copy starts exact (the migration is one transaction).
    this.addSql(`lock table "work_request" in share row exclusive mode;`);
    this.addSql(
      `create table "class_pending_count" ("id" bigserial primary key, "class_id" int null, "n" int not null);`,
    );
    this.addSql(`create or replace function "class_pending_count_insert"() returns trigger language plpgsql as $$
      begin
        insert into "class_pending_count" ("class_id", "n")
          select "class_id", count(*) from "new_rows" where "status" = 'PENDING' group by "class_id";
        return null;
      end
    $$;`);
    this.addSql(`create or replace function "class_pending_count_update"() returns trigger language plpgsql as $$
      begin
        insert into "class_pending_count" ("class_id", "n")
          select "class_id", sum("d") from (
            select "class_id", 1 as "d" from "new_rows" where "status" = 'PENDING'
            union all
            select "class_id", -1 from "old_rows" where "status" = 'PENDING'
          ) "x" group by "class_id" having sum("d") <> 0;
        return null;
      end
    $$;`);
    this.addSql(`create or replace function "class_pending_count_delete"() returns trigger language plpgsql as $$
      begin
        insert into "class_pending_count" ("class_id", "n")
          select "class_id", -count(*) from "old_rows" where "status" = 'PENDING' group by "class_id";
        return null;
      end
    $$;`);
    this.addSql(`create or replace function "class_pending_count_truncate"() returns trigger language plpgsql as $$
      begin
        delete from "class_pending_count";
        return null;
      end
    $$;`);
    this.addSql(
      `create trigger "class_pending_count_insert" after insert on "work_request" referencing new table as "new_rows" for each statement execute function "class_pending_count_insert"();`,
    );
    this.addSql(
      `create trigger "class_pending_count_update" after update on "work_request" referencing old table as "old_rows" new table as "new_rows" for each statement execute function "class_pending_count_update"();`,
    );
    this.addSql(
      `create trigger "class_pending_count_delete" after delete on "work_request" referencing old table as "old_rows" for each statement execute function "class_pending_count_delete"();`,
    );
    this.addSql(
      `create trigger "class_pending_count_truncate" after truncate on "work_request" for each statement execute function "class_pending_count_truncate"();`,
    );
    this.addSql(
      `insert into "class_pending_count" ("class_id", "n") select "class_id", count(*) from "work_request" where "status" = 'PENDING' group by "class_id";`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists "class_pending_count_truncate" on "work_request";`);
    this.addSql(`drop trigger if exists "class_pending_count_delete" on "work_request";`);
    this.addSql(`drop trigger if exists "class_pending_count_update" on "work_request";`);
    this.addSql(`drop trigger if exists "class_pending_count_insert" on "work_request";`);
    this.addSql(`drop function if exists "class_pending_count_truncate"();`);
    this.addSql(`drop function if exists "class_pending_count_delete"();`);
    this.addSql(`drop function if exists "class_pending_count_update"();`);
    this.addSql(`drop function if exists "class_pending_count_insert"();`);
    this.addSql(`drop table if exists "class_pending_count" cascade;`);
  }
}
