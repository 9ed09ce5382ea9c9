import { Migration } from '@mikro-orm/migrations';

/** The ids a batch create (createWorkRequests) made, kept with its idempotency key to answer a retry. */
export class Migration20261123050000_batch_idempotency extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "idempotency_key" add column "result_ids" int[] null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "idempotency_key" drop column "result_ids";`);
  }
}
