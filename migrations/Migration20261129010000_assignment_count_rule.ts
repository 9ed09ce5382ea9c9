import { Migration } from '@mikro-orm/migrations';
import { assignmentCountFunctionsSql } from '../src/scheduler/rules/instance-retirement.js';

/**
 * The functions of the triggers that count a pool worker's assignments (migration 20261128066000)
 * installed again from the rule's one home, src/scheduler/rules/instance-retirement.ts, which writes
 * the request limit in SQL once for the triggers and the tests. They do what the earlier ones did.
 */
export class Migration20261129010000_assignment_count_rule extends Migration {
  override async up(): Promise<void> {
    for (const f of assignmentCountFunctionsSql()) this.addSql(f.sql);
  }

  override async down(): Promise<void> {
    // Nothing to undo: the functions count as the earlier ones did, and 20261128066000's down drops them.
  }
}
