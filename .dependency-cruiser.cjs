/**
 * The dependency check (`npm run deps:check`, run by .ci/run after the lint): no import cycle
 * anywhere in src/, no import up a layer, the agent apart from the server, and the services' domains
 * in one order. There is no list of exceptions: a violation is fixed in the code.
 *
 * Layers of the server, top to bottom; a module may import its own layer and the layers below it:
 *   1. entry      server.ts, app.ts (wiring only) and what it starts with (database.ts, secret-key.ts,
 *                 housekeeping.ts), cli/, packaging/, the image builder (images/ but its manifest
 *                 format), embedded-pg.ts, startup-errors.ts
 *   2. interface  schema/, schema.ts, builder.ts, ws/, status/, metrics/ (but recorder.ts), limits/,
 *                 loaders.ts, context*.ts, client-auth.ts, health.ts, the HTTP helpers (http/,
 *                 parse-guard.ts, input-guard.ts, graphiql-examples.ts, log-adapters.ts)
 *   3. loops      provisioner/ (the provisioning cycle: provisioner.ts, cycle.ts, reconcile.ts, …) and
 *                 server-tasks/: long-running work that calls the services
 *   4. services   services/, and metrics/recorder.ts (the interfaces the services tell metrics through)
 *   5. scheduler  scheduler/, and the provider drivers (provisioner/provider.ts, providers.ts,
 *                 providers/, user-data.ts): what the services check and call, which knows no service
 *   6. storage    entities/, db/, orm.ts, events.ts, images/manifest-format.ts
 *   7. base       tags/, tasks/, config.ts, errors.ts, log.ts; tags/ and tasks/ import nothing else of src/
 * Apart: agent/ (a program of its own) imports only agent/, shared/ and tags/ (pure, and itself barred
 * from importing anything else: the agent checks tags with the server's syntax); shared/ imports nothing
 * of src/.
 *
 * The services' domains, top to bottom (a domain imports only those below it; services/README.md):
 *   work → pools → workers → workflows → identity → input
 */
const LAYERS = [
  ['entry', '^src/(server\\.ts|app\\.ts|database\\.ts|secret-key\\.ts|housekeeping\\.ts|cli/|packaging/|embedded-pg\\.ts|startup-errors\\.ts|images/(?!manifest-format\\.ts))'],
  [
    'interface',
    '^src/(schema/|schema\\.ts|builder\\.ts|ws/|status/|metrics/(?!recorder\\.ts)|limits/|loaders\\.ts|context[^/]*\\.ts|client-auth\\.ts|health\\.ts|http/|parse-guard\\.ts|input-guard\\.ts|graphiql-examples\\.ts|log-adapters\\.ts)',
  ],
  ['loops', '^src/(provisioner/(?!provider\\.ts|providers\\.ts|providers/|user-data\\.ts)|server-tasks/)'],
  ['services', '^src/(services/|metrics/recorder\\.ts)'],
  ['scheduler', '^src/(scheduler/|provisioner/(provider\\.ts|providers\\.ts|providers/|user-data\\.ts))'],
  ['storage', '^src/(entities/|db/|orm\\.ts|events\\.ts|images/manifest-format\\.ts)'],
  ['base', '^src/(tags/|tasks/|config\\.ts|errors\\.ts|log\\.ts)'],
];

const DOMAINS = ['work', 'pools', 'workers', 'workflows', 'identity', 'input'];

const either = (patterns) => `(${patterns.join('|')})`;

/** One rule per layer: nothing in it imports a layer above it. */
const layerRules = LAYERS.slice(1).map(([name, path], i) => ({
  name: `no-import-up-from-${name}`,
  comment: `${name} imports only its own layer and those below it, never ${LAYERS.slice(0, i + 1)
    .map(([above]) => above)
    .join(', ')}`,
  severity: 'error',
  from: { path },
  to: { path: either(LAYERS.slice(0, i + 1).map(([, above]) => above)) },
}));

/** One rule per domain of the services: nothing in it imports a domain above it. */
const domainRules = DOMAINS.slice(1).map((name, i) => ({
  name: `no-import-up-from-services-${name}`,
  comment: `services/${name}/ imports only the services domains below it, never ${DOMAINS.slice(0, i + 1).join(', ')}`,
  severity: 'error',
  from: { path: `^src/services/${name}/` },
  to: { path: `^src/services/${either(DOMAINS.slice(0, i + 1))}/` },
}));

/** Every module of src/ belongs to a layer, the agent or shared/: a new folder is placed on purpose. */
const everyModulePlaced = {
  name: 'every-module-in-a-layer',
  comment: 'a module of src/ that no layer names: add its path to a layer above (or to agent/, shared/)',
  severity: 'error',
  from: { path: '^src/', pathNot: either([...LAYERS.map(([, path]) => path), '^src/agent/', '^src/shared/']) },
  to: {},
};

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'no import cycle anywhere in src/: a piece two modules share moves to a module both import',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'agent-imports-no-server-module',
      comment: 'the agent is a program of its own, bundled alone: it imports only agent/, shared/ and the pure tags/',
      severity: 'error',
      from: { path: '^src/agent/' },
      to: { path: '^src/', pathNot: '^src/(agent|shared|tags)/' },
    },
    {
      name: 'shared-imports-nothing',
      comment: 'shared/ is what the server and the agent both import: it imports nothing of either',
      severity: 'error',
      from: { path: '^src/shared/' },
      to: { path: '^src/', pathNot: '^src/shared/' },
    },
    {
      name: 'tags-and-tasks-stand-alone',
      comment: 'tags/ and tasks/ are pure: they import nothing of src/ but each other (no ORM, no GraphQL, no clock)',
      severity: 'error',
      from: { path: '^src/(tags|tasks)/' },
      to: { path: '^src/', pathNot: '^src/(tags|tasks)/' },
    },
    ...layerRules,
    ...domainRules,
    everyModulePlaced,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a cycle or a layer broken by a type is broken all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.d\\.ts$' },
  },
};
