/**
 * One signed attempt, end to end: sign for this instant, POST the stored bytes, classify the
 * answer, and describe it as a delivery-log record ({@link AttemptRecord}). Shared by the worker
 * (queued deliveries), the admin API (Test) and event-ingest (the synchronous auth hook), so all
 * three sign, send and log the same way.
 */
import { randomUUID } from "node:crypto";
import type { DeliveryAgents } from "./delivery-agents.js";
import { postDelivery } from "./delivery-http.js";
import { redactedHeaders, sendableHeaders } from "./endpoint-headers.js";
import { classify, type AttemptErrorKind, type AttemptVerdict } from "./outcome.js";
import { signatureHeaders } from "./signing.js";

/** What one attempt sends. */
export interface SendAttemptInput {
  url: string;
  deliveryId: string;
  /** Its number among the delivery's attempts (1 for the first). */
  attemptNumber: number;
  trigger: AttemptTrigger;
  body: Buffer;
  /** The endpoint's current secret (`whsec_...`), or null for a legacy endpoint that never had one. */
  secret: string | null;
  agents: DeliveryAgents;
  timeoutMs: number;
  /**
   * The endpoint's custom headers, opened (`SecretCache.headersOf`, `openEndpointHeaders`): sent
   * after the platform's own, never in place of one (a reserved name is left out). The record
   * shows their names with the value `[redacted]`.
   */
  headers?: Readonly<Record<string, string>>;
  /** Sent as `user-agent`; identifies the platform in receivers' logs. */
  userAgent?: string;
  /** Wall clock of the attempt (the `webhook-timestamp`); injectable. */
  now?: () => Date;
}

/** `user-agent` of deliveries unless the caller names another. */
export const DEFAULT_USER_AGENT = "vw-webhooks/1.0";

/** Why an attempt was made: a queued run's first try, its retries, a replay, the Test action, the auth hook. */
export type AttemptTrigger = "initial" | "retry" | "replay" | "test" | "hook";

/** What one attempt was, as plain data: the DeliveryLog of @vw/db logs it (this package knows no table). */
export interface AttemptRecord {
  id: string;
  deliveryId: string;
  attemptNumber: number;
  trigger: AttemptTrigger;
  startedAt: Date;
  /** What was sent, custom headers' values replaced by `[redacted]` (a proxy's credentials are never here). */
  requestHeaders: Record<string, string>;
  responseStatus: number | null;
  responseHeaders: Record<string, string> | null;
  responseBody: string | null;
  responseBodyTruncated: boolean;
  durationMs: number;
  errorKind: AttemptErrorKind | null;
  error: string | null;
  verdict: AttemptVerdict;
  /**
   * For the server's log only, never stored or answered: the address a policy refusal was about,
   * what the resolver said of a host that had no address, or what the delivery proxy said.
   */
  errorDetail?: string;
  /**
   * Set when the platform's own egress failed (DELIVERY_PROXY_URL's proxy unreachable, or refusing
   * the request with a 4xx), so the receiver was never tried. The attempt is a `connection`
   * failure, retried, but it says nothing of the receiver: it should not count toward disabling
   * the endpoint (a proxy outage must not disable every busy endpoint). Not stored.
   */
  egressFailure?: true;
}

/**
 * Signs and sends one attempt, and describes it as the delivery log stores it: the one shape an
 * attempt has from here to the log (the worker's group commit, the Test action, the auth hook) and
 * back out of it (the history). Never throws for network or HTTP failures (see postDelivery).
 */
export async function sendAttempt(input: SendAttemptInput): Promise<AttemptRecord> {
  const startedAt = (input.now ?? (() => new Date()))();
  const platformHeaders = {
    ...signatureHeaders({ deliveryId: input.deliveryId, body: input.body, secret: input.secret, now: startedAt }),
    "user-agent": input.userAgent ?? DEFAULT_USER_AGENT,
  };
  const custom = sendableHeaders(input.headers);
  const requestHeaders = { ...platformHeaders, ...redactedHeaders(custom) };
  const outcome = await postDelivery({
    url: input.url,
    body: input.body,
    headers: { ...platformHeaders, ...custom },
    timeoutMs: input.timeoutMs,
    agents: input.agents,
  });
  return {
    id: randomUUID(),
    deliveryId: input.deliveryId,
    attemptNumber: input.attemptNumber,
    trigger: input.trigger,
    startedAt,
    requestHeaders,
    responseStatus: outcome.status ?? null,
    responseHeaders: outcome.status === undefined ? null : outcome.responseHeaders,
    responseBody: outcome.status === undefined ? null : outcome.responseBody,
    responseBodyTruncated: outcome.responseBodyTruncated,
    durationMs: outcome.durationMs,
    errorKind: outcome.error?.kind ?? null,
    error: outcome.error?.message ?? null,
    verdict: classify(outcome),
    ...(outcome.error?.detail === undefined ? {} : { errorDetail: outcome.error.detail }),
    ...(outcome.error?.egressFailure ? { egressFailure: true as const } : {}),
  };
}
