import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/** A build environment (a system image or tarball) built for one architecture. */
export const EnvironmentSchema = defineEntity({
  name: 'Environment',
  tableName: 'environment',
  properties: {
    id: p.integer().primary().autoincrement(),
    codename: p.string().length(100),
    architecture: p.string().length(50),
    variant: p.string().length(100).nullable(),
    backend: p.string().length(50).nullable(),
    imageFormat: p.string().length(50).nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type Environment = InferEntity<typeof EnvironmentSchema>;
