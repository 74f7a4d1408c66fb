import { randomBytes } from "node:crypto";

/**
 * A fresh Redis key prefix for one test file or harness: `vwtest-<run>-<label><random>`, where
 * `<run>` is the id of this jest run (VW_TEST_RUN, set by the root `test/global-setup.js`). Every
 * key a run writes shares `vwtest-<run>-`, so the global teardown deletes whatever a test left
 * behind (and says so) without touching the keys of another run going on at the same time.
 * Outside jest (a benchmark), `<run>` is `norun`.
 */
export function testKeyPrefix(label = ""): string {
  const run = process.env["VW_TEST_RUN"] ?? "norun";
  return `vwtest-${run}-${label}${randomBytes(4).toString("hex")}`;
}

