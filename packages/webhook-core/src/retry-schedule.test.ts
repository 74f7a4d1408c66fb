import { describe, expect, it } from "@jest/globals";
import { DEFAULT_RETRY_DELAYS, RetryScheduleError, nextDelay, parseRetryDelays } from "./retry-schedule.js";

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

describe("parseRetryDelays", () => {
  it("parses the spec's default schedule", () => {
    expect(parseRetryDelays("5s,5m,30m,2h,5h,10h,14h,20h,24h")).toEqual([5 * S, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H, 14 * H, 20 * H, 24 * H]);
    expect(DEFAULT_RETRY_DELAYS).toEqual(parseRetryDelays("5s,5m,30m,2h,5h,10h,14h,20h,24h"));
    expect(DEFAULT_RETRY_DELAYS).toHaveLength(9);
  });

  it("knows ms, s, m, h and d, fractions and surrounding spaces", () => {
    expect(parseRetryDelays(" 250ms , 1.5s,2m , 1h,1d ")).toEqual([250, 1500, 2 * M, H, 24 * H]);
    expect(parseRetryDelays("0ms")).toEqual([0]);
  });

  it.each([
    ["5s,5x,30m", /item 2 "5x"/],
    ["5s,,30m", /item 2 ""/],
    ["5", /item 1 "5"/],
    ["-5s", /item 1 "-5s"/],
    ["5 s", /item 1 "5 s"/],
    ["1e3ms", /item 1 "1e3ms"/],
  ])("refuses %j naming the bad item", (text, message) => {
    expect(() => parseRetryDelays(text)).toThrow(RetryScheduleError);
    expect(() => parseRetryDelays(text)).toThrow(message);
    expect(() => parseRetryDelays(text)).toThrow(/^RETRY_DELAYS /);
  });

  it("refuses an empty list and uses the given variable name", () => {
    expect(() => parseRetryDelays("  ")).toThrow(/RETRY_DELAYS is empty/);
    expect(() => parseRetryDelays("x", "MY_DELAYS")).toThrow(/^MY_DELAYS item 1 "x"/);
  });
});

describe("nextDelay", () => {
  const delays = [5 * S, 5 * M, 30 * M];

  it("follows attempt n with delays[n - 1] and has nothing after the last", () => {
    const noJitter = (): number => 0;
    expect(nextDelay(1, delays, noJitter)).toBe(5 * S);
    expect(nextDelay(2, delays, noJitter)).toBe(5 * M);
    expect(nextDelay(3, delays, noJitter)).toBe(30 * M);
    expect(nextDelay(4, delays, noJitter)).toBeNull();
  });

  it("allows 9 retries, 10 attempts in all, with the default schedule", () => {
    const retries = [];
    for (let attempt = 1; ; attempt += 1) {
      const delay = nextDelay(attempt, DEFAULT_RETRY_DELAYS, () => 0);
      if (delay === null) break;
      retries.push(delay);
    }
    expect(retries).toEqual([...DEFAULT_RETRY_DELAYS]);
    expect(retries).toHaveLength(9);
  });

  it("adds up to +10% jitter, never less than the delay", () => {
    expect(nextDelay(1, [1000], () => 0)).toBe(1000);
    expect(nextDelay(1, [1000], () => 0.5)).toBe(1050);
    expect(nextDelay(1, [1000], () => 0.999999)).toBe(1099);
    expect(nextDelay(1, [24 * H], () => 0.999999)).toBeLessThanOrEqual(24 * H * 1.1);
  });

  it("stays within [delay, delay × 1.1] with the real random source", () => {
    for (let i = 0; i < 1000; i += 1) {
      const delay = nextDelay(2, delays) ?? -1;
      expect(delay).toBeGreaterThanOrEqual(5 * M);
      expect(delay).toBeLessThanOrEqual(5 * M * 1.1);
    }
  });

  it("clamps a misbehaving random source", () => {
    expect(nextDelay(1, [1000], () => -3)).toBe(1000);
    expect(nextDelay(1, [1000], () => 7)).toBe(1100);
  });

  it.each([0, -1, 1.5, Number.NaN])("refuses attempt number %p", (attempt) => {
    expect(() => nextDelay(attempt, delays)).toThrow(RangeError);
  });
});
