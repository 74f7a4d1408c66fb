import { afterAll, afterEach, beforeEach, describe, expect, it } from "@jest/globals";
import got, { RequestError } from "got";
import { RequestFilteringHttpAgent } from "request-filtering-agent";
import {
  ADDRESS_REFUSED_CODE,
  AddressRefusedError,
  UnresolvedHostError,
  createDeliveryAgents,
  destroyDeliveryAgents,
  isPolicyRefusal,
  type DeliveryAgents,
} from "./delivery-agents.js";
import { postDelivery } from "./delivery-http.js";
import { fakeLookup, startReceiver, type Receiver } from "./loopback-receiver.test-helper.js";
import { classify } from "./outcome.js";

const body = Buffer.from("{}");
const headers = { "content-type": "application/json" };

let receiver: Receiver;
const created: DeliveryAgents[] = [];
function agentsFor(...args: Parameters<typeof createDeliveryAgents>): DeliveryAgents {
  const agents = createDeliveryAgents(...args);
  created.push(agents);
  return agents;
}
beforeEach(async () => {
  receiver = await startReceiver((_req, res) => res.writeHead(200).end("reached"));
});
afterEach(() => receiver.close());
afterAll(() => created.forEach(destroyDeliveryAgents));

/** The delivery transport over these agents refuses (and reaches) exactly the addresses the policy says. */
const transports = [["node:http", postDelivery]] as const;

