/**
 * SSRF at delivery time under the default ENDPOINT_URL_POLICY (public-https): whatever URL got
 * into the database (a policy tightened later, a row written by hand, DNS that changed since
 * creation), the worker refuses to connect to a non-public address, sends nothing and logs the
 * refusal without retrying. A host name without an address at send time is not refused but
 * retried: a customer's DNS zone answering NXDOMAIN for a moment must not lose deliveries.
 */
import { lookup as systemLookup } from "node:dns";
import type { LookupFunction } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
let probe: WebhookReceiver;

/** The name whose zone answers NXDOMAIN; every other name goes to the system resolver. */
const MISSING_HOST = "hooks.nxdomain.example";
const deliveryLookup: LookupFunction = (hostname, options, callback) => {
  if (hostname === MISSING_HOST) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), "", 4);
  return systemLookup(hostname, options, callback);
};

beforeAll(async () => {
  h = await startHarness({ endpointUrlPolicy: "public-https", retryDelays: [100], deliveryLookup });
  probe = await startWebhookReceiver({ answer: 204 });
});
afterAll(async () => {
  await h.close();
  await probe.close();
});

describe("with ENDPOINT_URL_POLICY=public-https the worker refuses", () => {
  const cases = (port: number): [string, string][] => [
    ["plain http", `http://example.com:${port}/hook`],
    ["loopback", `https://127.0.0.1:${port}/hook`],
    ["IPv6 loopback", `https://[::1]:${port}/hook`],
    ["localhost", `https://localhost:${port}/hook`],
    ["decimal IPv4", `https://2130706433:${port}/hook`],
    ["octal IPv4", `https://0177.0.0.1:${port}/hook`],
    ["IPv4-mapped IPv6", `https://[::ffff:127.0.0.1]:${port}/hook`],
    ["private 10/8", `https://10.0.0.1:${port}/hook`],
    ["link-local metadata", `https://169.254.169.254/latest/meta-data`],
    ["CGNAT", `https://100.64.0.1:${port}/hook`],
    ["IPv6 unique-local", `https://[fd00::1]:${port}/hook`],
  ];

  it.each(cases(0).map(([name]) => name))("%s", async (name) => {
    const url = cases(probe.port).find(([n]) => n === name)![1];
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url });
    const deliveryId = await h.seedDelivery(endpoint);
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId } });
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ errorKind: "refused-by-policy", verdict: "rejected", responseStatus: null });
    // The logged error (shown to the world's administrators) names no address range nor what DNS said.
    if (name !== "plain http") expect(attempts[0]!.error).toMatch(/^connection to \S+ refused by ENDPOINT_URL_POLICY: \S+ is not a public address$/);
    expect(attempts[0]!.error).not.toMatch(/loopback|private|link-local|unique-local|carrier-grade|mapped/);
    expect(probe.received).toHaveLength(0);
  });
});

describe("with ENDPOINT_URL_POLICY=public-https a host without an address at send time", () => {
  it("is a connection error, retried on the schedule, whose logged error does not say the name did not resolve", async () => {
    const world = await h.createWorld();
    const endpoint = await h.createEndpoint(world.id, { url: `https://${MISSING_HOST}/hook` });
    const deliveryId = await h.seedDelivery(endpoint);
    // RETRY_DELAYS=100ms: the first attempt and its one retry, then failed for lack of retries.
    expect((await h.settled(endpoint.id, deliveryId)).status).toBe("failed");
    const attempts = await h.prisma.deliveryAttempt.findMany({ where: { deliveryId }, orderBy: { attemptNumber: "asc" } });
    expect(attempts).toHaveLength(2);
    for (const attempt of attempts) {
      expect(attempt).toMatchObject({ errorKind: "connection", verdict: "retry", responseStatus: null, error: `could not connect to ${MISSING_HOST}` });
    }
  });
});
