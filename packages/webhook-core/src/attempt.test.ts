import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import { sendAttempt } from "./attempt.js";
import { createDeliveryAgents, destroyDeliveryAgents } from "./delivery-agents.js";
import { startReceiver, type Receiver } from "./loopback-receiver.test-helper.js";
import { generateSecret } from "./signing.js";

const agents = createDeliveryAgents("any");
const secret = generateSecret();
let receiver: Receiver;
let answer = 204;

beforeAll(async () => {
  receiver = await startReceiver((_req, res) => {
    res.statusCode = answer;
    res.end("ok");
  });
});
afterAll(async () => {
  await receiver.close();
  destroyDeliveryAgents(agents);
});

describe("sendAttempt", () => {
  it("signs the stored bytes so a standardwebhooks receiver verifies them, and logs what it sent", async () => {
    answer = 200;
    const body = Buffer.from('{"deliveryId":"d-1","data":{}}');
    const sent = await sendAttempt({ url: receiver.origin, deliveryId: "d-1", attemptNumber: 1, trigger: "initial", body, secret, agents, timeoutMs: 2000 });
    const got = receiver.requests.at(-1)!;
    expect(got.body.equals(body)).toBe(true);
    expect(new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).toEqual({ deliveryId: "d-1", data: {} });
    expect(sent.verdict).toBe("delivered");
    expect(sent.requestHeaders["webhook-signature"]).toBe(got.headers["webhook-signature"]);
    expect(sent).toMatchObject({ deliveryId: "d-1", attemptNumber: 1, trigger: "initial", responseStatus: 200, responseBody: "ok", verdict: "delivered", error: null });
  });

  it("sends no signature without a secret and still sends webhook-id", async () => {
    answer = 410;
    const sent = await sendAttempt({ url: receiver.origin, deliveryId: "d-2", attemptNumber: 1, trigger: "initial", body: Buffer.from("{}"), secret: null, agents, timeoutMs: 2000 });
    const got = receiver.requests.at(-1)!;
    expect(got.headers["webhook-signature"]).toBeUndefined();
    expect(got.headers["webhook-id"]).toBe("d-2");
    expect(sent.verdict).toBe("gone");
  });

  it("sends the endpoint's custom headers beside a signature that still verifies, and logs their names only", async () => {
    answer = 200;
    const body = Buffer.from('{"type":"ping"}');
    const headers = { Authorization: "Bearer gateway-token", "X-Tenant": "acme" };
    const sent = await sendAttempt({ url: receiver.origin, deliveryId: "d-3", attemptNumber: 1, trigger: "test", body, secret, agents, timeoutMs: 2000, headers });
    const got = receiver.requests.at(-1)!;
    expect(got.headers.authorization).toBe("Bearer gateway-token");
    expect(got.headers["x-tenant"]).toBe("acme");
    expect(new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).toEqual({ type: "ping" });
    expect(sent.requestHeaders).toMatchObject({ Authorization: "[redacted]", "X-Tenant": "[redacted]" });
    expect(JSON.stringify(sent)).not.toContain("gateway-token");
    expect(JSON.stringify(sent)).not.toContain("acme");
  });

  it("never lets a custom header replace one the platform sets", async () => {
    answer = 200;
    const body = Buffer.from("{}");
    const headers = { "Webhook-Signature": "v1,forged", "content-type": "text/plain", "User-Agent": "spoof", "X-Kept": "yes" };
    const sent = await sendAttempt({ url: receiver.origin, deliveryId: "d-4", attemptNumber: 1, trigger: "initial", body, secret, agents, timeoutMs: 2000, headers });
    const got = receiver.requests.at(-1)!;
    expect(got.headers["content-type"]).toBe("application/json");
    expect(got.headers["user-agent"]).toBe("vw-webhooks/1.0");
    expect(got.headers["x-kept"]).toBe("yes");
    expect(new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).toEqual({});
    expect(Object.keys(sent.requestHeaders)).not.toContain("Webhook-Signature");
  });
});
