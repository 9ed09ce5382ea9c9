import net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** A silent cut: nothing passes any more in either direction, and nobody is told. */
  blackholed: boolean;
}

/**
 * A TCP proxy between an agent and a server, to cut connections the way a network does: `cut()`
 * resets every connection (both ends see it), `blackhole()` stops forwarding on the open ones
 * without closing them (a silent cut: only keep-alives can find out), `dropAnswers()` lets requests
 * through and loses what the server answers, `close()`/`reopen()` refuse
 * and accept new connections on the same port, and `retarget()` points new connections at another
 * server (a restarted one). HTTP and WebSocket both go through it.
 */
export class TcpProxy {
  readonly port: number;
  private readonly pairs = new Set<Pair>();
  private server: net.Server;
  /** Requests reach the server, its answers are lost (open and new connections alike). */
  private answersDropped = false;

  private constructor(
    server: net.Server,
    private target: number,
  ) {
    this.server = server;
    this.port = (server.address() as net.AddressInfo).port;
  }

  /** Listens on an ephemeral port of 127.0.0.1 and forwards to 127.0.0.1:targetPort. */
  static async start(targetPort: number): Promise<TcpProxy> {
    let proxy: TcpProxy | null = null;
    const server = net.createServer((client) => proxy!.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy = new TcpProxy(server, targetPort);
    return proxy;
  }

  /** The URL of a server's GraphQL endpoint, through this proxy. */
  urlFor(serverUrl: string): string {
    const u = new URL(serverUrl);
    u.port = String(this.port);
    return u.toString();
  }

  /** Open connections (each an agent's WebSocket or HTTP keep-alive connection). */
  get connections(): number {
    return this.pairs.size;
  }

  /** New connections go to another port from now on. */
  retarget(targetPort: number): void {
    this.target = targetPort;
  }

  /** Resets every open connection, at both ends. New connections are still accepted. */
  cut(): void {
    for (const p of this.pairs) {
      p.client.resetAndDestroy();
      p.upstream.resetAndDestroy();
    }
    this.pairs.clear();
  }

  /** The open connections go silent: data in either direction is dropped, and no close is passed on. */
  blackhole(): number {
    for (const p of this.pairs) p.blackholed = true;
    return this.pairs.size;
  }

  /** From now on (until called with false) what the server sends is lost; what it is sent still arrives. */
  dropAnswers(drop: boolean): void {
    this.answersDropped = drop;
  }

  /** Refuses new connections and cuts the open ones. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.cut();
    await closed;
  }

  /** Accepts connections again, on the same port. */
  async reopen(): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.target, '127.0.0.1');
    const pair: Pair = { client, upstream, blackholed: false };
    this.pairs.add(pair);
    const end = () => {
      if (pair.blackholed) return; // a silent cut passes nothing on, not even a close
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (d) => void (pair.blackholed || upstream.write(d)));
    upstream.on('data', (d) => void (pair.blackholed || this.answersDropped || client.write(d)));
    for (const s of [client, upstream]) {
      s.on('error', () => undefined);
      s.on('close', end);
    }
  }

  /** Shuts everything, silent connections included (end of the test). */
  async stop(): Promise<void> {
    for (const p of this.pairs) p.blackholed = false;
    await this.close().catch(() => undefined);
  }
}
