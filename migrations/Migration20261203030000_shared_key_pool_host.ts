import { Migration } from '@mikro-orm/migrations';

/**
 * One configuration for every replica of a database.
 *
 * `service_setting` keeps values every server process of the database shares; the first is the
 * fingerprint of the key that seals pool provider accounts (name 'secret_key_fingerprint', an
 * HMAC-SHA256 under the key, never the key: src/server/secret-key.ts). A process whose key has
 * another fingerprint refuses to start.
 *
 * `worker_pool.host` names the host a pool of a host-bound provider (local, qemu) runs on
 * (src/scheduler/rules/pool-host.ts); null for the other providers. Pools made before this migration
 * get null: a host-bound pool with no host runs on any host, as every pool did before.
 */
export class Migration20261203030000_shared_key_pool_host extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "service_setting" ("name" text primary key, "value" text not null);`);
    this.addSql(`alter table "worker_pool" add column "host" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "worker_pool" drop column "host";`);
    this.addSql(`drop table if exists "service_setting";`);
  }
}
