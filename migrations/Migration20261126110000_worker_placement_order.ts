import { Migration } from '@mikro-orm/migrations';

/**
 * The placement of a new request reads the first free workers that may run it, static before pool
 * workers, then by id (scheduler/place.ts): with this index it walks workers in that order and stops
 * at the first few, instead of checking and sorting every worker (about 28 ms at 10,000 workers).
 */
export class Migration20261126110000_worker_placement_order extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "worker_placement_order" on "worker" (("pool_id" is not null), "id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "worker_placement_order";`);
  }
}
