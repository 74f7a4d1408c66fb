import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { loadConfig } from "./config.js";

const base = { DATABASE_URL: "postgresql://u@127.0.0.1:5432/db", S3_BUCKET: "maps" };

describe("map-storage config", () => {
  it("applies production-safe defaults", () => {
    const c = loadConfig(base);
    expect(c.port).toBe(3001);
    expect(c.maxFileBytes).toBe(50 * 1024 * 1024);
    expect(c.s3.forcePathStyle).toBe(false);
    expect(c.s3.conditionalWrites).toBe(true);
    expect(c.apiKeyCacheTtlMs).toBe(5000);
    // The bounds of one request: a parsed file, a patch, a reader that stops reading, an upload.
    expect(c.maxJsonFileBytes).toBe(8 * 1024 * 1024);
    expect(c.maxPatchOperations).toBe(1000);
    expect(c.sendTimeoutMs).toBe(60_000);
    expect(c.requestTimeoutMs).toBe(600_000);
    expect(c.maxConcurrentUploads).toBe(2);
    expect(c.maxStorageBytesPerWorld).toBe(10 * 1024 ** 3);
    expect(Object.isFrozen(c) && Object.isFrozen(c.s3)).toBe(true);
  });

  it("keeps a Redis database number, and reads Sentinel or Cluster instead", () => {
    expect(loadConfig({ ...base, REDIS_URL: "redis://cache:6379/3" }).redis).toEqual({ kind: "standalone", url: "redis://cache:6379/3", password: null, tls: false });
    expect(loadConfig({ ...base, REDIS_SENTINELS: "s0:26379", REDIS_SENTINEL_MASTER: "vw" }).redis).toMatchObject({ kind: "sentinel", masterName: "vw" });
    expect(loadConfig({ ...base, REDIS_CLUSTER_NODES: "c0:6379" }).redis).toMatchObject({ kind: "cluster" });
    expect(() => loadConfig({ ...base, REDIS_URL: "redis://cache:6379", REDIS_CLUSTER_NODES: "c0:6379" })).toThrow(/REDIS_URL and REDIS_CLUSTER_NODES are both set/);
  });

  it("names every bad variable at once", () => {
    let err: unknown;
    try {
      loadConfig({ DATABASE_URL: "mysql://x", MAX_FILE_BYTES: "big", S3_FORCE_PATH_STYLE: "maybe", PORT: "70000" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    for (const name of ["DATABASE_URL", "S3_BUCKET", "MAX_FILE_BYTES", "S3_FORCE_PATH_STYLE", "PORT"]) expect(msg).toContain(name);
  });

  it.each([
    ["https://play.example.com/?ref=mail", `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com/?ref=mail"`],
    ["https://play.example.com#lobby", `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "https://play.example.com#lobby"`],
    ["https://ops:hunter2@play.example.com", "PLAY_URL must not contain credentials (it is sent in every analytics.batch envelope)"],
  ])("refuses PLAY_URL=%s (room URLs are <PLAY_URL>/@/<org>/<world>/<path>.wam), never echoing credentials", (value, message) => {
    let err: unknown;
    try {
      loadConfig({ ...base, PLAY_URL: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([message]);
    expect((err as Error).message).not.toContain("hunter2");
  });

  it("defaults PLAY_URL to https://play.localhost and accepts one with a path", () => {
    expect(loadConfig(base).playUrl).toBe("https://play.localhost");
    expect(loadConfig({ ...base, PLAY_URL: "http://localhost:8080/play/" }).playUrl).toBe("http://localhost:8080/play");
  });

  it("keeps its own REDIS_KEY_PREFIX default and refuses a malformed one like the queue services", () => {
    expect(loadConfig(base).redisKeyPrefix).toBe("vw:map-storage:");
    expect(loadConfig({ ...base, REDIS_KEY_PREFIX: "test:ms:ab12:" }).redisKeyPrefix).toBe("test:ms:ab12:");
    let err: unknown;
    try {
      loadConfig({ ...base, REDIS_KEY_PREFIX: "map storage" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([`REDIS_KEY_PREFIX must be 1-64 letters, digits, '_', '.', ':' or '-', got "map storage"`]);
  });
});