describe.each(transports)("createDeliveryAgents('public-https'): connect-time refusal (%s)", (_transport, postDelivery) => {
  // https URLs: the refusal happens before the TLS handshake, so no TLS receiver is needed, and
  // an unrefused request would fail differently (a TLS error on this plain-HTTP receiver).
  it.each([
    ["an IPv4 loopback literal", (port: number) => `https://127.0.0.1:${port}/`],
    ["localhost (resolved by the system resolver)", (port: number) => `https://localhost:${port}/`],
    ["an IPv6 loopback literal", (port: number) => `https://[::1]:${port}/`],
    ["an IPv4-mapped loopback literal", (port: number) => `https://[::ffff:127.0.0.1]:${port}/`],
    ["a decimal spelling of 127.0.0.1", (port: number) => `https://2130706433:${port}/`],
    ["an octal spelling of 127.0.0.1", (port: number) => `https://0177.0.0.1:${port}/`],
  ])("refuses %s before any connection is made", async (_label, url) => {
    const outcome = await postDelivery({ url: url(receiver.port), body, headers, timeoutMs: 5000, agents: agentsFor("public-https") });
    expect(outcome.status).toBeUndefined();
    expect(outcome.error).toEqual({
      kind: "refused-by-policy",
      message: expect.stringMatching(/refused by ENDPOINT_URL_POLICY: \S+ is not a public address$/),
      detail: expect.stringMatching(/loopback address/),
    });
    expect(outcome.error?.message).not.toMatch(/loopback/);
    expect(classify(outcome)).toBe("rejected");
    expect(receiver.connections()).toBe(0);
  });

  it.each([
    ["127.0.0.1", (port: number) => `http://127.0.0.1:${port}/`],
    ["localhost", (port: number) => `http://localhost:${port}/`],
  ])("the http agent refuses %s at connect time as well", async (_label, url) => {
    const agents = agentsFor("public-https");
    let caught: unknown;
    try {
      await got.post(url(receiver.port), { body, agent: { http: agents.http }, retry: { limit: 0 } });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(RequestError);
    expect((caught as RequestError).code).toBe(ADDRESS_REFUSED_CODE);
    expect(isPolicyRefusal(caught)).toBe(true);
    expect(receiver.connections()).toBe(0);
  });

  it("refuses a plain http URL before sending anything, whatever its address", async () => {
    const lookup = fakeLookup({ "public.rebind.test": ["93.184.216.34"] });
    const outcome = await postDelivery({
      url: "http://public.rebind.test/hook",
      body,
      headers,
      timeoutMs: 5000,
      agents: agentsFor("public-https", { lookup }),
    });
    expect(outcome.error).toEqual({ kind: "refused-by-policy", message: expect.stringContaining("https only") });
    expect(classify(outcome)).toBe("rejected");
  });

  it("refuses a public-looking name that resolves to a private address at delivery time (DNS rebinding)", async () => {
    const lookup = fakeLookup({ "hooks.rebind.test": ["127.0.0.1"] });

    const refused = await postDelivery({
      url: `https://hooks.rebind.test:${receiver.port}/`,
      body,
      headers,
      timeoutMs: 5000,
      agents: agentsFor("public-https", { lookup }),
    });
    expect(refused.error).toEqual({
      kind: "refused-by-policy",
      message: "connection to hooks.rebind.test refused by ENDPOINT_URL_POLICY: hooks.rebind.test is not a public address",
      detail: "hooks.rebind.test: 127.0.0.1 is a loopback address",
    });
    expect(classify(refused)).toBe("rejected");
    expect(receiver.connections()).toBe(0);

    // The same name and lookup under `any` does reach the receiver: the refusal above is the policy's.
    const reached = await postDelivery({
      url: `http://hooks.rebind.test:${receiver.port}/`,
      body,
      headers,
      timeoutMs: 5000,
      agents: agentsFor("any", { lookup }),
    });
    expect(reached).toMatchObject({ status: 200, responseBody: "reached" });
  });

  it.each(["ENOTFOUND", "ENODATA"] as const)(
    "retries a name without an address at send time (%s) as a connection error that does not say it did not resolve",
    async (code) => {
      // A customer's zone answering NXDOMAIN for a moment must not lose the delivery; the log
      // customers read says only that the connection could not be made, the server's log why.
      const outcome = await postDelivery({
        url: `https://gone.rebind.test:${receiver.port}/`,
        body,
        headers,
        timeoutMs: 5000,
        agents: agentsFor("public-https", { lookup: fakeLookup({ "gone.rebind.test": code }) }),
      });
      expect(outcome.status).toBeUndefined();
      expect(outcome.error).toEqual({ kind: "connection", message: "could not connect to gone.rebind.test", detail: `gone.rebind.test does not resolve (${code})` });
      expect(classify(outcome)).toBe("retry");
      expect(receiver.connections()).toBe(0);
    },
  );

  it("keeps a resolver failing for now (EAI_AGAIN) a retried connection error", async () => {
    const outcome = await postDelivery({
      url: `https://flaky.rebind.test:${receiver.port}/`,
      body,
      headers,
      timeoutMs: 5000,
      agents: agentsFor("public-https", { lookup: fakeLookup({ "flaky.rebind.test": "EAI_AGAIN" }) }),
    });
    expect(outcome.error).toEqual({ kind: "connection", message: expect.stringContaining("EAI_AGAIN") });
    expect(classify(outcome)).toBe("retry");
  });

  it("refuses a name with a public and a private answer (every answer is checked)", async () => {
    const lookup = fakeLookup({ "mixed.rebind.test": ["93.184.216.34", "10.0.0.7"] });
    const outcome = await postDelivery({
      url: `https://mixed.rebind.test:${receiver.port}/`,
      body,
      headers,
      timeoutMs: 5000,
      agents: agentsFor("public-https", { lookup }),
    });
    expect(outcome.error).toEqual({
      kind: "refused-by-policy",
      message: "connection to mixed.rebind.test refused by ENDPOINT_URL_POLICY: mixed.rebind.test is not a public address",
      detail: "mixed.rebind.test: 10.0.0.7 is a private address",
    });
  });

  it("lets a public answer through to the connection attempt (which fails here only for lack of a route)", async () => {
    const lookup = fakeLookup({ "public.rebind.test": ["93.184.216.34"] });
    const outcome = await postDelivery({
      url: `https://public.rebind.test:${receiver.port}/`,
      body,
      headers,
      timeoutMs: 300,
      agents: agentsFor("public-https", { lookup }),
    });
    expect(["timeout", "connection"]).toContain(outcome.error?.kind);
    expect(classify(outcome)).toBe("retry");
  });
});

describe.each(transports)("createDeliveryAgents('any') (%s)", (_transport, postDelivery) => {
  it("connects to loopback addresses", async () => {
    const outcome = await postDelivery({ url: `${receiver.origin}/`, body, headers, timeoutMs: 5000, agents: agentsFor("any") });
    expect(outcome).toMatchObject({ status: 200, responseBody: "reached" });
  });
});

describe("createDeliveryAgents", () => {
  it.each(["any", "public-https"] as const)("gives keep-alive agents under %s", (policy) => {
    const agents = agentsFor(policy);
    expect(agents.policy).toBe(policy);
    expect((agents.http as unknown as { keepAlive: boolean }).keepAlive).toBe(true);
    expect((agents.https as unknown as { keepAlive: boolean }).keepAlive).toBe(true);
  });
});

describe("isPolicyRefusal", () => {
  it("recognises request-filtering-agent's own refusal as got 14 surfaces it (ERR_GOT_REQUEST_ERROR)", async () => {
    const agent = new RequestFilteringHttpAgent({ allowPrivateIPAddress: false });
    let caught: unknown;
    try {
      await got.post(`http://localhost:${receiver.port}/`, { body, agent: { http: agent }, retry: { limit: 0 } });
    } catch (err) {
      caught = err;
    } finally {
      agent.destroy();
    }
    expect(caught).toBeInstanceOf(RequestError);
    expect((caught as RequestError).code).toBe("ERR_GOT_REQUEST_ERROR");
    expect((caught as Error).message).toMatch(/is not allowed\. Because, It is private IP address/);
    expect(isPolicyRefusal(caught)).toBe(true);
    expect(receiver.connections()).toBe(0);
  });

  it("recognises our own refusal directly, by code and through a cause chain", () => {
    const ours = AddressRefusedError.ofAddress("10.0.0.1", "private", "x.test");
    expect(isPolicyRefusal(ours)).toBe(true);
    expect(isPolicyRefusal(Object.assign(new Error("wrapped"), { code: ADDRESS_REFUSED_CODE }))).toBe(true);
    expect(isPolicyRefusal(new Error("outer", { cause: new Error("middle", { cause: ours }) }))).toBe(true);
  });

  it("does not mistake connection errors or timeouts for refusals", () => {
    expect(isPolicyRefusal(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }))).toBe(false);
    expect(isPolicyRefusal(Object.assign(new Error("Timeout awaiting 'request' for 300ms"), { code: "ETIMEDOUT" }))).toBe(false);
    expect(isPolicyRefusal(new Error("getaddrinfo ENOTFOUND nowhere.test"))).toBe(false);
    expect(isPolicyRefusal(new UnresolvedHostError("nowhere.test", "ENOTFOUND"))).toBe(false);
    expect(isPolicyRefusal("DNS lookup 127.0.0.1 is not allowed. Because, It is private IP address.")).toBe(false);
    expect(isPolicyRefusal(null)).toBe(false);
  });
});
