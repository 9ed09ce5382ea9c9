import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * One server process of the database, by name (TAGSCHED_PROCESS_NAME), in the process registry
 * (services/processes/registry.ts): where it runs, when it started, its last heartbeat, and when it
 * stopped cleanly (null while it runs, or when it died). Written in SQL by the registry; read through
 * the ORM for the `serverProcesses` query.
 */
export const ServerProcessSchema = defineEntity({
  name: 'ServerProcess',
  tableName: 'server_process',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.text().unique(),
    host: p.text(),
    pid: p.integer(),
    startedAt: p.datetime(),
    heartbeatAt: p.datetime(),
    stoppedAt: p.datetime().nullable(),
  },
});
export type ServerProcess = InferEntity<typeof ServerProcessSchema>;
