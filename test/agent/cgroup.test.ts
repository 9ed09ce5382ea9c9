import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cgroupDir, oomKillsOf, parseCgroupMounts, parseProcCgroup, planMemoryCgroup } from '../../src/agent/cgroup.js';
import { runStatisticsErrors, type RunStatistics } from '../../src/shared/run-statistics.js';

// How the agent finds its own cgroup and where the runs' leaves go, from the kernel's files as they
// read on the machines it meets. statistics.test.ts measures real runs in real cgroups.

const HYBRID_CGROUP = ['9:name=systemd:/', '4:memory:/process_api/93c1', '3:cpuset:/', '0::/', ''].join('\n');
const HYBRID_MOUNTINFO = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');
const UNIFIED_CGROUP = '0::/system.slice/tagsched-worker.service\n';
const UNIFIED_MOUNTINFO =
  '30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n';

describe('the agent’s own cgroup', () => {
  it('is read from /proc/self/cgroup: the unified path and the v1 memory hierarchy’s', () => {
    expect(parseProcCgroup(HYBRID_CGROUP)).toEqual({ unified: '/', memoryV1: '/process_api/93c1' });
    expect(parseProcCgroup(UNIFIED_CGROUP)).toEqual({
      unified: '/system.slice/tagsched-worker.service',
      memoryV1: null,
    });
    expect(parseProcCgroup('5:cpu,memory:/a:b\n')).toEqual({ unified: null, memoryV1: '/a:b' });
    expect(parseProcCgroup('')).toEqual({ unified: null, memoryV1: null });
  });

  it('is found under the mount that shows it: /sys/fs/cgroup, /sys/fs/cgroup/unified, or a mount of a subtree (a container)', () => {
    const hybrid = parseCgroupMounts(HYBRID_MOUNTINFO);
    expect(hybrid.map((m) => [m.type, m.mountPoint])).toEqual([
      ['cgroup', '/sys/fs/cgroup/cpu'],
      ['cgroup', '/sys/fs/cgroup/memory'],
      ['cgroup2', '/sys/fs/cgroup/unified'],
    ]);
    const memory = hybrid.find((m) => m.options.includes('memory'))!;
    expect(cgroupDir(memory, '/process_api/93c1')).toBe('/sys/fs/cgroup/memory/process_api/93c1');
    expect(cgroupDir(hybrid[2], '/')).toBe('/sys/fs/cgroup/unified');
    const [unified] = parseCgroupMounts(UNIFIED_MOUNTINFO);
    expect(cgroupDir(unified, '/system.slice/tagsched-worker.service')).toBe(
      '/sys/fs/cgroup/system.slice/tagsched-worker.service',
    );
    // A container whose cgroup file system shows its own subtree at the mount point.
    const [container] = parseCgroupMounts('40 30 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n');
    expect(cgroupDir(container, '/docker/abc')).toBe('/sys/fs/cgroup');
    expect(cgroupDir(container, '/docker/abc/inner')).toBe('/sys/fs/cgroup/inner');
    expect(cgroupDir(container, '/elsewhere')).toBeNull();
    expect(cgroupDir(unified, '/a/../../etc')).toBeNull();
    // Escaped characters in the mount point.
    expect(parseCgroupMounts('1 2 0:1 / /mnt/cg\\040v2 rw - cgroup2 cgroup2 rw\n')[0].mountPoint).toBe('/mnt/cg v2');
  });

  it('has no usable memory cgroup when nothing is mounted, and says why; off is off', () => {
    const none = planMemoryCgroup('auto', { procCgroup: UNIFIED_CGROUP, mountinfo: '' });
    expect(none).toEqual({ kind: 'none', why: 'cgroup v2: not mounted; cgroup v1: no memory hierarchy' });
    // A mount point that is an ordinary directory is no cgroup: the trial leaf has no memory controller.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-cgroup-'));
    try {
      const fake = planMemoryCgroup('auto', {
        procCgroup: '0::/\n',
        mountinfo: `1 2 0:1 / ${dir} rw - cgroup2 cgroup2 rw\n`,
      });
      expect(fake).toMatchObject({
        kind: 'none',
        why: expect.stringContaining(`cgroup v2: the memory controller is not`),
      });
      expect(fs.readdirSync(dir).filter((n) => n.startsWith('tagsched-probe-'))).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(planMemoryCgroup('off')).toEqual({
      kind: 'none',
      why: 'turned off by --memory-cgroup off (TAGSCHED_MEMORY_CGROUP)',
    });
  });

  it('counts OOM kills from memory.events (v2) and memory.oom_control (v1)', () => {
    expect(oomKillsOf('low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n')).toBe(2);
    expect(oomKillsOf('oom_kill_disable 0\nunder_oom 0\noom_kill 7\n')).toBe(7);
    expect(oomKillsOf(null)).toBeNull();
    expect(oomKillsOf('oom_kill_disable 0\n')).toBeNull();
  });
});

describe('outOfMemory and diskFull in a run’s statistics', () => {
  const base: RunStatistics = {
    setupSeconds: 0,
    runSeconds: 1,
    teardownSeconds: 0,
    cpuSeconds: null,
    peakMemoryBytes: 1,
    peakDiskBytes: 1,
    cpuCount: 1,
    memoryMethod: 'CGROUP_V1',
  };
  it('are optional booleans, null when unknown; the cgroup methods are accepted', () => {
    expect(runStatisticsErrors(base)).toEqual([]);
    expect(runStatisticsErrors({ ...base, memoryMethod: 'CGROUP_V2', outOfMemory: true, diskFull: null })).toEqual([]);
    expect(
      runStatisticsErrors({ ...base, outOfMemory: 'yes' as unknown as boolean, diskFull: 1 as unknown as boolean }),
    ).toEqual([
      'statistics.outOfMemory must be true, false or null',
      'statistics.diskFull must be true, false or null',
    ]);
    expect(runStatisticsErrors({ ...base, memoryMethod: 'CGROUP_V3' as RunStatistics['memoryMethod'] })).toEqual([
      'statistics.memoryMethod must be one of PROCESS_TREE, CGROUP_V2, CGROUP_V1',
    ]);
  });
});
