import { Migration } from '@mikro-orm/migrations';

/**
 * The GIN tag indexes of work requests leave out ASSIGNED and RUNNING requests: an assignment and a
 * start then write no GIN entries (about forty per request), which was most of what a pass spent
 * writing its assignments. The tag filters of `workRequests` check the active requests apart.
 */
export class Migration20261126095000_tag_indexes_inactive extends Migration {
  override async up(): Promise<void> {
    for (const side of ['provided', 'required']) {
      this.addSql(`drop index "work_request_${side}_tags_gin";`);
      this.addSql(
        `create index "work_request_${side}_tags_gin" on "work_request" using gin ("${side}_tags") with (fastupdate = off) where "status" not in ('ASSIGNED', 'RUNNING');`,
      );
    }
  }

  override async down(): Promise<void> {
    for (const side of ['provided', 'required']) {
      this.addSql(`drop index "work_request_${side}_tags_gin";`);
      this.addSql(
        `create index "work_request_${side}_tags_gin" on "work_request" using gin ("${side}_tags") with (fastupdate = off);`,
      );
    }
  }
}
