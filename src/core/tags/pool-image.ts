/**
 * What a worker image provides (docs/design.md: pools and instances and images), as tags: until images exist, a pool's
 * specifications say what its image holds (`architectures`, `enableBackends`, `enableTasks`) and
 * what its agents run (`handlers`, local pools). A pool made for sbuild then needs no tag added by
 * hand: its template provides what an sbuild request requires.
 */

/** One task a worker can run, as the task registry describes it (src/core/tasks/registry.ts). */
export interface CatalogTask {
  readonly type: string;
  readonly name: string;
  readonly version: number;
  /** The tools (`worker:cap:*`) the task needs on a worker. */
  readonly tools: readonly string[];
}

/** What an image holds; every list may be absent. */
export interface ImageFacts {
  /** Debian architectures its machines run natively. */
  readonly architectures?: readonly string[];
  /** Executor backends installed: unshare, incus-lxc, incus-vm, qemu. */
  readonly enableBackends?: readonly string[];
  /** Tasks it is built for: their tools are installed, and the agent runs them. */
  readonly enableTasks?: readonly string[];
  /** Tasks its agents run through a handler (local pools): runnable, tools or not. */
  readonly handlerTasks?: readonly string[];
}

/** One tag of an image and the specification it comes from. */
export interface ImageTag {
  readonly tag: string;
  readonly from: 'architectures' | 'enableBackends' | 'enableTasks' | 'handlers';
}

/**
 * The provided tags of an image, in a stable order without repeats: `worker:build-arch:*` per
 * architecture, `worker:executor:*` per backend, `worker:cap:*` per tool of an enabled task, and
 * `worker:task:{type}:{name}:version:{v}` per enabled or handled task. Task names the catalog does
 * not know give nothing (the pool's input is checked against the same catalog before it is stored).
 */
export function imageTags(image: ImageFacts, catalog: readonly CatalogTask[]): ImageTag[] {
  const out: ImageTag[] = [];
  const seen = new Set<string>();
  const add = (tag: string, from: ImageTag['from']) => {
    if (seen.has(tag)) return;
    seen.add(tag);
    out.push({ tag, from });
  };
  const byName = new Map(catalog.map((t) => [t.name, t]));
  for (const arch of image.architectures ?? []) add(`worker:build-arch:${arch}`, 'architectures');
  for (const backend of image.enableBackends ?? []) add(`worker:executor:${backend}`, 'enableBackends');
  const enabled = (image.enableTasks ?? []).flatMap((name) => byName.get(name) ?? []);
  for (const task of enabled) for (const tool of task.tools) add(`worker:cap:${tool}`, 'enableTasks');
  const taskTag = (t: CatalogTask) => `worker:task:${t.type}:${t.name}:version:${t.version}`;
  for (const task of enabled) add(taskTag(task), 'enableTasks');
  for (const name of image.handlerTasks ?? []) {
    const task = byName.get(name);
    if (task) add(taskTag(task), 'handlers');
  }
  return out;
}
