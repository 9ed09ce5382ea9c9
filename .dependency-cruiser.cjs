/**
 * The dependency check (`npm run deps:check`, run by .ci/run after the lint): no import cycle
 * anywhere in src/, no import up a layer, the agent apart from the server, and the services' domains
 * in one order. There is no list of exceptions: a violation is fixed in the code.
 *
 * The folders are the layers (docs/architecture.md), top to bottom; a module may import its own layer
 * and the layers below it:
 *   1. entry      server.ts (the entry), server/ (app wiring, start-up), cli/ (the admin CLI, the image
 *                 builder, the build and the developers' scripts)
 *   2. interface  api/: GraphQL, HTTP, WebSocket, status pages, limits, the metrics endpoint
 *   3. loops      loops/: what runs by itself (the provisioner, server tasks, housekeeping)
 *   4. services   services/: plain functions by domain
 *   5. scheduler  scheduler/ and providers/: what the services check and call, which knows no service
 *   6. storage    storage/: the ORM, entities, events, database helpers
 *   7. base       core/: configuration, errors, log, tags/, tasks/; core/tags/ and core/tasks/ import
 *                 nothing else of src/
 * Apart: agent/ (a program of its own) imports only agent/, shared/ and core/tags/ (pure: the agent
 * checks tags with the server's syntax); shared/ imports nothing of src/. The interface runs no SQL of
 * its own: api/ never imports the database helpers (storage/db/).
 *
 * The services' domains, top to bottom (a domain imports only those below it; services/README.md):
 *   work → pools → workers → workflows → identity → input
 */
const LAYERS = [
  ['entry', '^src/(server\\.ts$|server/|cli/)'],
  ['interface', '^src/api/'],
  ['loops', '^src/loops/'],
  ['services', '^src/services/'],
  ['scheduler', '^src/(scheduler|providers)/'],
  ['storage', '^src/storage/'],
  ['base', '^src/core/'],
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
      comment:
        'the agent is a program of its own, bundled alone: it imports only agent/, shared/ and the pure core/tags/',
      severity: 'error',
      from: { path: '^src/agent/' },
      to: { path: '^src/', pathNot: '^src/(agent/|shared/|core/tags/)' },
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
      comment:
        'core/tags/ and core/tasks/ are pure: they import nothing of src/ but each other (no ORM, no GraphQL, no clock)',
      severity: 'error',
      from: { path: '^src/core/(tags|tasks)/' },
      to: { path: '^src/', pathNot: '^src/core/(tags|tasks)/' },
    },
    {
      name: 'interface-runs-no-sql',
      comment:
        'api/ runs no SQL of its own: it calls the services and scheduler/storage/, which own the statements, never the database helpers of storage/db/ (test/architecture/interface-sql.test.ts checks the statements)',
      severity: 'error',
      from: { path: '^src/api/' },
      to: { path: '^src/storage/db/' },
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
