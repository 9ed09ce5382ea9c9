/** What identifies a task class: its required tags and its significant provided tags (storage/classes.ts creates them). */
import { createHash } from 'node:crypto';

/** The canonical key of a class: its required tags and its significant provided tags, both sorted. */
export function classKey(required: readonly string[], significantProvided: readonly string[]): string {
  const sort = (a: readonly string[]) => [...new Set(a)].sort();
  return `${sort(required).join(' ')}|${sort(significantProvided).join(' ')}`;
}

/** What makes a class unique in the database: the SHA-256 of its key, in hex (the key itself can be too long to index). */
export function classKeyHash(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}
