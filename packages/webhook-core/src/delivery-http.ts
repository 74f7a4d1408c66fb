/**
 * One delivery attempt over HTTP: POST the stored bytes, keep the first bytes of the answer, never
 * follow a redirect, never retry inside the call (retries are the queue's job, on the spec's
 * schedule).
 *
 * One transport, over node:http, for every delivery: the worker's queued deliveries, the Test
 * action and the synchronous auth hook (docs/decisions/0013-one-http-transport-for-deliveries.md).
 */
import { EventEmitter } from "node:events";
import { performance } from "node:perf_hooks";
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ClientRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Transform } from "node:stream";
import { constants as zlibConstants, createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { describePolicyRefusal, describeUnresolvedHost, type DeliveryAgents, type ProxyRoute } from "./delivery-agents.js";
import { DeliveryProxyError, authorityOf, describeProxyFailure } from "./delivery-proxy.js";
import type { AttemptErrorKind, AttemptOutcome } from "./outcome.js";

/** Response bytes kept by default: the "first 4 KiB" of the delivery log. */
export const DEFAULT_MAX_RESPONSE_BYTES = 4096;

/** Input of {@link postDelivery}. */
export interface PostDeliveryInput {
  url: string | URL;
  /** The stored body, sent byte for byte. */
  body: Buffer;
  /** Exactly the application headers to send (signature headers, content-type, user-agent...). */
  headers: Record<string, string>;
  /** Whole-attempt budget: `DELIVERY_TIMEOUT_MS` or `AUTH_HOOK_TIMEOUT_MS`. */
  timeoutMs: number;
  /** Keep-alive agents from {@link createDeliveryAgents}; they enforce the URL policy at connect time. */
  agents: DeliveryAgents;
  maxResponseBytes?: number;
  /** Monotonic clock in milliseconds; injectable for tests. */
  now?: () => number;
}

/**
 * POSTs a delivery and reports what happened. Never throws for network or HTTP failures: they
 * are described in the returned outcome, which {@link classify} turns into a verdict.
 *
 * - Under agents built for `public-https`, a non-https URL is refused without sending anything,
 *   and the agents refuse non-public addresses at connect time (`refused-by-policy`).
 * - Redirects are not followed (following one would bypass the URL policy): a 3xx is returned
 *   with its status and `error.kind = "redirect"`.
 * - The answer is decompressed, then only its first `maxResponseBytes` bytes are kept; the rest
 *   is not downloaded (the connection is destroyed), so a huge or endless body costs nothing.
 * - A body that fits is read to its end so the keep-alive socket can be reused.
 * - The whole attempt has one timeout (an error named `TimeoutError`, code `ETIMEDOUT`); gzip,
 *   deflate and brotli answers are decoded before the first bytes are kept; the stored headers
 *   go out as they are, plus `content-length` and `accept-encoding`.
 */
export async function postDelivery(input: PostDeliveryInput): Promise<AttemptOutcome> {
  const { maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES, now = () => performance.now() } = input;
  const started = now();
  const elapsed = (): number => Math.max(0, Math.round(now() - started));
  const url = checkedUrl(input, elapsed);
  if (!(url instanceof URL)) return url;
  let request: DirectRequest;
  try {
    request = new DirectRequest(url, input);
  } catch (err) {
    return { responseBody: "", responseBodyTruncated: false, responseHeaders: {}, durationMs: elapsed(), error: { kind: "connection", message: (err as Error).message } };
  }
  return readOutcome(request, maxResponseBytes, elapsed, url.hostname);
}

/** The URL to POST to, or the refusal to report without sending anything. */
function checkedUrl(input: PostDeliveryInput, elapsed: () => number): URL | AttemptOutcome {
  let url: URL;
  try {
    url = new URL(String(input.url));
  } catch {
    return refusal("not a valid absolute URL", elapsed());
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return refusal(`${url.protocol} URL refused: deliveries are http(s) only`, elapsed());
  }
  // The URL was checked when stored, but the policy may have been tightened since: HTTPS only
  // is enforced here too, before anything is sent.
  if (input.agents.policy === "public-https" && url.protocol !== "https:") {
    return refusal(`${url.protocol} URL refused by ENDPOINT_URL_POLICY=public-https (https only)`, elapsed());
  }
  return url;
}

/** What {@link readOutcome} listens to: a {@link DirectRequest}. */
interface OutcomeSource {
  on(event: "response", listener: (response: { statusCode: number; headers: IncomingHttpHeaders }) => void): unknown;
  on(event: "data", listener: (chunk: Buffer) => void): unknown;
  on(event: "end", listener: () => void): unknown;
  on(event: "error", listener: (err: unknown) => void): unknown;
  destroy(): unknown;
}

/**
 * How many times one call sends its request again on another connection because a kept-alive one
 * turned out to be closed by the receiver (see {@link isStaleConnectionFailure}).
 */
export const MAX_STALE_CONNECTION_RESENDS = 3;

/**
 * True when a request failed because the kept-alive connection it was written to had been closed
 * by the receiver: the connection was reused, it was reset or hung up before any byte of an answer.
 * Receivers close idle connections after their own keep-alive timeout (Node's servers after 5 s,
 * plus a second), and Node 20's agent does not drop them first: a request sent at that instant
 * meets the close. Such a request was not made to the receiver, so it is not the receiver's
 * failure; it is sent again on another connection, within the same attempt and its one timeout.
 * Should the receiver have read it after all, the copy carries the same `webhook-id` (at least once).
 */
function isStaleConnectionFailure(req: { reusedSocket: boolean }, answered: boolean, err: unknown): boolean {
  if (answered || !req.reusedSocket) return false;
  const code = (err as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "EPIPE";
}

/**
 * One node:http POST seen as a stream of events: `response` (status and headers), `data`
 * (decoded body chunks), then exactly one of `end` or `error`. `destroy()` drops the connection.
 * A POST that meets a kept-alive connection the receiver just closed is sent again on another one
 * ({@link isStaleConnectionFailure}).
 */
class DirectRequest extends EventEmitter implements OutcomeSource {
  /** Undefined only while plain http through the proxy waits for the receiver's vetted address. */
  private req: ClientRequest | undefined;
  private res: IncomingMessage | undefined;
  private decoder: Transform | undefined;
  private readonly timer: NodeJS.Timeout;
  private settled = false;
  private resends = 0;
  /** Plain http through the proxy: the proxy and the receiver's vetted address (absolute-form request). */
  private viaProxy: { route: ProxyRoute; address: string } | undefined;

  constructor(
    private readonly url: URL,
    private readonly input: PostDeliveryInput,
  ) {
    super();
    // https through the proxy is the agent's tunnel; plain http is a request to the proxy itself.
    const route = url.protocol === "http:" ? input.agents.proxy : undefined;
    // Throws (before anything is sent or any timer is set) for a header value node:http refuses.
    if (route === undefined) this.req = this.send();
    this.timer = setTimeout(() => this.fail(Object.assign(new Error(`Timeout awaiting 'request' for ${input.timeoutMs}ms`), { name: "TimeoutError", code: "ETIMEDOUT" })), input.timeoutMs);
    if (route !== undefined) this.sendThroughProxy(route);
  }

  /** Resolves and vets the receiver's address as a direct connection would, then asks the proxy for it. */
  private sendThroughProxy(route: ProxyRoute): void {
    route.vet(this.url.hostname).then(
      (address) => {
        if (this.settled) return;
        this.viaProxy = { route, address };
        try {
          this.req = this.send();
        } catch (err) {
          this.fail(err as Error);
        }
      },
      (err: Error) => this.fail(err),
    );
  }

  /** Writes the POST (on a kept-alive connection when the agent has one free). */
  private send(): ClientRequest {
    const secure = this.url.protocol === "https:";
    const headers = { ...this.input.headers, "content-length": String(this.input.body.length), "accept-encoding": "gzip, deflate, br" };
    const req = this.viaProxy
      ? this.proxyRequest(this.viaProxy, headers)
      : (secure ? httpsRequest : httpRequest)(this.url, { method: "POST", agent: secure ? this.input.agents.https : this.input.agents.http, headers });
    req.on("error", (err) => this.onRequestError(req, err));
    req.on("response", (res) => this.onResponse(res));
    req.end(this.input.body);
    return req;
  }

  /**
   * The absolute-form POST to the proxy: `POST http://<vetted address>:<port>/path` with the
   * endpoint's `Host`. A proxy that follows RFC 9112 replaces that `Host` with the address it was
   * given (tinyproxy and squid do): receivers of plain-http endpoints see their address there.
   */
  private proxyRequest(via: { route: ProxyRoute; address: string }, headers: Record<string, string>): ClientRequest {
    const { proxy } = via.route;
    const path = `http://${authorityOf(via.address, this.url.port || "80")}${this.url.pathname}${this.url.search}`;
    const authorization = proxy.authorization === null ? {} : { "proxy-authorization": proxy.authorization };
    return httpRequest({ host: proxy.host, port: proxy.port, method: "POST", path, agent: this.input.agents.http, headers: { host: this.url.host, ...headers, ...authorization } });
  }

  /**
   * An answer to an absolute-form request that the proxy made itself (it could not connect, it
   * refused the credentials or the target): an error status without the `Via` header that a proxy
   * adds to every answer it forwards (RFC 9110; squid's and tinyproxy's default). The receiver
   * never saw the request: a connection failure, retried, rather than the receiver's verdict.
   */
  private proxyOwnAnswer(res: IncomingMessage): DeliveryProxyError | null {
    if (this.viaProxy === undefined || res.statusCode === undefined || res.statusCode < 400 || res.headers.via !== undefined) return null;
    const { route, address } = this.viaProxy;
    return DeliveryProxyError.refused(route.proxy, this.url.hostname, res.statusCode, `POST http://${authorityOf(address, this.url.port || "80")}`);
  }

  private onRequestError(req: ClientRequest, err: Error): void {
    // A request given up for another one: its connection is already destroyed.
    if (req !== this.req || this.settled) return;
    if (this.resends < MAX_STALE_CONNECTION_RESENDS && isStaleConnectionFailure(req, this.res !== undefined, err)) {
      this.resends += 1;
      this.req = this.send();
      return;
    }
    // Before any answer, a failed absolute-form request failed on the way to the proxy.
    if (this.viaProxy !== undefined && this.res === undefined) {
      return this.fail(DeliveryProxyError.unreachable(this.viaProxy.route.proxy, this.url.hostname, err.message));
    }
    this.fail(err);
  }

  /** Drops the connection and stops decoding; no event follows. */
  destroy(): void {
    this.settle();
    this.req?.destroy();
    this.res?.destroy();
    this.decoder?.destroy();
  }

  private onResponse(res: IncomingMessage): void {
    this.res = res;
    const proxyAnswer = this.proxyOwnAnswer(res);
    if (proxyAnswer !== null) return this.fail(proxyAnswer);
    this.emit("response", res);
    const encoding = String(res.headers["content-encoding"] ?? "").trim().toLowerCase();
    res.on("data", (chunk: Buffer) => {
      if (this.settled) return;
      // Made at the first byte, so an empty answer with a content-encoding is just empty.
      this.decoder ??= this.createDecoder(encoding);
      if (this.decoder === undefined) this.emit("data", chunk);
      else this.decoder.write(chunk);
    });
    res.on("end", () => (this.decoder === undefined ? this.succeed() : this.decoder.end()));
    res.on("error", (err) => this.fail(err));
    res.on("close", () => {
      if (!res.complete) this.fail(Object.assign(new Error("the connection closed before the answer ended"), { code: "ECONNRESET" }));
    });
  }

  private createDecoder(encoding: string): Transform | undefined {
    // Lenient flushing: a body cut short still yields the bytes that arrived.
    const lenient = { flush: zlibConstants.Z_SYNC_FLUSH, finishFlush: zlibConstants.Z_SYNC_FLUSH };
    let decoder: Transform;
    if (encoding === "gzip" || encoding === "x-gzip") decoder = createGunzip(lenient);
    else if (encoding === "deflate") decoder = createInflate(lenient);
    else if (encoding === "br") decoder = createBrotliDecompress();
    else return undefined;
    decoder.on("data", (chunk: Buffer) => {
      if (!this.settled) this.emit("data", chunk);
    });
    decoder.on("end", () => this.succeed());
    decoder.on("error", (err) => this.fail(err));
    return decoder;
  }

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.timer);
    return true;
  }

  private succeed(): void {
    if (this.settle()) this.emit("end");
  }

  private fail(err: Error): void {
    if (!this.settle()) return;
    this.emit("error", err);
    this.destroy();
  }
}

