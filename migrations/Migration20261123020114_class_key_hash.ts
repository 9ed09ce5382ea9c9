import { Migration } from '@mikro-orm/migrations';

export class Migration20261123020114_class_key_hash extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "task_class" drop constraint "task_class_key_unique";`);

    // A class is unique by the hash of its key: a key of many long tags is over the btree row limit.
    this.addSql(`alter table "task_class" add column "key_hash" varchar(64);`);
    this.addSql(`update "task_class" set "key_hash" = encode(sha256(convert_to("key", 'UTF8')), 'hex');`);
    this.addSql(`alter table "task_class" alter column "key_hash" set not null;`);
    this.addSql(`alter table "task_class" add constraint "task_class_key_hash_unique" unique ("key_hash");`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "task_class" drop constraint "task_class_key_hash_unique";`);
    this.addSql(`alter table "task_class" drop column "key_hash";`);

    this.addSql(`alter table "task_class" add constraint "task_class_key_unique" unique ("key");`);
  }
}
