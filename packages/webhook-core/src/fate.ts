/**
 * A delivery's fate after an attempt: the one place that decides what happens next. Every sender
 * applies what this returns and decides nothing itself: the worker's drains (ordinary deliveries,
 * Replays, recovers), the Test action and the `member.connecting` hook. Pure: no clock, no random
 * source and no store of its own, so it is tested table by table.
 *
 * The rules, from the spec's reaction table and its delivery kinds:
 * - 2xx: delivered. Every other verdict of a Test or a hook call is final (`failed`): they are
 *   never retried, never count towards disabling, and never disable (a Test works on a disabled
 *   endpoint and leaves its state alone; hook failures do not count).
 * - A queued delivery answered 408, 429, 5xx, or not at all: retried on the schedule while
 *   retries are left (the schedule's position is the run's attempts), else `failed`.
 * - 410: `failed`, and the endpoint is disabled at once.
 * - Any other 4xx, a 3xx, a refusal by the URL policy: `failed`, no retry.
 * - A queued delivery's every failure counts one towards the endpoint's consecutive failures,
 *   a success resets them; at `disableAfterFailures` the endpoint is disabled. An attempt the
 *   platform's own egress proxy could not carry (DELIVERY_PROXY_URL down or refusing) is retried
 *   like a connection error, but is not the receiver's failure: it counts nothing and says nothing
 *   of the receiver's window.
 * - 429 and 503 with `Retry-After` (seconds or an HTTP date): the next attempt is due at the later
 *   of the schedule's time and the time asked for, the wait capped at `retryAfterMaxMs`. It is the
 *   same attempt's retry: no attempt is spent on it. An unreadable value is ignored.
 * - What the endpoint's window of attempts in flight should do: 429 and 503 ask for less
 *   (`throttled`), a timeout or a failed connection says the receiver is not keeping up
 *   (`unresponsive`), any other answer is a sign of health (`answered`).
 */
import type { AttemptErrorKind, AttemptVerdict } from "./outcome.js";
import { nextDelay } from "./retry-schedule.js";

/** Which kind of delivery was attempted. Replays and recovers are queued deliveries in a new run. */
export type DeliveryKind = "ordinary" | "replay" | "recover" | "test" | "hook";

/** What one attempt told about the receiver and its answer. */
export interface AttemptFacts {
  verdict: AttemptVerdict;
  responseStatus: number | null;
  /** Response headers, lower-case names (as the attempt record keeps them); null without an answer. */
  responseHeaders: Readonly<Record<string, string>> | null;
  errorKind: AttemptErrorKind | null;
  /** True when the platform's egress proxy could not carry the attempt (never the receiver's fault). */
  egressFailure?: boolean;
}

/** The delivery as it stood before the attempt. */
export interface DeliveryPosition {
  kind: DeliveryKind;
  /** Attempts of its current run before this one (the retry schedule's position). */
  runAttempts: number;
}

/** The rules' settings and the moment of the decision. */
export interface FatePolicy {
  /** RETRY_DELAYS in ms: attempt n of a run is followed by `retryDelays[n - 1]`. */
  retryDelays: readonly number[];
  /** DISABLE_AFTER_FAILURES. */
  disableAfterFailures: number;
  /** RETRY_AFTER_MAX_S in ms: the longest a receiver's Retry-After may push a retry past the schedule. */
  retryAfterMaxMs: number;
  /** When the attempt ended (ms since the epoch). */
  now: number;
  /** Jitter source in [0, 1). */
  random: () => number;
}

/** How the endpoint's window of attempts in flight should react. */
export type WindowSignal = "answered" | "throttled" | "unresponsive" | "none";

/** What happens after the attempt. */
export interface Fate {
  becomes: "delivered" | "pending" | "failed";
  /** When the next attempt is due (only while `pending`). */
  dueAt: Date | null;
  /** Why that is later than the schedule (the receiver asked), for the history; null when it is not. */
  waitReason: string | null;
  /** What the attempt does to the endpoint's consecutive failures. */
  failures: "reset" | "increment" | "none";
  /** The endpoint is disabled at once for this reason (a 410 of a queued delivery). */
  disable: "gone" | null;
  /** The endpoint is disabled (`failures`) once its consecutive failures reach this; null: never for this attempt. */
  disableAtFailures: number | null;
  window: WindowSignal;
}

