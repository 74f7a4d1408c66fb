import { describe, expect, it } from "@jest/globals";
import { eventually, EventuallyTimeoutError, GiveUp } from "./eventually.js";

describe("eventually", () => {
  it("resolves with the first truthy value of the check", async () => {
    let calls = 0;
    await expect(eventually("the third call", () => (++calls >= 3 ? calls : 0), { intervalMs: 1 })).resolves.toBe(3);
  });

  it("counts a throwing check as not yet", async () => {
    let calls = 0;
    const value = await eventually(
      "a check that stops throwing",
      () => {
        calls += 1;
        if (calls < 2) throw new Error("not yet");
        return "ok";
      },
      { intervalMs: 1 },
    );
    expect(value).toBe("ok");
  });

  it("stops at once when the check gives up", async () => {
    let calls = 0;
    const failure = eventually(
      "a server that has exited to answer",
      () => {
        calls += 1;
        throw new GiveUp("the server exited with 1");
      },
      { timeoutMs: 10_000, intervalMs: 1 },
    );
    await expect(failure).rejects.toThrow(GiveUp);
    expect(calls).toBe(1);
  });

  it("fails naming what never happened and what the last check said", async () => {
    const failure = eventually("the receiver got 3 requests", () => 0, { timeoutMs: 30, intervalMs: 5 });
    await expect(failure).rejects.toThrow(EventuallyTimeoutError);
    await expect(failure).rejects.toThrow(/never happened within 30 ms: the receiver got 3 requests; last check returned 0/);
    const thrown = eventually("a healthy check", () => Promise.reject(new Error("ECONNREFUSED")), { timeoutMs: 20, intervalMs: 5 });
    await expect(thrown).rejects.toThrow(/last check threw: ECONNREFUSED/);
  });
});
