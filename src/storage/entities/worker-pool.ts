import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { WarmSchedule } from '../../shared/warm-schedule.js';
import type { PoolSpecifications } from '../../core/tags/worker-tags.js';

export const WorkerPoolSchema = defineEntity({
  name: 'WorkerPool',
  tableName: 'worker_pool',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(100).unique(),
    /** A key of the provider registry (src/providers/registry.ts). */
    providerType: p.string().length(50),
    /**
     * The host a pool of a host-bound provider (local, qemu) runs on: a server process's TAGSCHED_HOST_NAME
     * (src/scheduler/rules/pool-host.ts); null for the other providers, and for host-bound pools made
     * before hosts were kept, which run on any host.
     */
    host: p.text().nullable(),
    /** AES-256-GCM ciphertext of the provider account JSON; never leaves the server. */
    providerAccountEncrypted: p.text().nullable(),
    specifications: p.json<PoolSpecifications>().default('{}'),
    /**
     * The tags of the image `specifications.image` names, copied from its manifest when the pool is
     * given it (images never change once registered); null for a pool with no image.
     */
    imageTags: p.array().columnType('text[]').nullable(),
    providedTags: p.array().columnType('text[]').default([]),
    requiredTags: p.array().columnType('text[]').default([]),
    maxActiveInstances: p.integer().default(10),
    minIdleInstances: p.integer().default(0),
    idleTimeoutSeconds: p.integer().default(600),
    targetLatencySeconds: p.integer().default(600),
    /** Monthly runtime budget in seconds of instance time; null means unlimited. */
    monthlyRuntimeBudgetSeconds: p.integer().nullable(),
    /** An instance older than this (seconds from its creation) retires: drained, stopped when idle, replaced (src/scheduler/rules/instance-retirement.ts); null: no limit. */
    maxInstanceLifetimeSeconds: p.integer().nullable(),
    /** An instance retires after this many assignments (1: a fresh machine per request); null: no limit. */
    maxWorkRequestsPerInstance: p.integer().nullable(),
    /** At most this many outdated instances are being replaced at a time (retiring, or their replacements launching). */
    maxReplacingInstances: p.integer().default(1),
    /** Scale-in and warm capacity (src/scheduler/rules/scale-in.ts): the provider's billing period (an idle instance is stopped near its end); null: billed by the second. */
    billingPeriodSeconds: p.integer().nullable(),
    /** No idle instance is stopped this long after the pool's last launch; null: none. */
    scaleDownDelaySeconds: p.integer().nullable(),
    /** At most this many launches a minute; null: no limit. */
    maxLaunchesPerMinute: p.integer().nullable(),
    /** More instances kept idle at times of day, in a time zone; null: minIdleInstances always. */
    warmSchedule: p.json<WarmSchedule>().nullable(),
    /** Cost (src/scheduler/rules/pool-cost.ts): the price of one instance-hour in the site's currency; an offering's own price wins; null: unknown. */
    pricePerHour: p.double().$type<number>().nullable(),
    /** Demand launches nothing once its instances' cost this month (UTC) reaches this; null: no limit. */
    monthlyCostBudget: p.double().$type<number>().nullable(),
    enabled: p.boolean().default(true),
    /** Launches that failed in a row since the last one that worked (src/scheduler/rules/pool-health.ts). */
    launchFailures: p.integer().default(0),
    /** No launch is tried before this, after failures (backoff); null when none failed. */
    launchRetryAt: p.datetime().nullable(),
    /** The last provider error of the pool (launch, stop or list), for admins; never a secret. */
    lastError: p.text().nullable(),
    /** The kind of that error (quota, capacity, auth, timeout, invalid, unavailable). */
    lastErrorKind: p.string().length(20).nullable(),
    lastErrorAt: p.datetime().nullable(),
    /**
     * Its measured launch time, in seconds: an exponentially weighted mean (weight 0.2 for the newest)
     * of its instances' time from launch to their worker's first connection, updated as each connects
     * (services/workers/instance-running.ts); null before the first. Start estimates read it.
     */
    launchSeconds: p.double().nullable(),
    /** How many launches {@link launchSeconds} is made of. */
    launchSamples: p.integer().default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type WorkerPool = InferEntity<typeof WorkerPoolSchema>;
