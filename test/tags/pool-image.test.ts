import { describe, expect, it } from 'vitest';
import { imageTags, type CatalogTask, type ImageFacts } from '../../src/core/tags/pool-image.js';

const CATALOG: CatalogTask[] = [
  { type: 'worker', name: 'sbuild', version: 1, tools: ['sbuild'] },
  { type: 'worker', name: 'autopkgtest', version: 2, tools: ['autopkgtest'] },
  { type: 'worker', name: 'mmdebstrap', version: 1, tools: ['mmdebstrap'] },
  { type: 'worker', name: 'simplesystemimagebuild', version: 1, tools: ['mmdebstrap'] },
  { type: 'worker', name: 'lintian', version: 1, tools: [] },
  { type: 'signing', name: 'debsign', version: 1, tools: ['debsign'] },
];

describe('imageTags', () => {
  it.each<{ label: string; image: ImageFacts; tags: string[] }>([
    { label: 'nothing', image: {}, tags: [] },
    {
      label: 'architectures',
      image: { architectures: ['amd64', 'i386'] },
      tags: ['worker:build-arch:amd64', 'worker:build-arch:i386'],
    },
    {
      label: 'backends',
      image: { enableBackends: ['unshare', 'incus-vm'] },
      tags: ['worker:executor:unshare', 'worker:executor:incus-vm'],
    },
    {
      label: 'a task with a tool: the tool and the task',
      image: { enableTasks: ['sbuild'] },
      tags: ['worker:cap:sbuild', 'worker:task:worker:sbuild:version:1'],
    },
    {
      label: 'a task without a tool: the task only',
      image: { enableTasks: ['lintian'] },
      tags: ['worker:task:worker:lintian:version:1'],
    },
    {
      label: 'two tasks sharing a tool: the tool once',
      image: { enableTasks: ['mmdebstrap', 'simplesystemimagebuild'] },
      tags: [
        'worker:cap:mmdebstrap',
        'worker:task:worker:mmdebstrap:version:1',
        'worker:task:worker:simplesystemimagebuild:version:1',
      ],
    },
    {
      label: 'the version from the catalog',
      image: { enableTasks: ['autopkgtest'] },
      tags: ['worker:cap:autopkgtest', 'worker:task:worker:autopkgtest:version:2'],
    },
    {
      label: 'a signing task',
      image: { enableTasks: ['debsign'] },
      tags: ['worker:cap:debsign', 'worker:task:signing:debsign:version:1'],
    },
    {
      label: 'a handled task: runnable, no tool claimed',
      image: { handlerTasks: ['sbuild'] },
      tags: ['worker:task:worker:sbuild:version:1'],
    },
    {
      label: 'a task both enabled and handled: once',
      image: { enableTasks: ['sbuild'], handlerTasks: ['sbuild'] },
      tags: ['worker:cap:sbuild', 'worker:task:worker:sbuild:version:1'],
    },
    {
      label: 'names the catalog does not know give nothing',
      image: { enableTasks: ['nosuch'], handlerTasks: ['alsonot'] },
      tags: [],
    },
    {
      label: 'everything, in a stable order: architectures, backends, tools, tasks',
      image: {
        handlerTasks: ['lintian'],
        enableTasks: ['sbuild'],
        enableBackends: ['unshare'],
        architectures: ['arm64'],
      },
      tags: [
        'worker:build-arch:arm64',
        'worker:executor:unshare',
        'worker:cap:sbuild',
        'worker:task:worker:sbuild:version:1',
        'worker:task:worker:lintian:version:1',
      ],
    },
  ])('$label', ({ image, tags }) => {
    expect(imageTags(image, CATALOG).map((t) => t.tag)).toEqual(tags);
  });

  it('says which specification each tag comes from', () => {
    expect(
      imageTags(
        { architectures: ['amd64'], enableBackends: ['qemu'], enableTasks: ['sbuild'], handlerTasks: ['lintian'] },
        CATALOG,
      ),
    ).toEqual([
      { tag: 'worker:build-arch:amd64', from: 'architectures' },
      { tag: 'worker:executor:qemu', from: 'enableBackends' },
      { tag: 'worker:cap:sbuild', from: 'enableTasks' },
      { tag: 'worker:task:worker:sbuild:version:1', from: 'enableTasks' },
      { tag: 'worker:task:worker:lintian:version:1', from: 'handlers' },
    ]);
  });
});
