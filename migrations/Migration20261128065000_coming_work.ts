import { Migration } from '@mikro-orm/migrations';

/**
 * Coming work (scheduler/rules/look-ahead.ts): a BLOCKED request keeps the class its tags had at
 * submission, so demand can count it before it is queued; and the dependents of a request are found
 * by an index, not a scan of every dependency (demand's look-ahead, settling a completed request's dependents).
 */
export class Migration20261128065000_coming_work extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "work_request" add column "expected_class_id" int null;`);
    this.addSql(`create index "work_request_dependency_depends_on" on "work_request_dependency" ("depends_on_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "work_request_dependency_depends_on";`);
    this.addSql(`alter table "work_request" drop column "expected_class_id";`);
  }
}
