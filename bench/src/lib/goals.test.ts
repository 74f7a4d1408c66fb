import { describe, expect, it } from "@jest/globals";
import { GoalTally } from "./goals.js";

describe("GoalTally", () => {
  it("says how many goals were met of how many were judged", () => {
    const goals = new GoalTally();
    expect(goals.judge(true)).toBe(true);
    expect(goals.judge(false)).toBe(false);
    goals.judge(true);
    expect(goals.counts()).toEqual({ met: 2, judged: 3 });
    expect(goals.summary()).toBe("goals met: 2 of 3");
  });

  it("reads 0 of 0 before any goal is judged", () => {
    expect(new GoalTally().summary()).toBe("goals met: 0 of 0");
  });
});
