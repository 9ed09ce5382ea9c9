import { Migration } from '@mikro-orm/migrations';

/**
 * Fair share between workspaces at equal priority (DESIGN §17, scheduler/fair-share.ts): a fair key on
 * every work request, a fair-share clock on every workspace, and the class queue index ordered by
 * (priority, fair key, age, id). Requests already queued get keys as if each workspace had submitted
 * its queue one request per quantum (1000 ms) from its oldest request on.
 */
export class Migration20261123064500_fair_share extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "work_request" add column "fair_key" bigint not null default ((extract(epoch from now()) * 1000)::bigint);`,
    );
    this.addSql(`alter table "workspace" add column "fair_clock" bigint not null default 0;`);
    this.addSql(`update "work_request" w set "fair_key" = k.key
      from (select id, (extract(epoch from min(created_at) over (partition by workspace_id)) * 1000)::bigint
                       + (row_number() over (partition by workspace_id order by created_at, id) - 1) * 1000 as key
              from "work_request" where "status" in ('BLOCKED', 'PENDING')) k
     where w.id = k.id;`);
    this.addSql(`update "workspace" s set "fair_clock" = m.last
      from (select workspace_id, max(fair_key) as last from "work_request" where "status" in ('BLOCKED', 'PENDING') group by workspace_id) m
     where s.id = m.workspace_id;`);
    this.addSql(`drop index "work_request_pending_class_order";`);
    this.addSql(
      `create index "work_request_pending_class_order" on "work_request" ("class_id", ("priority_base" + "priority_adjustment") desc, "fair_key", "created_at", "id") where "status" = 'PENDING';`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "work_request_pending_class_order";`);
    this.addSql(
      `create index "work_request_pending_class_order" on "work_request" ("class_id", ("priority_base" + "priority_adjustment") desc, "created_at", "id") where "status" = 'PENDING';`,
    );
    this.addSql(`alter table "workspace" drop column "fair_clock";`);
    this.addSql(`alter table "work_request" drop column "fair_key";`);
  }
}
