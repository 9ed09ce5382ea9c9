/**
 * The rescue system of the Hetzner stand-in's servers: a real SSH server (the ssh2 package's server
 * side) on an ephemeral port of 127.0.0.1, standing in for port 22 of a server booted into Hetzner's
 * rescue system. It lets `root` in with a key that `enable_rescue` gave the server, and runs the two
 * commands an image upload uses, on the server's disk (a buffer the stand-in keeps):
 *   dd of=/dev/sda …               writes stdin to the disk, from its start
 *   head -c N /dev/sda | sha256sum  prints the sha256 of the disk's first N bytes
 * Any other command exits 127. `failWrites` makes dd fail as a full disk does.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import { generateSshKeyPair } from '../../../src/cli/image/ssh-key.js';

/** What the rescue system needs of a stand-in server. */
export interface RescueTarget {
  /** The public keys (OpenSSH lines) root may log in with; empty when the server is not in rescue. */
  rescueKeys(): readonly string[];
  /** The disk, as written so far. */
  disk: Buffer;
}

export interface RescueStandIn {
  readonly port: number;
  /** Commands run, in order, with the server they ran on. */
  readonly commands: { serverId: number; command: string }[];
  failWrites: boolean;
  close(): Promise<void>;
}

const keyData = (line: string): Buffer | null => {
  const parsed = ssh2.utils.parseKey(line);
  return parsed instanceof Error ? null : Buffer.from(parsed.getPublicSSH());
};

/** Starts the rescue system of the servers `targets` lists (read at each login). */
export async function startRescueStandIn(targets: () => Iterable<[number, RescueTarget]>): Promise<RescueStandIn> {
  const hostKey = generateSshKeyPair().private;
  const commands: RescueStandIn['commands'] = [];
  const rescue = { commands, failWrites: false } as RescueStandIn;

  const server = new ssh2.Server({ hostKeys: [hostKey] }, (client) => {
    let target: { id: number; server: RescueTarget } | null = null;
    client.on('authentication', (ctx) => {
      if (ctx.method !== 'publickey' || ctx.username !== 'root') return ctx.reject(['publickey']);
      const offered = ctx.key.data;
      for (const [id, s] of targets()) {
        const line = s.rescueKeys().find((k) => keyData(k)?.equals(offered));
        if (!line) continue;
        const parsed = ssh2.utils.parseKey(line);
        if (parsed instanceof Error) continue;
        // Without a signature the client only asks whether the key would do; with one, it proves it holds the private key.
        if (ctx.signature && ctx.blob && parsed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true)
          return ctx.reject();
        target = { id, server: s };
        return ctx.accept();
      }
      return ctx.reject();
    });
    client.on('ready', () => {
      client.on('session', (acceptSession) => {
        const session = acceptSession();
        session.on('exec', (accept, _reject, info) => {
          const stream = accept();
          const { id, server: s } = target!;
          commands.push({ serverId: id, command: info.command });
          const finish = (code: number) => {
            stream.exit(code);
            stream.end();
          };
          let m: RegExpMatchArray | null;
          if (/^dd of=\/dev\/sda( |$)/.test(info.command)) {
            const chunks: Buffer[] = [];
            stream.on('data', (d: Buffer) => chunks.push(d));
            stream.on('end', () => {
              if (rescue.failWrites) {
                stream.stderr.write("dd: error writing '/dev/sda': No space left on device\n");
                return finish(1);
              }
              const data = Buffer.concat(chunks);
              const disk = Buffer.alloc(Math.max(s.disk.length, data.length));
              s.disk.copy(disk);
              data.copy(disk);
              s.disk = disk;
              finish(0);
            });
          } else if ((m = info.command.match(/^head -c ([0-9]+) \/dev\/sda \| sha256sum$/))) {
            stream.write(
              `${createHash('sha256')
                .update(s.disk.subarray(0, Number(m[1])))
                .digest('hex')}  -\n`,
            );
            finish(0);
          } else {
            stream.stderr.write(`sh: 1: ${info.command.split(' ')[0]}: not found\n`);
            finish(127);
          }
        });
      });
    });
    client.on('error', () => {
      // a client that went away
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(rescue, {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}
