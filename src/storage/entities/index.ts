import { ClassPendingCountSchema } from './class-pending-count.js';
import { EnvironmentSchema } from './environment.js';
import { GroupSchema } from './group.js';
import { IdempotencyKeySchema } from './idempotency-key.js';
import { InstanceSchema } from './instance.js';
import { ReleaseBackoffSchema } from './release-backoff.js';
import { ScopeSchema } from './scope.js';
import { ServerProcessSchema } from './server-process.js';
import { SignificantTagSchema } from './significant-tag.js';
import { TaskClassSchema } from './task-class.js';
import { TaskDurationSchema } from './task-duration.js';
import { TaskRuleSchema } from './task-rule.js';
import { TaskStatisticsHistogramSchema } from './task-statistics-histogram.js';
import { TaskStatisticsWorkerSchema } from './task-statistics-worker.js';
import { TokenSchema } from './token.js';
import { UserSchema } from './user.js';
import { WorkRequestLogChunkSchema } from './work-request-log-chunk.js';
import { WorkRequestLogSchema } from './work-request-log.js';
import { WorkRequestStatisticsSchema } from './work-request-statistics.js';
import { WorkRequestSchema } from './work-request.js';
import { WorkerImagePublicationSchema } from './worker-image-publication.js';
import { WorkerImageSchema } from './worker-image.js';
import { WorkerPoolSchema } from './worker-pool.js';
import { WorkerReservationSchema } from './worker-reservation.js';
import { WorkerStateSchema } from './worker-state.js';
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
  WorkerImageSchema,
  WorkerImagePublicationSchema,
  WorkerPoolSchema,
  WorkerSchema,
  TokenSchema,
  WorkRequestSchema,
  TaskClassSchema,
  SignificantTagSchema,
  TaskDurationSchema,
  TaskStatisticsHistogramSchema,
  TaskStatisticsWorkerSchema,
  IdempotencyKeySchema,
  WorkRequestLogSchema,
  WorkRequestLogChunkSchema,
  WorkRequestStatisticsSchema,
  InstanceSchema,
  ReleaseBackoffSchema,
  WorkerStateSchema,
  ClassPendingCountSchema,
  ServerProcessSchema,
  WorkerReservationSchema,
];
