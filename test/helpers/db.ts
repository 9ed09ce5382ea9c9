import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { adminUrl, databaseUrl } from './pg-url.js';

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A fresh database cloned from the migrated template, for one test file; drop() removes it. */
export async function createTestDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `t_${inject('runId')}_${randomBytes(4).toString('hex')}`;
  await admin(`create database "${name}" template "${inject('templateDb')}" strategy file_copy`);
  return {
    name,
    url: databaseUrl(name),
    drop: () => admin(`drop database if exists "${name}" with (force)`),
  };
}
