/**
 * Publishing a worker image to Hetzner Cloud, which has no upload API: a temporary server is booted
 * into the rescue system with a temporary SSH key, the raw disk is streamed over SSH into
 * `dd of=/dev/sda` (and read back as a sha256), the server is powered off and snapshotted
 * (create_image, type snapshot, labelled with the image and its manifest's sha256), and the server
 * and the key are deleted. A failed attempt deletes the server, the key and a half-made snapshot.
 * The API token comes from the account file and reaches no message.
 */
import { createReadStream } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import ssh2 from 'ssh2';
import { z } from 'zod';
import { accountRedactor } from '../../providers/redact.js';
import { HETZNER_PUBLICATION_REGION } from '../../providers/publication.js';
import { PublishError, type PublishImage, type PublishPlan } from './publish.js';
import { generateSshKeyPair } from './ssh-key.js';

/** The labels of the snapshot (a label value holds 63 characters: the sha256 is split in two halves). */
export const HETZNER_PUBLISH_LABELS = {
  image: 'tagsched-image',
  manifestSha256First: 'tagsched-manifest-sha256-1',
  manifestSha256Second: 'tagsched-manifest-sha256-2',
  /** On the temporary server and key: what they are for. */
  publishing: 'tagsched-publishing',
} as const;

/** The server type a publish boots for an architecture, unless told: the smallest shared ones. */
const SERVER_TYPES: Readonly<Record<string, string>> = { amd64: 'cx22', arm64: 'cax11' };
/** The image the temporary server is created from (it boots the rescue system; its disk is overwritten). */
const BASE_IMAGE = 'debian-12';
const LABEL_VALUE = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;

export interface HetznerPublishOptions {
  readonly token: string;
  /** TAGSCHED_HETZNER_API_URL, or https://api.hetzner.cloud/v1. */
  readonly apiUrl: string;
  /** The location of the temporary server (the snapshot then boots in every location). */
  readonly location: string;
  readonly serverType?: string;
  /** The SSH port of the rescue system: 22 on Hetzner (a test's stand-in listens elsewhere). */
  readonly sshPort?: number;
  /** Between two reads of an action or two SSH attempts, and how long to wait for one in all. */
  readonly pollMs?: number;
  readonly waitMs?: number;
}

interface HetznerState {
  sshKeyId: number | null;
  serverId: number | null;
  imageId: number | null;
  ip: string | null;
  privateKey: string | null;
}

const actionShape = z.object({
  id: z.number(),
  status: z.string(),
  progress: z.number().nullish(),
  error: z.object({ code: z.string(), message: z.string() }).nullish(),
});
const errorShape = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Reads a hetzner account file's object: {"token": …}, as a pool's account. */
export function hetznerTokenOf(json: Record<string, unknown>): string {
  if (typeof json.token !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(json.token))
    throw new PublishError(
      'the hetzner account file needs {"token": "<a Hetzner Cloud API token with read and write access>"}',
    );
  return json.token;
}