function refusal(message: string, durationMs: number): AttemptOutcome {
  return {
    responseBody: "",
    responseBodyTruncated: false,
    responseHeaders: {},
    durationMs,
    error: { kind: "refused-by-policy", message },
  };
}

function readOutcome(stream: OutcomeSource, maxBytes: number, elapsed: () => number, host: string): Promise<AttemptOutcome> {
  return new Promise((resolve) => {
    let status: number | undefined;
    let responseHeaders: Record<string, string> = {};
    const chunks: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    let settled = false;

    const finish = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      const outcome: AttemptOutcome = {
        responseBody: Buffer.concat(chunks).toString("utf8"),
        responseBodyTruncated: truncated,
        responseHeaders,
        durationMs: elapsed(),
      };
      if (status !== undefined) outcome.status = status;
      if (err !== undefined) {
        const refusal = describePolicyRefusal(err, host.replace(/^\[(.*)\]$/, "$1"));
        const unresolved = refusal ? null : describeUnresolvedHost(err);
        // A proxy that could not carry the attempt is a connection failure too, retried.
        const proxy = refusal || unresolved ? null : describeProxyFailure(err);
        outcome.error = refusal
          ? { kind: "refused-by-policy", message: refusal.message, detail: refusal.detail }
          : unresolved
            ? { kind: "connection", message: unresolved.message, detail: unresolved.detail }
            : proxy
              ? { kind: "connection", message: proxy.message, detail: proxy.detail, ...(proxy.egressFailure ? { egressFailure: true } : {}) }
              : { kind: errorKind(err), message: err instanceof Error ? err.message : String(err) };
      } else if (status !== undefined && status >= 300 && status <= 399) {
        const location = responseHeaders["location"];
        outcome.error = { kind: "redirect", message: `redirect (${status}${location ? ` to ${location}` : ""}) not followed` };
      }
      resolve(outcome);
    };

    stream.on("response", (response: { statusCode: number; headers: IncomingHttpHeaders }) => {
      status = response.statusCode;
      responseHeaders = flattenHeaders(response.headers);
    });
    stream.on("data", (chunk: Buffer) => {
      if (settled) return;
      const room = maxBytes - kept;
      if (chunk.length > room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        kept = maxBytes;
        truncated = true;
        finish();
        // Stop downloading: the socket is dropped rather than drained, which a huge body would make slow.
        stream.destroy();
        return;
      }
      chunks.push(chunk);
      kept += chunk.length;
    });
    stream.on("end", () => finish());
    stream.on("error", (err: unknown) => finish(err));
  });
}

function errorKind(err: unknown): AttemptErrorKind {
  const { name, code } = err as { name?: unknown; code?: unknown };
  if (name === "TimeoutError" || code === "ETIMEDOUT") return "timeout";
  return "connection";
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    flat[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return flat;
}
