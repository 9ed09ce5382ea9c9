import { builder } from '../builder.js';
import { firstDescription, firstOf } from './pagination.js';
import { ForbiddenError, InputError, UnauthenticatedError } from '../../core/errors.js';
import { EnvironmentSchema, type Environment } from '../../storage/entities/environment.js';
import { createEnvironment } from '../../services/work/environments.js';
import { adminsOnly } from '../../services/work/idempotency.js';
import { createOnce, IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';

const EnvironmentRef = builder.objectRef<Environment>('Environment').implement({
  description: 'A build environment, built for one architecture; tasks naming it must run on that architecture',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Its id, as task data names it (environment_id)' }),
    codename: t.exposeString('codename', { description: 'The Debian codename, e.g. bookworm' }),
    architecture: t.exposeString('architecture', { description: 'The Debian architecture, e.g. arm64' }),
    variant: t.exposeString('variant', { nullable: true, description: 'Its variant; null: none' }),
    backend: t.exposeString('backend', {
      nullable: true,
      description: 'The executor backend it is for (unshare, incus-lxc, incus-vm, qemu); null: any',
    }),
    imageFormat: t.exposeString('imageFormat', {
      nullable: true,
      description: 'The format of its image; null: unspecified',
    }),
  }),
});

builder.queryFields((t) => ({
  environments: t.field({
    type: [EnvironmentRef],
    description: 'Every registered environment, oldest first',
    args: { first: t.arg.int({ description: firstDescription('Query.environments', 'environments') }) },
    resolve: (_r, args, ctx) =>
      ctx.em.find(EnvironmentSchema, {}, { orderBy: { id: 'asc' }, limit: firstOf('Query.environments', args.first) }),
  }),
}));

builder.mutationFields((t) => ({
  createEnvironment: t.field({
    type: EnvironmentRef,
    description: 'Admin: registers an environment',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateEnvironmentInput', {
          description: 'A build environment to register',
          fields: (f) => ({
            codename: f.string({ required: true, description: 'The Debian codename, e.g. bookworm' }),
            architecture: f.string({ required: true, description: 'The Debian architecture, e.g. arm64' }),
            variant: f.string({ description: 'Its variant, if any' }),
            backend: f.string({ description: 'unshare, incus-lxc, incus-vm or qemu' }),
            imageFormat: f.string({ description: 'The format of its image, if given' }),
          }),
        }),
        required: true,
        description: 'The environment to register',
      }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) =>
      createOnce<Environment>(
        ctx,
        'createEnvironment',
        idempotencyKey,
        input,
        { idOf: (e) => e.id, replay: (em, id) => em.findOneOrFail(EnvironmentSchema, { id }), mayRead: adminsOnly },
        (tx) => createEnvironment(tx, ctx.viewer, input),
      ),
  }),
}));
