/**
 * Shared resources in the API (docs/reference/resources.md): what a request reserves, with the source of
 * each figure, what a worker offers and has free, and the input a client or a rule gives them with.
 */
import { builder } from '../builder.js';
import type { PartialResources, Resources, ResourceSources } from '../../core/tasks/resource-request.js';
import type { ResourcePlan } from '../../scheduler/matching/demand-plan.js';

/** Whole CPUs, memory and disk in MiB. */
export const ResourcesRef = builder.objectRef<Resources>('Resources');
ResourcesRef.implement({
  description: 'Whole CPUs, memory and disk (MiB)',
  fields: (t) => ({
    cpus: t.exposeInt('cpus', { description: 'Whole CPUs' }),
    memoryMib: t.exposeInt('memoryMib', { description: 'Memory, in MiB' }),
    diskMib: t.exposeInt('diskMib', { description: 'Disk, in MiB' }),
  }),
});

const ResourceSourcesRef = builder.objectRef<ResourceSources>('ResourceSources');
ResourceSourcesRef.implement({
  description:
    'Where each figure of a request’s resources came from: user, workspace-rule:NAME, site-rule:NAME, history:TASK:PACKAGE:ARCH (the statistics) or task-default',
  fields: (t) => ({
    cpus: t.exposeString('cpus', { description: 'The source of its CPUs' }),
    memoryMib: t.exposeString('memoryMib', { description: 'The source of its memory' }),
    diskMib: t.exposeString('diskMib', { description: 'The source of its disk' }),
  }),
});

/** A request's reservation: its figures and their sources. */
export interface ResourceRequestShape {
  readonly resources: Resources;
  readonly sources: ResourceSources;
}

export const ResourceRequestRef = builder.objectRef<ResourceRequestShape>('ResourceRequest');
ResourceRequestRef.implement({
  description:
    'What a work request reserves of a worker that shares its resources (workers with fixed slots ignore it), frozen with its tags',
  fields: (t) => ({
    cpus: t.int({
      description: 'Whole CPUs; its run gets TAGSCHED_PARALLEL from it',
      resolve: (r) => r.resources.cpus,
    }),
    memoryMib: t.int({
      description: 'Memory in MiB; its run is limited to it where the agent has cgroups',
      resolve: (r) => r.resources.memoryMib,
    }),
    diskMib: t.int({ description: 'Disk in MiB', resolve: (r) => r.resources.diskMib }),
    sources: t.field({
      type: ResourceSourcesRef,
      description: 'Where each figure came from',
      resolve: (r) => r.sources,
    }),
  }),
});

/** Some figures, as a user gave them. */
export const ResourcesPartialRef = builder.objectRef<PartialResources>('GivenResources');
ResourcesPartialRef.implement({
  description: 'CPUs, memory and disk (MiB) as given; a figure not given is null',
  fields: (t) => ({
    cpus: t.int({ nullable: true, description: 'Whole CPUs', resolve: (r) => r.cpus ?? null }),
    memoryMib: t.int({ nullable: true, description: 'Memory, in MiB', resolve: (r) => r.memoryMib ?? null }),
    diskMib: t.int({ nullable: true, description: 'Disk, in MiB', resolve: (r) => r.diskMib ?? null }),
  }),
});

/** The input of some figures: each may be left out. */
export const ResourcesInput = builder.inputType('ResourcesInput', {
  description:
    'CPUs, memory and disk, each a whole number from 0 (CPUs up to 1024, memory up to 4194304 MiB, disk up to 67108864 MiB); a figure left out comes from the rules, the statistics or the task’s default',
  fields: (t) => ({
    cpus: t.int({ description: 'Whole CPUs' }),
    memoryMib: t.int({ description: 'Memory, in MiB' }),
    diskMib: t.int({ description: 'Disk, in MiB' }),
  }),
});

/** How a pool whose machines share their resources is sized (matching/demand-plan.ts). */
export const ResourcePlanRef = builder.objectRef<ResourcePlan>('ResourcePlan');
ResourcePlanRef.implement({
  description:
    'How a pool whose machines share their resources is sized: the requests left to it packed onto its machine size by first-fit decreasing, at most its concurrency on a machine (docs/reference/resources.md)',
  fields: (t) => ({
    machineSize: t.field({
      type: ResourcesRef,
      description: 'What one machine offers: the pool’s cpuCount, memoryGib and diskGib',
      resolve: (p) => p.machineSize,
    }),
    requests: t.exposeInt('requests', {
      description: 'The requests packed: those left to the pool, pending and coming',
    }),
    reserved: t.field({
      type: ResourcesRef,
      description: 'What the placed ones reserve together',
      resolve: (p) => p.reserved,
    }),
    machines: t.exposeInt('machines', { description: 'The machines the packing needs' }),
    unplaceable: t.exposeInt('unplaceable', {
      description: 'Requests larger than a machine on some figure: the pool launches nothing for them',
    }),
    reason: t.exposeString('reason', {
      description: 'The packing in words, with the figure that fills the machines first',
    }),
  }),
});
