import { Migration } from '@mikro-orm/migrations';

/** Cost (docs/operating/pools.md, "Cost"): a pool's price per instance-hour and monthly cost budget, and the price each instance was launched at. */
export class Migration20261128110000_cost extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "worker_pool" add column "price_per_hour" double precision null, add column "monthly_cost_budget" double precision null;`,
    );
    this.addSql(`alter table "instance" add column "price_per_hour" double precision null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "instance" drop column "price_per_hour";`);
    this.addSql(`alter table "worker_pool" drop column "price_per_hour", drop column "monthly_cost_budget";`);
  }
}
