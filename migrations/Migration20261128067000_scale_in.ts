import { Migration } from '@mikro-orm/migrations';

/**
 * Scale-in and warm capacity (src/scheduler/rules/scale-in.ts): a pool's billing period, scale-down
 * delay, launch rate limit and warm-capacity schedule; and an index for a pool's recent launches.
 */
export class Migration20261128067000_scale_in extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "worker_pool" add column "billing_period_seconds" int null, add column "scale_down_delay_seconds" int null, add column "max_launches_per_minute" int null, add column "warm_schedule" jsonb null;`,
    );
    this.addSql(`create index "instance_pool_requested" on "instance" ("pool_id", "requested_at");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "instance_pool_requested";`);
    this.addSql(
      `alter table "worker_pool" drop column "billing_period_seconds", drop column "scale_down_delay_seconds", drop column "max_launches_per_minute", drop column "warm_schedule";`,
    );
  }
}
