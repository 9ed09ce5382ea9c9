import { EnvironmentSchema } from './environment.js';
import { GroupSchema } from './group.js';
import { ScopeSchema } from './scope.js';
import { SignificantTagSchema } from './significant-tag.js';
import { TaskClassSchema } from './task-class.js';
import { TaskDurationSchema } from './task-duration.js';
import { TaskRuleSchema } from './task-rule.js';
import { TokenSchema } from './token.js';
import { UserSchema } from './user.js';
import { WorkRequestSchema } from './work-request.js';
import { WorkerPoolSchema } from './worker-pool.js';
import { WorkerSchema } from './worker.js';
import { WorkspaceMemberSchema } from './workspace-member.js';
import { WorkspaceSchema } from './workspace.js';

/** Every entity the ORM knows. */
export const entities = [
  ScopeSchema,
  UserSchema,
  WorkspaceSchema,
  WorkspaceMemberSchema,
  GroupSchema,
  TaskRuleSchema,
  EnvironmentSchema,
  WorkerPoolSchema,
  WorkerSchema,
  TokenSchema,
  WorkRequestSchema,
  TaskClassSchema,
  SignificantTagSchema,
  TaskDurationSchema,
];
