/**
 * A loopback TCP proxy in front of a real server (Redis, PostgreSQL), to cause an outage as a
 * client sees it without touching the shared server: `cut()` drops every connection and resets
 * each new one at once (what a restarting server looks like), `restore()` forwards again.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  /** `127.0.0.1:<port>` of the proxy. */
  host: string;
  port: number;
  /** Connections refused since the last `cut()`. */
  refused: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

/** Starts a proxy to `targetHost:targetPort` on an ephemeral loopback port. */
export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let down = false;
  const proxy: TcpProxy = {
    host: "127.0.0.1",
    port: 0,
    refused: 0,
    cut() {
      down = true;
      proxy.refused = 0;
      for (const s of open) s.destroy();
      open.clear();
    },
    restore() {
      down = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((client) => {
    if (down) {
      proxy.refused++;
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.port = (server.address() as { port: number }).port;
  return proxy;
}
