/**
 * What one delivery attempt produced, and what the service does about it (spec: Errors >
 * Answers of a receiver and the service's reaction).
 */

/** Why an attempt has no usable answer, or why its answer is not acted on. */
export type AttemptErrorKind = "timeout" | "connection" | "refused-by-policy" | "redirect";

/** The result of one POST, as recorded in the delivery log. */
export interface AttemptOutcome {
  /** HTTP status, when the receiver answered at all. */
  status?: number;
  /** The first bytes of the response body (4 KiB by default), decoded as UTF-8 (invalid bytes replaced). */
  responseBody: string;
  /** True when the body was longer than what was kept. */
  responseBodyTruncated: boolean;
  /** Response headers, lower-case names; repeated headers joined with ", ". */
  responseHeaders: Record<string, string>;
  /** From sending the request to the end of the kept part of the answer (or the failure). */
  durationMs: number;
  /**
   * Set when the attempt failed without an answer (timeout, connection error, policy refusal),
   * for a 3xx answer (`redirect`: never followed), and when the body read failed after the status
   * arrived (the status still decides the verdict then).
   */
  error?: {
    kind: AttemptErrorKind;
    /** What went wrong, as customers may read it (a policy refusal names no address; a host without an address is "could not connect"). */
    message: string;
    /**
     * For the server's log only, never stored or answered: the address a policy refusal was about,
     * what the resolver said of a host that had no address, or what the delivery proxy said.
     */
    detail?: string;
    /**
     * True when the platform's own egress (the delivery proxy) failed, unreachable or refusing,
     * so the receiver was never tried: a `connection` failure that is not the receiver's.
     */
    egressFailure?: true;
  };
}

/**
 * The service's reaction to an attempt:
 * - `delivered`: done;
 * - `retry`: try again on the retry schedule;
 * - `gone`: 410, disable the endpoint at once, no retry;
 * - `rejected`: failed for good, no retry (other 4xx, 3xx, policy refusal).
 */
export type AttemptVerdict = "delivered" | "retry" | "gone" | "rejected";

/**
 * Classifies an attempt per the spec's table: 2xx delivered; 408, 429, 5xx, timeout and
 * connection errors retried; 410 gone; any other 4xx rejected.
 *
 * Choices the spec leaves open, and why:
 * - A policy refusal is `rejected`: the address will not become public by retrying, and
 *   retrying would keep probing a private address on the attacker's schedule.
 * - A 3xx is `rejected`: following it could reach an address the URL check never saw (a public
 *   endpoint answering 302 to a private one), and the receiver's answer is a permanent
 *   configuration fact, not a transient failure. The customer should point the endpoint at the
 *   final URL.
 * - A status outside 100..599 (a broken server) is treated like a 5xx and retried.
 * - A status, once received, decides the verdict even if reading the body then failed.
 */
export function classify(outcome: Pick<AttemptOutcome, "status" | "error">): AttemptVerdict {
  const { status, error } = outcome;
  if (error?.kind === "refused-by-policy") return "rejected";
  if (status === undefined) {
    // No answer: timeouts and connection errors are transient by definition.
    return "retry";
  }
  if (status >= 200 && status <= 299) return "delivered";
  if (status === 410) return "gone";
  if (status === 408 || status === 429) return "retry";
  if (status >= 300 && status <= 399) return "rejected";
  if (status >= 400 && status <= 499) return "rejected";
  // 5xx, and any non-standard status from a broken server: transient as far as we can tell.
  return "retry";
}

