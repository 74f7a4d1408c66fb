import { describe, expect, it } from "@jest/globals";
import { decideFate, disabledForFailures, humanDuration, retryAfterMs, type AttemptFacts, type DeliveryKind, type Fate, type FatePolicy } from "./fate.js";

const NOW = Date.parse("2026-11-29T12:00:00.000Z");
const policy: FatePolicy = { retryDelays: [5_000, 300_000], disableAfterFailures: 50, retryAfterMaxMs: 21_600_000, now: NOW, random: () => 0 };
const answer = (status: number, headers: Record<string, string> = {}): AttemptFacts => ({
  verdict: status >= 200 && status < 300 ? "delivered" : status === 410 ? "gone" : [408, 429].includes(status) || status >= 500 ? "retry" : "rejected",
  responseStatus: status,
  responseHeaders: headers,
  errorKind: status >= 300 && status < 400 ? "redirect" : null,
});
const noAnswer = (errorKind: "timeout" | "connection" | "refused-by-policy"): AttemptFacts => ({
  verdict: errorKind === "refused-by-policy" ? "rejected" : "retry",
  responseStatus: null,
  responseHeaders: null,
  errorKind,
});
const at = (ms: number) => new Date(NOW + ms);

describe("decideFate", () => {
  // kind, attempts of the run so far, the attempt, and what follows.
  const table: [string, DeliveryKind, number, AttemptFacts, Partial<Fate>][] = [
    ["a 2xx delivers and resets the failures", "ordinary", 0, answer(204), { becomes: "delivered", dueAt: null, failures: "reset", disable: null, window: "answered" }],
    ["a 500 is retried on the schedule", "ordinary", 0, answer(500), { becomes: "pending", dueAt: at(5_000), failures: "increment", disableAtFailures: 50, window: "answered" }],
    ["the second retry takes the second delay", "ordinary", 1, answer(500), { becomes: "pending", dueAt: at(300_000) }],
    ["no retry left: failed", "ordinary", 2, answer(500), { becomes: "failed", dueAt: null, failures: "increment" }],
    ["a timeout is retried and says the receiver is slow", "ordinary", 0, noAnswer("timeout"), { becomes: "pending", window: "unresponsive" }],
    ["a connection error is retried", "ordinary", 0, noAnswer("connection"), { becomes: "pending", window: "unresponsive" }],
    ["408 is retried", "ordinary", 0, answer(408), { becomes: "pending" }],
    ["410 fails and disables at once", "ordinary", 0, answer(410), { becomes: "failed", disable: "gone", failures: "increment" }],
    ["another 4xx fails for good", "ordinary", 0, answer(400), { becomes: "failed", disable: null, failures: "increment" }],
    ["a redirect fails for good", "ordinary", 0, answer(302), { becomes: "failed" }],
    ["a policy refusal fails for good", "ordinary", 0, noAnswer("refused-by-policy"), { becomes: "failed", window: "none" }],
    ["a replay is retried like any queued delivery", "replay", 0, answer(503), { becomes: "pending", failures: "increment", window: "throttled" }],
    ["a recover's 410 disables", "recover", 0, answer(410), { disable: "gone" }],
    ["the platform's egress proxy failing is retried, counts nothing and leaves the window alone", "ordinary", 0, { ...noAnswer("connection"), egressFailure: true }, { becomes: "pending", failures: "none", disableAtFailures: null, window: "none" }],
    ["a Test's 500 is final and counts nothing", "test", 0, answer(500), { becomes: "failed", failures: "none", disable: null, disableAtFailures: null }],
    ["a Test's 410 disables nothing", "test", 0, answer(410), { becomes: "failed", disable: null, failures: "none" }],
    ["a Test's 2xx does not reset the failures", "test", 0, answer(200), { becomes: "delivered", failures: "none" }],
    ["a hook's timeout is final and counts nothing", "hook", 0, noAnswer("timeout"), { becomes: "failed", failures: "none", disable: null }],
    ["a hook's 410 disables nothing", "hook", 0, answer(410), { becomes: "failed", disable: null }],
    ["429 with Retry-After seconds waits that long", "ordinary", 0, answer(429, { "retry-after": "600" }), { becomes: "pending", dueAt: at(600_000), waitReason: "the receiver asked to wait 10 minutes", window: "throttled" }],
    ["503 with an HTTP date waits until then", "ordinary", 0, answer(503, { "retry-after": "Sun, 29 Nov 2026 12:02:00 GMT" }), { dueAt: at(120_000), waitReason: "the receiver asked to wait 2 minutes" }],
    ["a shorter Retry-After than the schedule changes nothing", "ordinary", 1, answer(429, { "retry-after": "10" }), { dueAt: at(300_000), waitReason: null }],
    ["Retry-After is capped", "ordinary", 0, answer(429, { "retry-after": "864000" }), { dueAt: at(21_600_000), waitReason: "the receiver asked to wait 10 days; waiting the longest allowed, 6 hours" }],
    ["an unreadable Retry-After is ignored", "ordinary", 0, answer(429, { "retry-after": "soon" }), { dueAt: at(5_000), waitReason: null }],
    ["Retry-After on a 500 is not the receiver asking for less", "ordinary", 0, answer(500, { "retry-after": "600" }), { dueAt: at(5_000), waitReason: null }],
    ["Retry-After spends no retry: none left is failed", "ordinary", 2, answer(429, { "retry-after": "60" }), { becomes: "failed", dueAt: null, waitReason: null }],
  ];
  it.each(table)("%s", (_name, kind, runAttempts, facts, expected) => {
    expect(decideFate({ kind, runAttempts }, facts, policy)).toMatchObject(expected);
  });

  it("adds up to 10% of jitter to the schedule, never less", () => {
    expect(decideFate({ kind: "ordinary", runAttempts: 0 }, answer(500), { ...policy, random: () => 0.999 }).dueAt).toEqual(at(5_499));
  });

  it("disables for failures once the endpoint's count reaches the limit, only for queued deliveries", () => {
    const fail = decideFate({ kind: "ordinary", runAttempts: 0 }, answer(500), policy);
    expect(disabledForFailures(fail, 49)).toBe(false);
    expect(disabledForFailures(fail, 50)).toBe(true);
    expect(disabledForFailures(fail, undefined)).toBe(false);
    expect(disabledForFailures(decideFate({ kind: "ordinary", runAttempts: 0 }, answer(200), policy), 50)).toBe(false);
    expect(disabledForFailures(decideFate({ kind: "test", runAttempts: 0 }, answer(500), policy), 50)).toBe(false);
  });
});

describe("retryAfterMs", () => {
  it.each([
    ["120", 120_000],
    [" 0 ", 0],
    ["Sun, 29 Nov 2026 12:00:30 GMT", 30_000],
    ["Sunday, 29-Nov-26 12:00:30 GMT", 30_000],
    ["Sun Nov 29 12:00:30 2026", 30_000],
    ["Sat, 28 Nov 2026 12:00:00 GMT", 0],
  ])("reads %j", (value, ms) => expect(retryAfterMs(value, NOW)).toBe(ms));
  it.each(["", "-5", "1.5", "soon", "10s", "99999999999", "Sun, 99 Foo 2026 12:00:30 GMT"])("ignores %j", (value) => expect(retryAfterMs(value, NOW)).toBeNull());
  it("ignores an absent header", () => expect(retryAfterMs(undefined, NOW)).toBeNull());
});

describe("humanDuration", () => {
  it.each([
    [1_000, "1 second"],
    [45_000, "45 seconds"],
    [600_000, "10 minutes"],
    [7_200_000, "2 hours"],
    [259_200_000, "3 days"],
  ])("%d ms is %s", (ms, text) => expect(humanDuration(ms)).toBe(text));
});
