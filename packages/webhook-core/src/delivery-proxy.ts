/**
 * Egress through a forward proxy (`DELIVERY_PROXY_URL`): how a platform gives its customers a
 * short, fixed list of source addresses to allow (a proxy with static egress addresses).
 *
 * The proxy is never asked for a name. The platform resolves and vets the receiver's address
 * exactly as for a direct connection (`delivery-agents.ts`), then asks the proxy for that address:
 * `CONNECT 203.0.113.7:443` for https, then TLS through the tunnel with the endpoint's host name
 * for SNI and the certificate check; the absolute form `POST http://203.0.113.7:8080/path` with
 * `Host: <endpoint host>` for plain http. A proxy resolving names itself would reopen the DNS
 * rebinding hole the connect-time check closes: the name could resolve to a private address
 * between our check and its connection.
 *
 * The credentials go in `Proxy-Authorization` only: they are never in a request the attempt log
 * records, nor in an error message or detail.
 */
import { STATUS_CODES } from "node:http";
import https from "node:https";
import { connect, isIP, type Socket } from "node:net";
import type { Duplex } from "node:stream";

/** A parsed `DELIVERY_PROXY_URL`. */
export interface DeliveryProxy {
  /** Host name or IP address of the proxy (IPv6 without brackets). */
  readonly host: string;
  readonly port: number;
  /** `Basic <base64 of user:password>`, or null without credentials. Never logged. */
  readonly authorization: string | null;
  /** `host:port` of the proxy: what logs and problems may show (never the credentials). */
  readonly address: string;
}

/** A `DELIVERY_PROXY_URL` that cannot be used; the message never repeats the value (it may hold a password). */
export class DeliveryProxyUrlError extends Error {
  override readonly name = "DeliveryProxyUrlError";
}

/**
 * Parses `http://[user:password@]host:port`. Only `http:` (the connection to the proxy is plain;
 * what goes through a CONNECT tunnel is the receiver's TLS), an explicit port (proxies have no
 * conventional one), no path, query or fragment. The user and password are percent-decoded, as
 * in any URL, so a password may hold `@` or `:` written as `%40` and `%3A`.
 */
export function parseDeliveryProxyUrl(text: string): DeliveryProxy {
  const shape = "must be http://[user:password@]host:port";
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new DeliveryProxyUrlError(`${shape} (not an absolute URL)`);
  }
  if (url.protocol !== "http:") throw new DeliveryProxyUrlError(`${shape} (the scheme is ${url.protocol.slice(0, -1)}, only http is supported)`);
  if (url.port === "") throw new DeliveryProxyUrlError(`${shape} (the port is missing)`);
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "") throw new DeliveryProxyUrlError(`${shape} (no path, query or fragment)`);
  if (url.password !== "" && url.username === "") throw new DeliveryProxyUrlError(`${shape} (a password without a user)`);
  let credentials: string | null = null;
  if (url.username !== "") {
    try {
      credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    } catch {
      throw new DeliveryProxyUrlError(`${shape} (the user or password has a malformed %-escape)`);
    }
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(url.port);
  return {
    host,
    port,
    authorization: credentials === null ? null : `Basic ${Buffer.from(credentials, "utf8").toString("base64")}`,
    address: `${isIP(host) === 6 ? `[${host}]` : host}:${port}`,
  };
}

/**
 * For each service's `config.ts`: `DELIVERY_PROXY_URL` (unset or blank: no proxy) parsed, or the
 * problem to report, naming the variable and never its value.
 */
export function readDeliveryProxyUrl(value: string | undefined): { proxy: DeliveryProxy | null; problem: string | null } {
  if (value === undefined || value.trim() === "") return { proxy: null, problem: null };
  try {
    return { proxy: parseDeliveryProxyUrl(value.trim()), problem: null };
  } catch (err) {
    if (!(err instanceof DeliveryProxyUrlError)) throw err;
    return { proxy: null, problem: `DELIVERY_PROXY_URL ${err.message}` };
  }
}

