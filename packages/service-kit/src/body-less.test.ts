/**
 * Two hostile inputs a route never sees: a malformed JSON body on a method that takes none, and a
 * HEAD request that Node's parser refuses. Real HTTP on loopback, through the platform's app and
 * listener.
 */
import { connect } from "node:net";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { closeServer, createApp, errorMiddleware, listen, notFoundHandler } from "./http.js";
import { jsonBody } from "./json-body.js";
import { createLogger } from "./logger.js";

let server: Server;
let base: string;
const deleted: string[] = [];

beforeAll(async () => {
  const logger = createLogger("body-less-test", "silent", "json");
  const app = createApp(logger);
  app.use(...jsonBody({ limit: "4kb" }));
  app.delete("/keys/:id", (req, res) => {
    deleted.push(String(req.params.id));
    res.status(204).end();
  });
  app.head("/things", (_req, res) => void res.status(200).end());
  app.use(notFoundHandler);
  app.use(errorMiddleware(logger));
  server = await listen(app, 0, "127.0.0.1", logger);
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => closeServer(server, 100));

describe("a route that takes no body", () => {
  it("refuses a malformed JSON body sent under a JSON content type, and does nothing", async () => {
    const res = await fetch(`${base}/keys/k1`, { method: "DELETE", headers: { "content-type": "application/json" }, body: '{"a":1,}' });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(deleted).not.toContain("k1");
  });

  it("acts on a well-formed JSON body, a body of another type, and no body (each ignored)", async () => {
    expect((await fetch(`${base}/keys/k2`, { method: "DELETE", headers: { "content-type": "application/json" }, body: '{"a":1}' })).status).toBe(204);
    expect((await fetch(`${base}/keys/k3`, { method: "DELETE", headers: { "content-type": "text/plain" }, body: "{oops" })).status).toBe(204);
    expect((await fetch(`${base}/keys/k4`, { method: "DELETE" })).status).toBe(204);
    expect(deleted).toEqual(["k2", "k3", "k4"]);
  });
});

/** Raw bytes on a fresh connection; resolves with everything the server sent before closing. */
function sendRaw(bytes: Buffer): Promise<string> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    let text = "";
    socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
    socket.on("error", reject);
    socket.on("close", () => resolve(text));
    socket.write(bytes);
  });
}

const withRawByte = (method: string) => Buffer.concat([Buffer.from(`${method} /things/`), Buffer.from([0xc3, 0xa9]), Buffer.from(" HTTP/1.1\r\nHost: x\r\n\r\n")]);

describe("a request Node's parser refuses", () => {
  it("is answered 400 with a problem document", async () => {
    const answer = await sendRaw(withRawByte("GET"));
    const [head, body] = answer.split("\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(body!)).toMatchObject({ status: 400, type: "/problems/malformed-request" });
  });

  it("is answered 400 without a body when it is a HEAD", async () => {
    const answer = await sendRaw(withRawByte("HEAD"));
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i);
    expect(answer.endsWith("\r\n\r\n")).toBe(true);
  });
});
