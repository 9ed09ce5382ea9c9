import { Migration } from '@mikro-orm/migrations';

/**
 * Tokens may expire (`expires_at`) and be revoked (`revoked_at`: revokeToken, a rotation, a new
 * TAGSCHED_ADMIN_TOKEN); either makes the token refused (services/tokens.ts, tokenRefusal).
 */
export class Migration20261123014741_token_lifecycle extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "token" add column "expires_at" timestamptz null, add column "revoked_at" timestamptz null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "token" drop column "expires_at", drop column "revoked_at";`);
  }
}
