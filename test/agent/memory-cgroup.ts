import fs from 'node:fs';
import path from 'node:path';

/**
 * The method the agent must use here, found without the agent's code: a child cgroup made under
 * this process's own that has the memory controller and its peak file (cgroup v2 first, then v1);
 * PROCESS_TREE when neither can be made. The agents the tests start are this process's children,
 * in the same cgroups.
 */
export function expectedMemoryMethod(): 'CGROUP_V2' | 'CGROUP_V1' | 'PROCESS_TREE' {
  const own = fs.readFileSync('/proc/self/cgroup', 'utf8');
  const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const mountOf = (match: (type: string, options: string) => boolean) =>
    mounts
      .map((l) => l.split(' - '))
      .find(([, after]) => after && match(after.split(' ')[0], after.split(' ')[2] ?? ''))?.[0]
      ?.split(' ')[4];
  const tryChild = (parent: string | undefined, peakFile: string, needsController: boolean) => {
    if (!parent || !fs.existsSync(parent)) return false;
    const child = path.join(parent, `tagsched-test-${process.pid}`);
    try {
      fs.mkdirSync(child);
    } catch {
      return false;
    }
    try {
      const hasMemory = () =>
        fs.readFileSync(path.join(child, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('memory');
      if (needsController && !hasMemory()) {
        // A cgroup v2 may hand the controller to its children when it holds no process (or is the root).
        try {
          fs.writeFileSync(path.join(parent, 'cgroup.subtree_control'), '+memory');
        } catch {
          return false;
        }
        if (!hasMemory()) return false;
      }
      return fs.existsSync(path.join(child, peakFile));
    } finally {
      fs.rmdirSync(child);
    }
  };
  const unified = /^0::(.*)$/m.exec(own)?.[1];
  const unifiedMount = mountOf((type) => type === 'cgroup2');
  if (unified !== undefined && unifiedMount && tryChild(path.join(unifiedMount, unified), 'memory.peak', true))
    return 'CGROUP_V2';
  const v1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/m.exec(own)?.[1];
  const v1Mount = mountOf((type, options) => type === 'cgroup' && options.split(',').includes('memory'));
  if (v1 !== undefined && v1Mount && tryChild(path.join(v1Mount, v1), 'memory.max_usage_in_bytes', false))
    return 'CGROUP_V1';
  return 'PROCESS_TREE';
}
