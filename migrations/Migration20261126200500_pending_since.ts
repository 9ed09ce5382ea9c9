import { Migration } from '@mikro-orm/migrations';

/**
 * /metrics gives the age of the oldest pending request (tagsched_oldest_pending_seconds): with this
 * index that is one probe at its start, not a scan of every pending request at each scrape.
 */
export class Migration20261126200500_pending_since extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create index "work_request_pending_since" on "work_request" ("pending_at") where "status" = 'PENDING';`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "work_request_pending_since";`);
  }
}
