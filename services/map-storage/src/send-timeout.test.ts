/**
 * The send timeout cuts a reader that stops reading, and only that: the time the service takes
 * before its answer starts (a room listing parsing its rooms, S3's first byte) is not counted.
 */
import { once } from "node:events";
import { connect, type AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import express from "express";
import { createLogger } from "@vw/service-kit";
import { eventually } from "@vw/testing";
import { sendTimeout } from "./send-timeout.js";

const SEND_TIMEOUT_MS = 200;
let server: import("node:http").Server;
let port: number;
const logged: string[] = [];

beforeAll(async () => {
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => void (logged.push(chunk.toString()), done()) });
  const app = express();
  app.use(sendTimeout(SEND_TIMEOUT_MS, createLogger("test", "info", "json", sink)));
  // Prepares its answer for 3 send timeouts, then answers.
  app.get("/slow-to-prepare", (_req, res) => void setTimeout(() => res.json({ ok: true }), SEND_TIMEOUT_MS * 3));
  // 64 MiB, written as fast as the client reads.
  app.get("/large", (_req, res) => {
    const chunk = Buffer.alloc(1 << 20, 120);
    let left = 64;
    const pump = () => {
      while (left > 0) {
        left -= 1;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
      res.end();
    };
    pump();
  });
  server = app.listen(0, "127.0.0.1");
  await once(server, "listening");
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends a GET on a raw socket; resolves with what was received once the server closed it, or once a small answer is complete. */
function get(path: string, options: { paused: boolean }): Promise<{ text: string; bytes: number; closedByServer: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    let bytes = 0;
    socket.on("error", reject);
    socket.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (text.length < 200) text += chunk.toString("latin1");
      // A complete small answer: done reading.
      if (!options.paused && /\r\n\r\n\{"ok":true\}$/.test(text)) {
        socket.destroy();
        resolve({ text, bytes, closedByServer: false });
      }
    });
    socket.on("close", () => resolve({ text, bytes, closedByServer: true }));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    if (options.paused) {
      // Stops reading after the first bytes; reads on (to see the end) once the service logged its cut.
      socket.once("data", () => {
        socket.pause();
        void eventually("the service cut the paused reader", () => logged.join("").includes("send timeout: the client stopped reading"), { timeoutMs: 20_000, intervalMs: 20 }).then(
          () => socket.resume(),
          reject,
        );
      });
    }
  });
}

describe("sendTimeout", () => {
  it("does not cut a request while the service prepares its answer, however long that takes", async () => {
    const answer = await get("/slow-to-prepare", { paused: false });
    expect(answer.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.closedByServer).toBe(false);
  });

  it("cuts a reader that stops reading once the answer started, and says so in the log", async () => {
    const answer = await get("/large", { paused: true });
    expect(answer.closedByServer).toBe(true);
    expect(answer.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.bytes).toBeLessThan(64 << 20);
    expect(logged.join("")).toContain("send timeout: the client stopped reading");
  });
});
