// compose.yaml's one-shot setup: waits for the service, makes sure the pool "compose" exists, and
// gives each agent named on the command line a one-shot activation token in
// /var/lib/tagsched-bootstrap/NAME.token (0600), unless it has one. An agent trades it for its
// worker token on its first start and keeps that in its own volume, so a token is never reused.
import fs from 'node:fs';

const server = process.env.TAGSCHED_SERVER_URL;
const admin = process.env.TAGSCHED_ADMIN_TOKEN;
const dir = '/var/lib/tagsched-bootstrap';
const agents = process.argv.slice(2);

async function gql(query) {
  const res = await fetch(server, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
    body: JSON.stringify({ query }),
  });
  const body = await res.json();
  if (!res.ok || body.errors)
    throw new Error(`${query.split('(')[0]}: HTTP ${res.status} ${JSON.stringify(body.errors ?? body)}`);
  return body.data;
}

for (let attempt = 1; ; attempt++) {
  const up = await fetch(new URL('/healthz', server)).then(
    (r) => r.ok,
    () => false,
  );
  if (up) break;
  if (attempt === 60) throw new Error(`${server} did not answer /healthz`);
  await new Promise((r) => setTimeout(r, 2000));
}
const pool = await gql(
  'mutation { createWorkerPool(input: { name: "compose" }) { __typename ... on Error { code message } } }',
);
if (!['WorkerPool', 'AlreadyExistsError'].includes(pool.createWorkerPool.__typename))
  throw new Error(JSON.stringify(pool));
for (const name of agents) {
  const file = `${dir}/${name}.token`;
  if (fs.existsSync(file)) continue;
  const { createActivationToken } = await gql(
    'mutation { createActivationToken(input: { pool: "compose" }) { __typename ... on ActivationTokenPayload { token } ... on Error { code message } } }',
  );
  if (!createActivationToken.token) throw new Error(JSON.stringify(createActivationToken));
  fs.writeFileSync(file, `${createActivationToken.token}\n`, { mode: 0o600 });
  process.stdout.write(`activation token for ${name} written\n`);
}