/** Code of {@link DeliveryProxyError}. */
export const DELIVERY_PROXY_ERROR_CODE = "ERR_DELIVERY_PROXY";

/**
 * The proxy did not carry an attempt: unreachable, closed the connection, refused (407, 403...), or
 * could not reach the receiver itself (502, 504...). A connection failure of the attempt (retried
 * on the schedule): the receiver never saw the request. The message is what the delivery history
 * keeps; {@link DeliveryProxyError.detail} (the proxy's address, what it said) is for the server's
 * log only.
 */
export class DeliveryProxyError extends Error {
  override readonly name = "DeliveryProxyError";
  readonly code = DELIVERY_PROXY_ERROR_CODE;
  constructor(
    message: string,
    /** For the server's log only. */
    readonly detail: string,
    /**
     * True when the platform's own egress failed (the proxy unreachable, or refusing with a 4xx:
     * its credentials, its rules), so the receiver was never tried: not the receiver's failure.
     * False when the proxy tried and could not reach the receiver (a 5xx), which is.
     */
    readonly egressFailure: boolean,
  ) {
    super(message);
  }

  /** The proxy could not be reached, or dropped the connection before answering. */
  static unreachable(proxy: DeliveryProxy, targetHost: string, why: string): DeliveryProxyError {
    return new DeliveryProxyError(`could not connect to ${targetHost}: the delivery proxy could not be reached`, `delivery proxy ${proxy.address}: ${why}`, true);
  }

  /**
   * The proxy answered `status` instead of carrying the request: a 4xx is its refusal (the
   * platform's egress), a 5xx its report that the receiver could not be reached. The message
   * uses the standard reason phrase, not the proxy's own text, which customers have no use for.
   */
  static refused(proxy: DeliveryProxy, targetHost: string, status: number, request: string): DeliveryProxyError {
    const answer = `${status} ${STATUS_CODES[status] ?? "unknown status"}`;
    const detail = `delivery proxy ${proxy.address} answered ${status} to ${request}`;
    if (status >= 500) return new DeliveryProxyError(`could not connect to ${targetHost} through the delivery proxy (${answer})`, detail, false);
    return new DeliveryProxyError(`could not connect to ${targetHost}: the delivery proxy refused (${answer})`, detail, true);
  }
}

/**
 * The proxy's failure as customers may see it, with the detail for the server's log and whether
 * it was the platform's egress rather than the receiver ({@link DeliveryProxyError.egressFailure});
 * null when `err` is not one.
 */
export function describeProxyFailure(err: unknown): { message: string; detail: string; egressFailure: boolean } | null {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    if (current instanceof DeliveryProxyError) return { message: current.message, detail: current.detail, egressFailure: current.egressFailure };
    current = current.cause;
  }
  return null;
}

/** `address:port` as a request target: IPv6 in brackets. */
export function authorityOf(address: string, port: number | string): string {
  return `${isIP(address) === 6 ? `[${address}]` : address}:${port}`;
}

/** Longest answer head accepted from the proxy for a CONNECT; a longer one is not a proxy's. */
const MAX_CONNECT_ANSWER_BYTES = 16 * 1024;

/**
 * How long a CONNECT may take. The attempt's own timeout answers the caller sooner; this only
 * bounds how long a tunnel that the attempt gave up on holds a socket.
 */
export const TUNNEL_SETUP_TIMEOUT_MS = 60_000;

/**
 * Opens a tunnel to `address:port` (already resolved and vetted) through the proxy: resolves with
 * the socket once the proxy answered 2xx, ready for the receiver's TLS. `targetHost` (the
 * endpoint's host name) only names the target in error messages.
 */
