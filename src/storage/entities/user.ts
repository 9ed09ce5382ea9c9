import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/** A person or script account; admins may change workers, pools and site rules. */
export const UserSchema = defineEntity({
  name: 'User',
  tableName: 'app_user',
  properties: {
    id: p.integer().primary().autoincrement(),
    username: p.string().length(150).unique(),
    isAdmin: p.boolean().default(false),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type User = InferEntity<typeof UserSchema>;
