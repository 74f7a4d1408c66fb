import { afterEach, describe, expect, it } from "@jest/globals";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually } from "./eventually.js";
import { isAlive } from "./owned-processes.js";
import { startRedis, type PrivateRedis } from "./redis-server.js";
import { redisCommand } from "./resp-command.js";
import { ownRedisChildren } from "./store-test-kit.js";

let redis: PrivateRedis | undefined;
afterEach(async () => {
  await redis?.stop();
  redis = undefined;
});

describe("startRedis", () => {
  it("keeps its data through a SIGKILL and a restart with AOF, on the same port", async () => {
    redis = await startRedis({ appendonly: true });
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(redis.port).not.toBe(6379);
    await redisCommand(redis.port, ["SET", "k", "kept"]);
    const firstPid = redis.pid;
    await redis.kill("SIGKILL");
    expect(isAlive(firstPid)).toBe(false);
    await expect(redisCommand(redis.port, ["PING"])).rejects.toThrow(/ECONNREFUSED/);
    await redis.restart();
    expect(redis.pid).not.toBe(firstPid);
    expect(await redisCommand(redis.port, ["GET", "k"])).toBe("kept");
  });

  it("comes back without its data after restart({ empty: true }), and loses it on a SIGKILL without AOF", async () => {
    redis = await startRedis({ appendonly: true });
    await redisCommand(redis.port, ["SET", "k", "v"]);
    await redis.kill();
    await redis.restart({ empty: true });
    expect(await redisCommand(redis.port, ["GET", "k"])).toBeNull();
    await redis.stop();

    redis = await startRedis();
    await redisCommand(redis.port, ["SET", "k", "v"]);
    await redis.restart(); // SIGTERM, then start: no persistence configured, nothing saved
    expect(await redisCommand(redis.port, ["GET", "k"])).toBeNull();
  });

  it("stop() kills the server by pid and removes its directory", async () => {
    redis = await startRedis({ appendonly: true });
    const { pid, dir } = redis;
    expect(existsSync(dir)).toBe(true);
    await redis.stop();
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await redis.stop(); // twice is harmless
  });

  it("a start that cannot bind its port rejects and leaves no process behind", async () => {
    const blocker = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      await expect(startRedis({ port, readyTimeoutMs: 5000 })).rejects.toThrow(/exited/);
      expect(ownRedisChildren()).toEqual([]);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});

describe("processes left running when the test process ends", () => {
  // Inside the workspace, where tsx resolves from.
  const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");

  it.each([
    ["an uncaught error", "throw new Error('test failed before its afterAll');"],
    ["a SIGTERM", "process.kill(process.pid, 'SIGTERM'); await new Promise((r) => setTimeout(r, 10_000));"],
  ])("are killed by pid after %s", async (_label, ending) => {
    const dir = mkdtempSync(join(packageDir, ".store-exit-test-"));
    try {
      const script = join(dir, "script.ts");
      writeFileSync(
        script,
        `import { startRedis } from ${JSON.stringify(join(packageDir, "src", "redis-server.ts"))};\n` +
          "const redis = await startRedis({ appendonly: true });\n" +
          "process.stdout.write(JSON.stringify({ pid: redis.pid, dir: redis.dir }) + '\\n');\n" +
          ending +
          "\n",
      );
      const child = spawn(process.execPath, ["--import", "tsx", script], { cwd: packageDir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NODE_OPTIONS: "" } });
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
      let err = "";
      child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
      await new Promise((resolve) => child.once("exit", resolve));
      const started = JSON.parse(out.trim().split("\n")[0] ?? "null") as { pid: number; dir: string } | null;
      expect(started).not.toBeNull();
      await eventually(`redis-server ${started!.pid} was killed (child stderr: ${err})`, () => !isAlive(started!.pid), { timeoutMs: 5000 });
      expect(existsSync(started!.dir)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