/** The fate of a delivery after one attempt; see the file comment for the rules. */
export function decideFate(position: DeliveryPosition, facts: AttemptFacts, policy: FatePolicy): Fate {
  const queued = position.kind === "ordinary" || position.kind === "replay" || position.kind === "recover";
  const window = facts.egressFailure === true ? "none" : windowSignal(facts);
  const failures = !queued || facts.egressFailure === true ? "none" : facts.verdict === "delivered" ? "reset" : "increment";
  const base = { waitReason: null, failures, window, disableAtFailures: failures === "increment" ? policy.disableAfterFailures : null } as const;
  if (facts.verdict === "delivered") return { ...base, becomes: "delivered", dueAt: null, disable: null };
  if (!queued) return { ...base, becomes: "failed", dueAt: null, disable: null };
  if (facts.verdict === "gone") return { ...base, becomes: "failed", dueAt: null, disable: "gone" };
  if (facts.verdict === "rejected") return { ...base, becomes: "failed", dueAt: null, disable: null };
  const delay = nextDelay(position.runAttempts + 1, policy.retryDelays, policy.random);
  if (delay === null) return { ...base, becomes: "failed", dueAt: null, disable: null };
  const scheduled = policy.now + delay;
  const asked = facts.responseStatus === 429 || facts.responseStatus === 503 ? retryAfterMs(facts.responseHeaders?.["retry-after"], policy.now) : null;
  if (asked === null || policy.now + Math.min(asked, policy.retryAfterMaxMs) <= scheduled) {
    return { ...base, becomes: "pending", dueAt: new Date(scheduled), disable: null };
  }
  const waitMs = Math.min(asked, policy.retryAfterMaxMs);
  return { ...base, becomes: "pending", dueAt: new Date(policy.now + waitMs), waitReason: waitReasonText(asked, waitMs), disable: null };
}

/** Whether the endpoint is disabled for failures once its count is `consecutiveFailures` after `fate`. */
export function disabledForFailures(fate: Fate, consecutiveFailures: number | undefined): boolean {
  return fate.disableAtFailures !== null && consecutiveFailures !== undefined && consecutiveFailures >= fate.disableAtFailures;
}

/** How an attempt's end moves the endpoint's window (see the file comment). */
export function windowSignal(facts: Pick<AttemptFacts, "responseStatus" | "errorKind">): WindowSignal {
  if (facts.responseStatus === 429 || facts.responseStatus === 503) return "throttled";
  if (facts.responseStatus !== null) return "answered";
  return facts.errorKind === "timeout" || facts.errorKind === "connection" ? "unresponsive" : "none";
}

/** The largest Retry-After read, in seconds (about 31 years): anything above is unreadable. */
const RETRY_AFTER_MAX_SECONDS = 1e9;

/**
 * A `Retry-After` value (RFC 9110: delay-seconds, or an HTTP-date) as a wait in ms from `now`;
 * null when absent or unreadable. A date in the past is no wait (0).
 */
export function retryAfterMs(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return seconds <= RETRY_AFTER_MAX_SECONDS ? seconds * 1000 : null;
  }
  // IMF-fixdate, and the obsolete RFC 850 and asctime forms, all of which Date.parse reads; a
  // bare number with a sign, a fraction or other text is not a valid value.
  if (!/^[A-Za-z]{3},? /.test(text) && !/^[A-Za-z]+day, /.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** "the receiver asked to wait 10 minutes" (and, past the cap, how long the platform waits instead). */
export function waitReasonText(askedMs: number, waitMs: number): string {
  const asked = `the receiver asked to wait ${humanDuration(askedMs)}`;
  return waitMs < askedMs ? `${asked}; waiting the longest allowed, ${humanDuration(waitMs)}` : asked;
}

/** A duration in words, to the largest whole unit that reads well: "45 seconds", "10 minutes", "2 hours", "3 days". */
export function humanDuration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  if (seconds < 120) return unit(seconds, "second");
  const minutes = Math.round(seconds / 60);
  if (minutes < 120) return unit(minutes, "minute");
  const hours = Math.round(minutes / 60);
  if (hours < 48) return unit(hours, "hour");
  return unit(Math.round(hours / 24), "day");
}
