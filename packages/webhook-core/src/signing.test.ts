import { createHmac } from "node:crypto";
import { describe, expect, it } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import {
  WebhookSecretError,
  generateSecret,
  parseSecret,
  sign,
  signatureHeaders,
} from "./signing.js";

const deliveryId = "6f1f2f5e-8a43-4b43-9d1c-3d7c0c1b2a10";
// Key order, spacing and a non-ASCII character: re-serialising this changes its bytes.
const rawBody = Buffer.from('{"deliveryId":"6f1f2f5e-8a43-4b43-9d1c-3d7c0c1b2a10", "type":"ping","data":{},"world":{"slug":"café"}}');

describe("generateSecret", () => {
  it("returns whsec_ + padded base64 of 32 random bytes by default", () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(parseSecret(secret)).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });

  it("honours the requested length within 24..64 bytes and refuses others", () => {
    expect(parseSecret(generateSecret(24))).toHaveLength(24);
    expect(parseSecret(generateSecret(64))).toHaveLength(64);
    expect(() => generateSecret(23)).toThrow(RangeError);
    expect(() => generateSecret(65)).toThrow(RangeError);
    expect(() => generateSecret(32.5)).toThrow(RangeError);
  });
});

describe("parseSecret", () => {
  const key = Buffer.alloc(32, 7);

  it("returns the decoded key", () => {
    expect(parseSecret(`whsec_${key.toString("base64")}`).equals(key)).toBe(true);
  });

  it.each([
    ["missing prefix", key.toString("base64")],
    ["wrong prefix", `whsk_${key.toString("base64")}`],
    ["not base64", "whsec_not*base64!"],
    ["url-safe alphabet", `whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`],
    ["missing padding", `whsec_${Buffer.alloc(32, 7).toString("base64").replace(/=+$/, "")}`],
    ["too short (23 bytes)", `whsec_${Buffer.alloc(23, 1).toString("base64")}`],
    ["too long (65 bytes)", `whsec_${Buffer.alloc(65, 1).toString("base64")}`],
    ["empty", "whsec_"],
  ])("refuses %s with a WebhookSecretError that does not echo the secret", (_label, secret) => {
    let caught: unknown;
    try {
      parseSecret(secret);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(WebhookSecretError);
    expect((caught as WebhookSecretError).code).toBe("invalid-webhook-secret");
    if (secret.length > "whsec_".length) expect((caught as Error).message).not.toContain(secret.slice(6));
  });
});

describe("sign", () => {
  it("is v1, + base64 HMAC-SHA256 of <id>.<timestamp>.<raw body> keyed by the decoded secret", () => {
    const secret = generateSecret();
    const expected = createHmac("sha256", parseSecret(secret))
      .update(Buffer.concat([Buffer.from(`${deliveryId}.1700000000.`), rawBody]))
      .digest("base64");
    expect(sign({ id: deliveryId, timestamp: 1700000000, body: rawBody, secret })).toBe(`v1,${expected}`);
  });

  it("gives the same signature for a string body and its UTF-8 bytes", () => {
    const secret = generateSecret();
    const fromString = sign({ id: deliveryId, timestamp: 1, body: rawBody.toString("utf8"), secret });
    expect(sign({ id: deliveryId, timestamp: 1, body: rawBody, secret })).toBe(fromString);
  });

  it("refuses fractional or negative timestamps (the header carries whole seconds)", () => {
    const secret = generateSecret();
    expect(() => sign({ id: deliveryId, timestamp: 1.5, body: rawBody, secret })).toThrow(RangeError);
    expect(() => sign({ id: deliveryId, timestamp: -1, body: rawBody, secret })).toThrow(RangeError);
  });
});

describe("signatureHeaders verified by the standardwebhooks library, as a customer would", () => {
  const secret = generateSecret();

  it("sets lower-case content-type, webhook-id = deliveryId, webhook-timestamp in seconds, webhook-signature", () => {
    const now = new Date("2024-05-01T12:00:00.900Z");
    const headers = signatureHeaders({ deliveryId, body: rawBody, secret, now });
    expect(headers).toEqual({
      "content-type": "application/json",
      "webhook-id": deliveryId,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": sign({ id: deliveryId, timestamp: Math.floor(now.getTime() / 1000), body: rawBody, secret }),
    });
  });

  it("is accepted with the right secret and the raw body", () => {
    const headers = signatureHeaders({ deliveryId, body: rawBody, secret });
    expect(new Webhook(secret).verify(rawBody, headers)).toEqual(JSON.parse(rawBody.toString("utf8")));
  });

  it("is refused after the secret was rotated", () => {
    const headers = signatureHeaders({ deliveryId, body: rawBody, secret });
    expect(() => new Webhook(generateSecret()).verify(rawBody, headers)).toThrow("No matching signature found");
  });

  it("is refused for a modified body", () => {
    const headers = signatureHeaders({ deliveryId, body: rawBody, secret });
    const modified = Buffer.from(rawBody.toString("utf8").replace('"ping"', '"pong"'));
    expect(() => new Webhook(secret).verify(modified, headers)).toThrow("No matching signature found");
  });

  it("is refused for a re-serialised body carrying the same JSON value", () => {
    const headers = signatureHeaders({ deliveryId, body: rawBody, secret });
    const reserialised = JSON.stringify(JSON.parse(rawBody.toString("utf8")));
    expect(reserialised).not.toBe(rawBody.toString("utf8"));
    expect(() => new Webhook(secret).verify(reserialised, headers)).toThrow("No matching signature found");
  });

  it("is refused when the timestamp is 6 minutes off either way, accepted at 4 minutes", () => {
    const sixMinutes = 6 * 60 * 1000;
    const past = signatureHeaders({ deliveryId, body: rawBody, secret, now: new Date(Date.now() - sixMinutes) });
    const future = signatureHeaders({ deliveryId, body: rawBody, secret, now: new Date(Date.now() + sixMinutes) });
    const recent = signatureHeaders({ deliveryId, body: rawBody, secret, now: new Date(Date.now() - 4 * 60 * 1000) });
    expect(() => new Webhook(secret).verify(rawBody, past)).toThrow("Message timestamp too old");
    expect(() => new Webhook(secret).verify(rawBody, future)).toThrow("Message timestamp too new");
    expect(() => new Webhook(secret).verify(rawBody, recent)).not.toThrow();
  });

  it("omits webhook-signature for a legacy endpoint without a secret, keeping webhook-id", () => {
    const headers = signatureHeaders({ deliveryId, body: rawBody, secret: null });
    expect(headers).not.toHaveProperty("webhook-signature");
    expect(headers["webhook-id"]).toBe(deliveryId);
    expect(() => new Webhook(secret).verify(rawBody, headers)).toThrow("Missing required headers");
  });
});
