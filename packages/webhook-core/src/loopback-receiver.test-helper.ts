/** Real HTTP receivers on 127.0.0.1 (port 0) for the delivery tests; no mocks of the network. */
import { lookup as systemLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import type { AddressInfo, LookupFunction } from "node:net";

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface Receiver {
  port: number;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: ReceivedRequest[];
  /** TCP connections accepted so far (to observe keep-alive reuse, or that nothing connected). */
  connections: () => number;
  close: () => Promise<void>;
}

/** Starts a receiver that reads each request body, records it, then calls `handler`. */
export async function startReceiver(
  handler: (req: ReceivedRequest, res: http.ServerResponse) => void,
): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(received);
      handler(received, res);
    });
  });
  server.on("connection", () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port with nothing listening: bound once, then released. */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

type ResolverFailure = "ENOTFOUND" | "ENODATA" | "EAI_AGAIN";

/**
 * A DNS whose answers the test chooses (a rebinding attacker's name server, in effect); names not
 * in the table go to the system resolver.
 */
export function fakeLookup(table: Record<string, string[] | ResolverFailure>): LookupFunction {
  return (hostname, options, callback) => {
    const answers = table[hostname];
    if (!answers) return systemLookup(hostname, options, callback);
    // A code: the resolver's failure, as getaddrinfo reports it (ENOTFOUND for NXDOMAIN).
    if (typeof answers === "string") return callback(Object.assign(new Error(`getaddrinfo ${answers} ${hostname}`), { code: answers }), "", 4);
    const all: LookupAddress[] = answers.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    if (options.all) return callback(null, all);
    const first = all[0] as LookupAddress;
    return callback(null, first.address, first.family);
  };
}
