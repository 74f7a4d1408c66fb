/**
 * One delivery attempt over HTTP with got 14: POST the stored bytes, keep the first bytes of the
 * answer, never follow a redirect, never retry inside the call (retries are the queue's job, on
 * the spec's schedule).
 */
import { performance } from "node:perf_hooks";
import got, { type Request } from "got";
import type { IncomingHttpHeaders } from "node:http";
import { isPolicyRefusal, type DeliveryAgents } from "./delivery-agents.js";
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
 */
export async function postDelivery(input: PostDeliveryInput): Promise<AttemptOutcome> {
  const { body, headers, timeoutMs, agents, maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES, now = () => performance.now() } = input;
  const started = now();
  const elapsed = (): number => Math.max(0, Math.round(now() - started));
  let url: URL;
  try {
    url = new URL(String(input.url));
  } catch {
    return refusal("not a valid absolute URL", elapsed());
  }
  // The URL was checked when stored, but the policy may have been tightened since: HTTPS only
  // is enforced here too, before anything is sent.
  if (agents.policy === "public-https" && url.protocol !== "https:") {
    return refusal(`${url.protocol} URL refused by ENDPOINT_URL_POLICY=public-https (https only)`, elapsed());
  }
  const stream = got.stream.post(url, {
    body,
    // got adds its own user-agent unless told not to: the log must show what was really sent.
    headers: { "user-agent": undefined, ...headers },
    agent: { http: agents.http, https: agents.https },
    followRedirect: false,
    retry: { limit: 0 },
    throwHttpErrors: false,
    decompress: true,
    timeout: { request: timeoutMs },
  });
  return readOutcome(stream, maxResponseBytes, elapsed);
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

function readOutcome(stream: Request, maxBytes: number, elapsed: () => number): Promise<AttemptOutcome> {
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
        outcome.error = { kind: errorKind(err), message: err instanceof Error ? err.message : String(err) };
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
  if (isPolicyRefusal(err)) return "refused-by-policy";
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
