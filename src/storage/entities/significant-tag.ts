import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/** A tag that some worker or pool requires: only these task-provided tags take part in task classes. */
export const SignificantTagSchema = defineEntity({
  name: 'SignificantTag',
  tableName: 'significant_tag',
  properties: {
    tag: p.text().primary(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type SignificantTag = InferEntity<typeof SignificantTagSchema>;
