import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { afterAll, afterEach, describe, expect, it } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import { createDeliveryAgents, destroyDeliveryAgents } from "./delivery-agents.js";
import { postDelivery } from "./delivery-http.js";
import { closedPort, startReceiver, type Receiver } from "./loopback-receiver.test-helper.js";
import { classify } from "./outcome.js";
import { generateSecret, signatureHeaders } from "./signing.js";

const agents = createDeliveryAgents("any");
const body = Buffer.from('{"deliveryId":"0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e11","type":"ping","data":{} }');
const headers = { "content-type": "application/json", "webhook-id": "0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e11" };

let receivers: Receiver[] = [];
async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});
afterAll(() => destroyDeliveryAgents(agents));

/** The one transport of every delivery (docs/decisions/0013-one-http-transport-for-deliveries.md). */
const transports = [["postDelivery (node:http)", postDelivery]] as const;

describe.each(transports)("%s against real loopback receivers (policy any)", (_transport, postDelivery) => {
  it("POSTs the exact bytes and headers, which the standardwebhooks library verifies, and reports a 2xx", async () => {
    const secret = generateSecret();
    const signed = signatureHeaders({ deliveryId: "0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e11", body, secret });
    let verified: unknown;
    const r = await receiver((req, res) => {
      verified = new Webhook(secret).verify(req.body, req.headers as Record<string, string>);
      res.writeHead(202, { "x-receiver": "ok" }).end("accepted");
    });
    const outcome = await postDelivery({ url: `${r.origin}/hooks`, body, headers: signed, timeoutMs: 5000, agents });

    expect(outcome).toMatchObject({ status: 202, responseBody: "accepted", responseBodyTruncated: false });
    expect(outcome.error).toBeUndefined();
    expect(outcome.responseHeaders["x-receiver"]).toBe("ok");
    expect(classify(outcome)).toBe("delivered");
    const [req] = r.requests;
    expect(req?.method).toBe("POST");
    expect(req?.url).toBe("/hooks");
    expect(req?.body.equals(body)).toBe(true);
    expect(req?.headers).toMatchObject(signed);
    // No hidden headers: got's default user-agent is not sent, so the attempt log is the truth.
    expect(req?.headers["user-agent"]).toBeUndefined();
    expect(verified).toEqual(JSON.parse(body.toString("utf8")));
  });

  it.each([
    [500, "retry"],
    [503, "retry"],
    [408, "retry"],
    [429, "retry"],
    [410, "gone"],
    [404, "rejected"],
    [400, "rejected"],
    [422, "rejected"],
  ] as const)("reports %i with its body, classified %s", async (status, verdict) => {
    const r = await receiver((_req, res) => res.writeHead(status).end(`answer ${status}`));
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    expect(outcome).toMatchObject({ status, responseBody: `answer ${status}` });
    expect(outcome.error).toBeUndefined();
    expect(classify(outcome)).toBe(verdict);
    expect(r.requests).toHaveLength(1); // never retried inside the call
  });

  it("times out on a receiver that never answers, without a status", async () => {
    const r = await receiver(() => {
      /* never answers */
    });
    // The receiver never answers: only the timeout can end the call (or jest's, failing the test).
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 300, agents });

    expect(outcome.status).toBeUndefined();
    expect(outcome.error?.kind).toBe("timeout");
    expect(outcome.durationMs).toBeGreaterThanOrEqual(290);
    expect(classify(outcome)).toBe("retry");
    expect(r.requests).toHaveLength(1);
  });

  it("keeps the status when the body stalls after a 2xx head, so the delivery counts as delivered", async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("partial");
      // never ends
    });
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 300, agents });
    expect(outcome).toMatchObject({ status: 200, responseBody: "partial", error: { kind: "timeout" } });
    expect(classify(outcome)).toBe("delivered");
  });

  it("reports a connection error for a closed port", async () => {
    const port = await closedPort();
    const outcome = await postDelivery({ url: `http://127.0.0.1:${port}/`, body, headers, timeoutMs: 5000, agents });
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toEqual({ kind: "connection", message: expect.stringContaining("ECONNREFUSED") });
    expect(classify(outcome)).toBe("retry");
  });

  it("does not follow a 302: reports it as a redirect failure that is not retried", async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end("should never be reached"));
    const r = await receiver((_req, res) => res.writeHead(302, { location: `${target.origin}/internal` }).end("moved"));
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });

    expect(outcome.status).toBe(302);
    expect(outcome.error).toEqual({ kind: "redirect", message: expect.stringContaining(`${target.origin}/internal`) });
    expect(outcome.responseHeaders["location"]).toBe(`${target.origin}/internal`);
    expect(classify(outcome)).toBe("rejected");
    expect(target.requests).toHaveLength(0);
    expect(target.connections()).toBe(0);
  });

  it("keeps only the first 4096 bytes of a 1 MB answer", async () => {
    const big = Buffer.alloc(1024 * 1024, "a");
    big.write("START", 0);
    const r = await receiver((_req, res) => res.writeHead(500, { "content-type": "text/plain" }).end(big));
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });

    expect(outcome.status).toBe(500);
    expect(outcome.responseBody).toHaveLength(4096);
    expect(outcome.responseBody.startsWith("STARTaaaa")).toBe(true);
    expect(outcome.responseBodyTruncated).toBe(true);
    expect(outcome.error).toBeUndefined();
  });

  it("stops reading an endless answer instead of downloading it until the timeout", async () => {
    const chunk = Buffer.alloc(64 * 1024, "z");
    const r = await receiver((_req, res) => {
      res.writeHead(200);
      const pump = (): void => {
        if (res.destroyed || res.writableEnded) return;
        res.write(chunk, () => setImmediate(pump));
      };
      pump();
    });
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 10_000, agents, maxResponseBytes: 100 });
    expect(outcome).toMatchObject({ status: 200, responseBodyTruncated: true });
    expect(outcome.responseBody).toBe("z".repeat(100));
    expect(outcome.error).toBeUndefined(); // ended by the byte bound, not by the 10 s timeout
  });

  it("decompresses a gzip answer before keeping its first bytes", async () => {
    const text = "hello, compressed world";
    const r = await receiver((_req, res) => res.writeHead(200, { "content-encoding": "gzip" }).end(gzipSync(text)));
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    expect(outcome.responseBody).toBe(text);
    expect(outcome.responseBodyTruncated).toBe(false);
  });

  it("decompresses deflate and brotli answers", async () => {
    const text = "hello, deflated world";
    for (const [encoding, bytes] of [
      ["deflate", deflateSync(text)],
      ["br", brotliCompressSync(text)],
    ] as const) {
      const r = await receiver((_req, res) => res.writeHead(200, { "content-encoding": encoding }).end(bytes));
      const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
      expect({ encoding, body: outcome.responseBody, error: outcome.error }).toEqual({ encoding, body: text, error: undefined });
    }
  });

  it("takes an empty answer that names a content-encoding as empty, not as a decoding error", async () => {
    const r = await receiver((_req, res) => res.writeHead(200, { "content-encoding": "gzip" }).end());
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    expect(outcome).toMatchObject({ status: 200, responseBody: "", responseBodyTruncated: false });
    expect(outcome.error).toBeUndefined();
    expect(classify(outcome)).toBe("delivered");
  });

  it("keeps the status and the bytes that arrived when the receiver drops the connection mid-answer", async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200, { "content-length": "100" });
      res.write("only part", () => res.socket?.destroy());
    });
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    expect(outcome).toMatchObject({ status: 200, responseBody: "only part", error: { kind: "connection" } });
    expect(classify(outcome)).toBe("delivered");
  });

  it("refuses a URL that is not http(s) without sending anything", async () => {
    const outcome = await postDelivery({ url: "ftp://127.0.0.1/hooks", body, headers, timeoutMs: 5000, agents });
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toEqual({ kind: "refused-by-policy", message: "ftp: URL refused: deliveries are http(s) only" });
  });

  it("reports a header value HTTP cannot carry as a failed attempt instead of throwing", async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end());
    const outcome = await postDelivery({ url: r.origin, body, headers: { ...headers, "x-bad": "line\r\nbreak" }, timeoutMs: 5000, agents });
    expect(outcome.status).toBeUndefined();
    expect(outcome.error?.kind).toBe("connection");
    expect(r.requests).toHaveLength(0);
  });

  it("decodes the kept bytes as lossy UTF-8 when the cut falls inside a character", async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end("abcd€uro"));
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents, maxResponseBytes: 5 });
    expect(outcome.responseBody).toBe("abcd\uFFFD");
    expect(outcome.responseBodyTruncated).toBe(true);
  });

  it("does not mark an answer of exactly maxResponseBytes as truncated", async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end("x".repeat(64)));
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents, maxResponseBytes: 64 });
    expect(outcome.responseBody).toBe("x".repeat(64));
    expect(outcome.responseBodyTruncated).toBe(false);
  });

  it("flattens repeated response headers", async () => {
    const r = await receiver((_req, res) => res.writeHead(200, { "set-cookie": ["a=1", "b=2"], "X-Mixed-Case": "v" }).end());
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    expect(outcome.responseHeaders).toMatchObject({ "set-cookie": "a=1, b=2", "x-mixed-case": "v" });
  });

  it("reuses one keep-alive connection for successive deliveries to a receiver", async () => {
    const r = await receiver((_req, res) => res.writeHead(204).end());
    for (let i = 0; i < 3; i += 1) {
      expect((await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents })).status).toBe(204);
    }
    expect(r.requests).toHaveLength(3);
    expect(r.connections()).toBe(1);
  });

  it("sends again on a new connection when the receiver closed the kept-alive one as the request arrived: no failure", async () => {
    // As a receiver's keep-alive timeout closing an idle connection at the instant it is reused.
    const used = new WeakSet<object>();
    const r = await receiver((_req, res) => {
      const socket = res.socket!;
      if (used.has(socket)) return void socket.destroy();
      used.add(socket);
      res.writeHead(200).end("ok");
    });
    expect((await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents })).status).toBe(200);
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });

    expect(outcome).toMatchObject({ status: 200, responseBody: "ok" });
    expect(outcome.error).toBeUndefined();
    expect(r.connections()).toBe(2);
    // The copy written to the closed connection carries the same bytes and webhook-id.
    expect(r.requests.map((q) => [q.headers["webhook-id"], q.body.equals(body)])).toEqual(Array.from({ length: 3 }, () => [headers["webhook-id"], true]));
  });

  it("reports a connection error once a new connection is closed without an answer too", async () => {
    let answered = false;
    const r = await receiver((_req, res) => {
      if (answered) return void res.socket?.destroy();
      answered = true;
      res.writeHead(200).end("ok");
    });
    await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });

    expect(outcome.status).toBeUndefined();
    expect(outcome.error?.kind).toBe("connection");
    expect(classify(outcome)).toBe("retry");
    // The kept-alive connection, then one new one: a failure on a new connection is the receiver's.
    expect({ requests: r.requests.length, connections: r.connections() }).toEqual({ requests: 3, connections: 2 });
  });

  it("does not send again when the receiver had begun answering on a kept-alive connection", async () => {
    let answers = 0;
    const r = await receiver((_req, res) => {
      answers += 1;
      if (answers === 1) return void res.writeHead(200).end("ok");
      res.writeHead(500, { "content-length": "100" });
      res.write("only part", () => res.socket?.destroy());
    });
    await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });

    expect(outcome).toMatchObject({ status: 500, responseBody: "only part", error: { kind: "connection" } });
    expect({ requests: r.requests.length, connections: r.connections() }).toEqual({ requests: 2, connections: 1 });
  });

  it("reports a connection error for a new connection closed without an answer, sent once", async () => {
    const r = await receiver((_req, res) => void res.socket?.destroy());
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toEqual({ kind: "connection", message: expect.stringContaining("socket hang up") });
    expect(r.requests).toHaveLength(1);
  });

  it("measures the response time with the injected clock", async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end("ok"));
    const ticks = [1_000, 1_250.4];
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents, now: () => ticks.shift() ?? 99_999 });
    expect(outcome.durationMs).toBe(250);
  });

  it("measures the response time with the real clock, bounded by the caller's own measure", async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end("ok"));
    const started = performance.now();
    const outcome = await postDelivery({ url: r.origin, body, headers, timeoutMs: 5000, agents });
    const elapsed = performance.now() - started;
    expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
    expect(outcome.durationMs).toBeLessThanOrEqual(Math.ceil(elapsed));
  });
});
