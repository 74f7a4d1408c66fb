/**
 * The connection policy against the real Redis: a worker connection hands one tick's commands to
 * its socket as one write, on its first socket and on the one it opens after a reconnect, and the
 * replies still match their commands; a producer connection is left as ioredis made it.
 */
import { once } from "node:events";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import type { Redis } from "ioredis";
import { createRedisConnection } from "./connection.js";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
let worker: Redis;
let producer: Redis;
let admin: Redis;
beforeAll(async () => {
  worker = createRedisConnection(url, "worker");
  producer = createRedisConnection(url, "producer");
  admin = createRedisConnection(url, "producer");
  // A producer connection has no offline queue: it takes commands once it is ready.
  await Promise.all([worker, producer, admin].map((c) => (c.status === "ready" ? Promise.resolve() : once(c, "ready"))));
});
afterAll(async () => {
  await Promise.all([worker.quit(), producer.quit(), admin.quit()]);
});

/** Counts the writes a socket hands to the operating system (`_write` for one chunk, `_writev` for several). */
function countSocketWrites(redis: Redis): () => number {
  const socket = redis.stream as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
  let count = 0;
  const write = socket._write;
  const writev = socket._writev;
  socket._write = function (...a: unknown[]) {
    count += 1;
    return write.apply(this, a);
  };
  socket._writev = function (...a: unknown[]) {
    count += 1;
    return writev.apply(this, a);
  };
  return () => count;
}

/** 200 commands issued in one tick, each answered with its own argument. */
async function echoMany(redis: Redis): Promise<void> {
  const sent = Array.from({ length: 200 }, (_, i) => `m${i}-${"x".repeat(i % 7)}`);
  expect(await Promise.all(sent.map((m) => redis.echo(m)))).toEqual(sent);
}

it("a worker connection writes one tick's commands in one socket write and gets each reply back for its command", async () => {
  const writes = countSocketWrites(worker);
  await echoMany(worker);
  expect(writes()).toBe(1);

  // Commands issued in later ticks (each awaiting the one before) are written as they come.
  const laterWrites = countSocketWrites(worker);
  for (let i = 0; i < 5; i++) expect(await worker.echo(`t${i}`)).toBe(`t${i}`);
  expect(laterWrites()).toBe(5);
});

it("a producer connection is not corked: the same tick's commands go out one write each", async () => {
  const writes = countSocketWrites(producer);
  await echoMany(producer);
  expect(writes()).toBeGreaterThan(100);
});

it("the socket a worker connection opens after Redis drops it coalesces too, and no command is lost", async () => {
  const firstSocket = worker.stream;
  const id = await worker.client("ID");
  const reconnected = once(worker, "ready");
  await admin.client("KILL", "ID", String(id));
  await reconnected;
  expect(worker.stream).not.toBe(firstSocket);

  const writes = countSocketWrites(worker);
  await echoMany(worker);
  expect(writes()).toBe(1);
});

it("commands issued while the connection is down are sent, in order, once it is back", async () => {
  const id = await worker.client("ID");
  const reconnected = once(worker, "ready");
  await admin.client("KILL", "ID", String(id));
  // Issued at once, while ioredis still holds the closed socket or is reconnecting: the offline
  // queue keeps them and sends them on the new socket.
  const sent = Array.from({ length: 50 }, (_, i) => `offline-${i}`);
  const replies = Promise.all(sent.map((m) => worker.echo(m)));
  await reconnected;
  expect(await replies).toEqual(sent);
});
