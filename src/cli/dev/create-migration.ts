import { createOrm, migrate } from '../../storage/orm.js';

// Generates a migration from the difference between the entities and a scratch database built by the
// existing migrations. Usage: DATABASE_URL=postgres://root@127.0.0.1/scratch npm run migration:create -- name
const url = process.env.DATABASE_URL;
if (!url) {
  console.error('set DATABASE_URL to a scratch database');
  process.exit(2);
}
const orm = await createOrm({ clientUrl: url });
await migrate(orm, url);
const result = await orm.migrator.createMigration(undefined, false, false, process.argv[2] ?? 'change');
console.log(result.fileName ? `wrote ${result.fileName}` : 'no changes');
await orm.close(true);