/** The plan that publishes `image` to the project of the token. */
export function hetznerPublishPlan(image: PublishImage, options: HetznerPublishOptions): PublishPlan<HetznerState> {
  const redact = accountRedactor({ token: options.token });
  const poll = options.pollMs ?? 2000;
  const waitMs = options.waitMs ?? 900_000;
  const serverType = options.serverType ?? SERVER_TYPES[image.manifest.recipe.architecture];
  const sha = image.manifestSha256;
  const suffix = randomBytes(4).toString('hex');
  const temporary = `tagsched-publish-${suffix}`;

  async function api<T>(what: string, method: string, path: string, shape: z.ZodType<T>, body?: unknown): Promise<T> {
    let status: number;
    let text: string;
    try {
      const res = await fetch(`${options.apiUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${options.token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(60_000),
      });
      status = res.status;
      text = await res.text();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      throw new PublishError(redact(`${what}: the Hetzner API could not be reached (${cause})`));
    }
    let document: unknown = undefined;
    try {
      document = text ? JSON.parse(text) : {};
    } catch {
      // not JSON: said below
    }
    if (status < 200 || status > 299) {
      const failed = errorShape.safeParse(document);
      throw new PublishError(
        redact(
          failed.success
            ? `${what}: ${failed.data.error.message} (${failed.data.error.code})`
            : `${what}: HTTP ${status}`,
        ),
      );
    }
    const parsed = shape.safeParse(document);
    if (!parsed.success) throw new PublishError(`${what}: malformed answer (HTTP ${status})`);
    return parsed.data;
  }

  /** Waits for an action to succeed; its error ends the attempt. */
  async function waitFor(what: string, action: { id: number }, report: (line: string) => void): Promise<void> {
    const until = Date.now() + waitMs;
    for (;;) {
      const { action: a } = await api(what, 'GET', `/actions/${action.id}`, z.object({ action: actionShape }));
      if (a.status === 'success') return;
      if (a.status === 'error')
        throw new PublishError(
          redact(`${what}: ${a.error?.message ?? 'the action failed'} (${a.error?.code ?? 'error'})`),
        );
      report(`${what}: ${a.progress ?? 0}%`);
      if (Date.now() > until) throw new PublishError(`${what}: not finished within ${Math.round(waitMs / 1000)} s`);
      await sleep(poll);
    }
  }

  /** One SSH connection to the rescue system, retried while it boots. */
  async function connect(state: HetznerState, report: (line: string) => void): Promise<ssh2.Client> {
    const until = Date.now() + waitMs;
    for (let attempt = 1; ; attempt++) {
      const client = new ssh2.Client();
      try {
        await new Promise<void>((resolve, reject) => {
          client.once('ready', () => resolve());
          client.once('error', reject);
          client.connect({
            host: state.ip!,
            port: options.sshPort ?? 22,
            username: 'root',
            privateKey: state.privateKey!,
            readyTimeout: 20_000,
            // The rescue system's host key is new with each boot: there is nothing to check it against.
            hostVerifier: () => true,
          });
        });
        // A connection lost later fails the command running on it (its channel closes without an exit code).
        client.on('error', () => {});
        return client;
      } catch (err) {
        client.end();
        if (Date.now() > until)
          throw new PublishError(
            `cannot log in to the rescue system of server ${state.serverId} at ${state.ip}: ${(err as Error).message}`,
          );
        report(`waiting for the rescue system's SSH (attempt ${attempt}: ${(err as Error).message})`);
        await sleep(poll);
      }
    }
  }

  /** Runs a command on the rescue system, `input` (a file) as its stdin; resolves to its stdout. */
  function exec(
    client: ssh2.Client,
    command: string,
    input: string | null,
    report: (line: string) => void,
  ): Promise<string> {
    return new Promise((resolve, reject) => {
      client.exec(command, (err, channel) => {
        if (err) return reject(new PublishError(`${command}: ${err.message}`));
        let out = '';
        let errText = '';
        let code: number | null = null;
        channel.on('data', (d: Buffer) => (out += d.toString()));
        channel.stderr.on('data', (d: Buffer) => (errText += d.toString()));
        channel.on('exit', (c: number | null) => (code = c));
        channel.on('close', () => {
          if (code === 0) resolve(out);
          else
            reject(
              new PublishError(
                `${command.split(' ')[0]} on the rescue system failed (exit ${code ?? 'by a signal'}): ${errText.trim().slice(0, 500)}`,
              ),
            );
        });
        if (input === null) return void channel.end();
        let sent = 0;
        let shown = 0;
        const file = createReadStream(input, { highWaterMark: 4 * 2 ** 20 });
        file.on('data', (chunk) => {
          sent += chunk.length;
          if (sent - shown >= 64 * 2 ** 20 || sent === image.rawBytes) {
            shown = sent;
            report(`${Math.floor(sent / 2 ** 20)} of ${Math.ceil(image.rawBytes / 2 ** 20)} MiB written`);
          }
        });
        file.on('error', (e) => reject(new PublishError(`cannot read ${input}: ${e.message}`)));
        file.pipe(channel);
      });
    });
  }

  const stages: PublishPlan<HetznerState>['stages'] = [
    {
      title: `Create a temporary SSH key and server (${serverType ?? '?'} in ${options.location})`,
      async run(state, report) {
        if (!serverType)
          throw new PublishError(
            `Hetzner has no ${image.manifest.recipe.architecture} servers (amd64 and arm64 only); or give --server-type`,
          );
        if (!LABEL_VALUE.test(image.name))
          throw new PublishError(
            `"${image.name}" cannot be a Hetzner label value: rebuild it with a name of letters, digits, ".", "-" and "_"`,
          );
        const keys = generateSshKeyPair(temporary);
        state.privateKey = keys.private;
        const labels = { [HETZNER_PUBLISH_LABELS.publishing]: image.name };
        const { ssh_key } = await api(
          'create the SSH key',
          'POST',
          '/ssh_keys',
          z.object({ ssh_key: z.object({ id: z.number() }) }),
          {
            name: temporary,
            public_key: keys.public,
            labels,
          },
        );
        state.sshKeyId = ssh_key.id;
        const created = await api(
          'create the server',
          'POST',
          '/servers',
          z.object({ server: z.object({ id: z.number() }), action: actionShape }),
          {
            name: temporary,
            server_type: serverType,
            image: BASE_IMAGE,
            location: options.location,
            ssh_keys: [ssh_key.id],
            labels,
            start_after_create: false,
          },
        );
        state.serverId = created.server.id;
        await waitFor('create the server', created.action, report);
      },
    },
    {
      title: 'Boot it into the rescue system (enable_rescue, poweron)',
      async run(state, report) {
        const rescue = await api(
          'enable rescue',
          'POST',
          `/servers/${state.serverId}/actions/enable_rescue`,
          z.object({ action: actionShape }),
          {
            type: 'linux64',
            ssh_keys: [state.sshKeyId],
          },
        );
        await waitFor('enable rescue', rescue.action, report);
        const on = await api(
          'power on',
          'POST',
          `/servers/${state.serverId}/actions/poweron`,
          z.object({ action: actionShape }),
          {},
        );
        await waitFor('power on', on.action, report);
        const { server } = await api(
          'read the server',
          'GET',
          `/servers/${state.serverId}`,
          z.object({ server: z.object({ public_net: z.object({ ipv4: z.object({ ip: z.string() }).nullish() }) }) }),
        );
        if (!server.public_net.ipv4)
          throw new PublishError('the server has no public IPv4 address to reach its rescue system');
        state.ip = server.public_net.ipv4.ip;
      },
    },
    {
      title: `Write the disk (${Math.ceil(image.rawBytes / 2 ** 20)} MiB) to /dev/sda over SSH, and read its sha256 back`,
      async run(state, report) {
        const client = await connect(state, report);
        try {
          await exec(client, 'dd of=/dev/sda bs=4M conv=fsync status=none', image.rawPath, report);
          report('reading the written disk back');
          const out = await exec(client, `head -c ${image.rawBytes} /dev/sda | sha256sum`, null, report);
          const written = out.trim().split(/\s+/)[0];
          const expected = await rawSha256(image.rawPath);
          if (written !== expected)
            throw new PublishError(`the disk written reads back with sha256 ${written}, not the image's ${expected}`);
        } finally {
          client.end();
        }
      },
    },
    {
      title: 'Power off and snapshot the disk (create_image)',
      async run(state, report) {
        const off = await api(
          'power off',
          'POST',
          `/servers/${state.serverId}/actions/poweroff`,
          z.object({ action: actionShape }),
          {},
        );
        await waitFor('power off', off.action, report);
        const made = await api(
          'create the snapshot',
          'POST',
          `/servers/${state.serverId}/actions/create_image`,
          z.object({ image: z.object({ id: z.number() }), action: actionShape }),
          {
            type: 'snapshot',
            description: `tagsched worker image ${image.name} (manifest sha256 ${sha})`,
            labels: {
              [HETZNER_PUBLISH_LABELS.image]: image.name,
              [HETZNER_PUBLISH_LABELS.manifestSha256First]: sha.slice(0, 32),
              [HETZNER_PUBLISH_LABELS.manifestSha256Second]: sha.slice(32),
            },
          },
        );
        state.imageId = made.image.id;
        await waitFor('create the snapshot', made.action, report);
      },
    },
    {
      title: 'Delete the temporary server and SSH key',
      async run(state, report) {
        const removed = await removeTemporary(state);
        if (removed.left.length) throw new PublishError(`could not delete ${removed.left.join(', ')}`);
        report(removed.removed.join(', '));
      },
    },
  ];

  /** Deletes the temporary server and key (a server or key already gone counts as deleted). */
  async function removeTemporary(state: HetznerState): Promise<{ removed: string[]; left: string[] }> {
    const removed: string[] = [];
    const left: string[] = [];
    const remove = async (what: string, path: string) => {
      try {
        await api(`delete the ${what}`, 'DELETE', path, z.unknown());
        removed.push(what);
      } catch (err) {
        if (/\(not_found\)$/.test((err as Error).message)) removed.push(what);
        else left.push(`${what} (${(err as Error).message})`);
      }
    };
    if (state.serverId !== null) {
      await remove(`server ${state.serverId}`, `/servers/${state.serverId}`);
      state.serverId = null;
    }
    if (state.sshKeyId !== null) {
      await remove(`SSH key ${state.sshKeyId}`, `/ssh_keys/${state.sshKeyId}`);
      state.sshKeyId = null;
    }
    return { removed, left };
  }

  return {
    state: { sshKeyId: null, serverId: null, imageId: null, ip: null, privateKey: null },
    stages,
    async cleanUp(state) {
      const out = { removed: [] as string[], left: [] as string[] };
      if (state.imageId !== null) {
        try {
          await api('delete the snapshot', 'DELETE', `/images/${state.imageId}`, z.unknown());
          out.removed.push(`snapshot ${state.imageId}`);
        } catch (err) {
          if (/\(not_found\)$/.test((err as Error).message)) out.removed.push(`snapshot ${state.imageId}`);
          else out.left.push(`snapshot ${state.imageId} (${(err as Error).message})`);
        }
      }
      const temporaries = await removeTemporary(state);
      return { removed: [...out.removed, ...temporaries.removed], left: [...out.left, ...temporaries.left] };
    },
    result(state) {
      return { providerImageId: String(state.imageId), region: HETZNER_PUBLICATION_REGION };
    },
  };
}

async function rawSha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
