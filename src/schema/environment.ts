import { builder } from '../builder.js';
import { ForbiddenError, InputError, UnauthenticatedError } from '../errors.js';
import { EnvironmentSchema, type Environment } from '../entities/environment.js';
import { createEnvironment } from '../services/environments.js';
import { createOnce, IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';

const EnvironmentRef = builder.objectRef<Environment>('Environment').implement({
  description: 'A build environment, built for one architecture; tasks naming it must run on that architecture',
  fields: (t) => ({
    id: t.exposeID('id'),
    codename: t.exposeString('codename'),
    architecture: t.exposeString('architecture'),
    variant: t.exposeString('variant', { nullable: true }),
    backend: t.exposeString('backend', { nullable: true }),
    imageFormat: t.exposeString('imageFormat', { nullable: true }),
  }),
});

builder.queryFields((t) => ({
  environments: t.field({ type: [EnvironmentRef], resolve: (_r, _a, ctx) => ctx.em.find(EnvironmentSchema, {}, { orderBy: { id: 'asc' } }) }),
}));

builder.mutationFields((t) => ({
  createEnvironment: t.field({
    type: EnvironmentRef,
    description: 'Admin: registers an environment',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateEnvironmentInput', {
          fields: (f) => ({
            codename: f.string({ required: true }),
            architecture: f.string({ required: true }),
            variant: f.string(),
            backend: f.string({ description: 'unshare, incus-lxc, incus-vm or qemu' }),
            imageFormat: f.string(),
          }),
        }),
        required: true, description: 'The environment to register',
      }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) =>
      createOnce<Environment>(
        ctx,
        'createEnvironment',
        idempotencyKey,
        input,
        { idOf: (e) => e.id, replay: (em, id) => em.findOneOrFail(EnvironmentSchema, { id }) },
        (tx) => createEnvironment(tx, ctx.viewer, input),
      ),
  }),
}));
