import * as net from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL that can cut every live connection at once (both
 * sockets destroyed, no goodbye on either side): what a flaky network, a NAT timeout or a
 * load balancer's failover does to a fleet's connections. Clients connect to `port`;
 * each connection is piped to the server at `target`. New connections are accepted again
 * at once after a cut (the server is still there; only the wire went).
 */
export class PgDropProxy {
  private readonly pairs = new Set<{ client: net.Socket; server: net.Socket }>();
  private readonly server: net.Server;
  private _port = 0;
  /** Cuts made, the connections they destroyed, and every connection accepted. */
  readonly stats = { cuts: 0, dropped: 0, accepted: 0 };

  private constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      const upstream = net.connect({ host: this.target.host, port: this.target.port });
      const pair = { client, server: upstream };
      this.pairs.add(pair);
      this.stats.accepted++;
      const close = () => {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  static async start(target: { host?: string; port: number }): Promise<PgDropProxy> {
    const proxy = new PgDropProxy({ host: target.host ?? '127.0.0.1', port: target.port });
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy._port = (proxy.server.address() as net.AddressInfo).port;
    return proxy;
  }

  get port(): number {
    return this._port;
  }

  /** The store URL through this proxy (same credentials and database, this port). */
  url(direct: string): string {
    const u = new URL(direct);
    u.host = `127.0.0.1:${this.port}`;
    return u.toString();
  }

  /** Live connections through the proxy now. */
  get live(): number {
    return this.pairs.size;
  }

  /** Destroys every live connection (both sides); returns how many. */
  cut(): number {
    const n = this.pairs.size;
    for (const p of [...this.pairs]) {
      // An RST (resetAndDestroy): the peer sees ECONNRESET, not a clean end.
      for (const sock of [p.client, p.server]) {
        if (typeof sock.resetAndDestroy === 'function') sock.resetAndDestroy();
        else sock.destroy();
      }
      this.pairs.delete(p);
    }
    this.stats.cuts++;
    this.stats.dropped += n;
    return n;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
