import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * A worker that shares its resources held for one pending request that does not fit it yet
 * (scheduler/rules/resources.ts: reservedStart, mayBackfill): until the request starts, the worker takes
 * no new work that would delay it. One per worker and one per request; `startsAt` is when the request is
 * expected to fit, `lapsedAt` is set when the reservation was held for its longest (it then holds nothing,
 * and that request does not reserve this worker again). Read and written in SQL by the pull
 * (scheduler/storage/host-pull.ts).
 */
export const WorkerReservationSchema = defineEntity({
  name: 'WorkerReservation',
  tableName: 'worker_reservation',
  properties: {
    workerId: p.integer().primary().autoincrement(false),
    workRequestId: p.integer(),
    reservedAt: p.datetime(),
    startsAt: p.datetime(),
    lapsedAt: p.datetime().nullable(),
  },
  indexes: [
    // A request holds at most one worker at a time; a lapsed reservation holds nothing.
    {
      name: 'worker_reservation_request',
      expression: `create unique index "worker_reservation_request" on "worker_reservation" ("work_request_id") where "lapsed_at" is null`,
    },
  ],
});
export type WorkerReservation = InferEntity<typeof WorkerReservationSchema>;