export function openTunnel(proxy: DeliveryProxy, address: string, port: number, targetHost: string): Promise<Socket> {
  const authority = authorityOf(address, port);
  const request = `CONNECT ${authority}`;
  return new Promise((resolve, reject) => {
    const socket = connect({ host: proxy.host, port: proxy.port });
    let head = Buffer.alloc(0);
    let done = false;
    const finish = (err: DeliveryProxyError | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.removeListener("data", onData);
      socket.removeListener("error", onError);
      socket.removeListener("close", onClose);
      if (err === null) return resolve(socket);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(() => finish(DeliveryProxyError.unreachable(proxy, targetHost, `no answer to ${request} within ${TUNNEL_SETUP_TIMEOUT_MS} ms`)), TUNNEL_SETUP_TIMEOUT_MS);
    timer.unref();
    const onError = (err: Error): void => finish(DeliveryProxyError.unreachable(proxy, targetHost, err.message));
    const onClose = (): void => finish(DeliveryProxyError.unreachable(proxy, targetHost, `closed the connection before answering ${request}`));
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end === -1) {
        if (head.length > MAX_CONNECT_ANSWER_BYTES) finish(DeliveryProxyError.unreachable(proxy, targetHost, `answered ${request} with more than ${MAX_CONNECT_ANSWER_BYTES} bytes of headers`));
        return;
      }
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString("latin1"));
      if (status === null) return finish(DeliveryProxyError.unreachable(proxy, targetHost, `answered ${request} with something that is not HTTP`));
      const code = Number(status[1]);
      if (code < 200 || code > 299) return finish(DeliveryProxyError.refused(proxy, targetHost, code, request));
      // Nothing may follow a 2xx before our TLS hello; should a proxy send early bytes anyway, they are the tunnel's.
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      finish(null);
    };
    socket.on("data", onData);
    socket.on("error", onError);
    socket.on("close", onClose);
    const authorization = proxy.authorization === null ? "" : `Proxy-Authorization: ${proxy.authorization}\r\n`;
    socket.write(`${request} HTTP/1.1\r\nHost: ${authority}\r\n${authorization}\r\n`);
  });
}

/** Resolves a host name (or checks an IP literal) as a direct connection would, refusing what the policy refuses. */
export type AddressVetter = (host: string) => Promise<string>;

type ConnectionCallback = (err: Error | null, socket: Duplex) => void;

/**
 * An https agent whose connections are CONNECT tunnels through the proxy to the vetted address,
 * with TLS on top as a direct connection has it (SNI and certificate check on the endpoint's host
 * name, the agent's `ca`, TLS session reuse, keep-alive). Kept-alive tunnels are reused per
 * receiver like direct connections.
 */
export class ProxyTunnelAgent extends https.Agent {
  constructor(
    options: https.AgentOptions,
    private readonly proxy: DeliveryProxy,
    private readonly vet: AddressVetter,
  ) {
    super(options);
  }

  /** Returns nothing: Node's agent then waits for `callback`, called once the tunnel and its TLS are set up (or failed). */
  override createConnection(options: https.RequestOptions, callback?: ConnectionCallback): undefined {
    const host = String(options.host ?? options.hostname ?? "localhost");
    const port = Number(options.port ?? 443);
    // Node's callback reads the socket only when there is no error.
    const done = (err: Error | null, socket?: Duplex): void => callback?.(err, socket as Duplex);
    this.vet(host)
      .then((address) => openTunnel(this.proxy, address, port, host))
      .then(
        (socket) => {
          let secure: Duplex | null | undefined;
          try {
            // https.Agent's own: tls.connect over the tunnel, with the TLS session cache of this agent.
            secure = super.createConnection({ ...options, socket } as https.RequestOptions);
          } catch (err) {
            socket.destroy();
            return done(err as Error);
          }
          if (secure) done(null, secure);
          else done(new Error("TLS over the delivery proxy's tunnel could not start"));
        },
        (err: Error) => done(err),
      );
    return undefined;
  }
}
