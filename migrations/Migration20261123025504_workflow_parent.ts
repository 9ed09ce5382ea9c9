import { Migration } from '@mikro-orm/migrations';

/** A workflow's children name it (services/orchestration.ts), indexed for `WorkRequest.children`. */
export class Migration20261123025504_workflow_parent extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "work_request" add column "parent_id" int null;`);
    this.addSql(
      `alter table "work_request" add constraint "work_request_parent_id_foreign" foreign key ("parent_id") references "work_request" ("id") on update cascade on delete set null;`,
    );
    this.addSql(`create index "work_request_parent" on "work_request" ("parent_id") where "parent_id" is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "work_request" drop constraint "work_request_parent_id_foreign";`);

    this.addSql(`drop index "work_request_parent";`);
    this.addSql(`alter table "work_request" drop column "parent_id";`);
  }
}
