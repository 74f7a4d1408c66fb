/**
 * The compiled service, started as production starts it (`node dist/main.js`), writes nothing but
 * JSON lines: Node's own warnings (on an old Node, the AWS SDK's multi-line
 * NodeVersionSupportWarning at the S3 client's creation) go through the JSON logger too.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "@jest/globals";
import { freePort, testKeyPrefix } from "@vw/testing";
import { Redis } from "ioredis";

const serviceDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const prefix = `${testKeyPrefix("ms-logs-")}:`;

afterAll(async () => {
  const redis = new Redis(process.env.REDIS_URL!);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

it("prints only JSON lines from start to shutdown (on Node 20, the AWS SDK's warning included)", async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ["dist/main.js"], {
    cwd: serviceDir,
    // NODE_OPTIONS cleared: jest's flags are not the service's.
    env: { ...process.env, NODE_OPTIONS: "", LOG_LEVEL: "info", PORT: String(port), REDIS_KEY_PREFIX: prefix },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // Ready once the start-up line is logged; then one request, then SIGTERM.
  while (!output.includes("map-storage listening") && child.exitCode === null) {
    await new Promise((r) => child.stdout!.once("data", r));
  }
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  process.kill(child.pid!, "SIGTERM");
  expect(await exited).toBe(0);

  const lines = output.split("\n").filter((l) => l.trim() !== "");
  expect(lines.length).toBeGreaterThan(1);
  const notJson = lines.filter((l) => {
    try {
      return typeof JSON.parse(l) !== "object";
    } catch {
      return true;
    }
  });
  expect(notJson).toEqual([]);
});
