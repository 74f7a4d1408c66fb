/**
 * URL-policy refusals are no DNS oracle: at creation, a host name that resolves to a private address
 * and one that does not resolve at all get the same answer. In the Test action (its answer and the
 * attempt kept in the history) the first is refused and the second, like any send to a name
 * without an address, could not connect; neither says what DNS said, which is in the server's log
 * only.
 */
import type { LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { HostResolver } from "@vw/webhook-core";
import { startAdminApi, type AdminApiHarness } from "../test/harness.js";
import { PUBLIC_ADDRESS, worldWithEndpoints } from "../test/endpoint-fixtures.js";

/** One DNS zone for both the creation check and the Test's connections, changed by the tests. */
const zone = new Map<string, string>();
const resolveHost: HostResolver = async (hostname) => {
  const address = zone.get(hostname);
  if (address === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return [{ address, family: address.includes(":") ? 6 : 4 }];
};
const deliveryLookup: LookupFunction = (hostname, options, callback) => {
  const address = zone.get(hostname);
  if (address === undefined) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), "", 4);
  const answer: LookupAddress = { address, family: address.includes(":") ? 6 : 4 };
  return options.all ? callback(null, [answer]) : callback(null, answer.address, answer.family);
};

let api: AdminApiHarness;
beforeAll(async () => {
  api = await startAdminApi({ endpointUrlPolicy: "public-https", resolveHost, deliveryLookup });
});
afterAll(async () => {
  await api.close();
});

const HOST = "vm.internal-probe.example";
const detailsLogged = () => api.logs.filter((l) => l.level === "warn").map((l) => JSON.stringify(l.fields));

describe("at creation", () => {
  it("answers a name that resolves to a private address exactly like a name that does not resolve, and logs which", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    zone.set(HOST, "127.0.0.1");
    const privateName = await api.request("POST", endpoints, { body: { url: `https://${HOST}/hook`, subscriptions: ["visitor"] } });
    zone.delete(HOST);
    const missingName = await api.request("POST", endpoints, { body: { url: `https://${HOST}/hook`, subscriptions: ["visitor"] } });
    expect(privateName.status).toBe(400);
    expect(privateName.body).toEqual(missingName.body);
    expect(privateName.body.errors).toEqual([{ pointer: "/url", detail: `is refused by ENDPOINT_URL_POLICY=public-https: ${HOST} is not a public address` }]);
    expect(privateName.text).not.toMatch(/127\.0\.0\.1|loopback|resolve/);
    const logged = detailsLogged().join("\n");
    expect(logged).toContain(`${HOST} resolves to a non-public address: 127.0.0.1 is a loopback address`);
    expect(logged).toContain(`${HOST} does not resolve (ENOTFOUND)`);
  });
});

describe("in the Test action", () => {
  it("answers a name that now resolves to a private address with the generic refusal, one that no longer resolves with 'could not connect', neither saying what DNS said", async () => {
    const { endpoints } = await worldWithEndpoints(api);
    zone.set(HOST, PUBLIC_ADDRESS);
    const created = await api.request("POST", endpoints, { body: { url: `https://${HOST}/hook`, subscriptions: ["visitor"] } });
    expect(created.status).toBe(201);
    const test = `${endpoints}/${created.body.id}/test`;

    zone.set(HOST, "10.1.2.3");
    const privateName = await api.request("POST", test, { body: {} });
    zone.delete(HOST);
    const missingName = await api.request("POST", test, { body: {} });

    expect(privateName.status).toBe(200);
    expect(privateName.body).toMatchObject({ status: null, verdict: "rejected", error: `connection to ${HOST} refused by ENDPOINT_URL_POLICY: ${HOST} is not a public address` });
    // A name without an address is a connection error, as for a delivery (which retries it).
    expect(missingName.status).toBe(200);
    expect(missingName.body).toMatchObject({ status: null, verdict: "retry", error: `could not connect to ${HOST}` });

    const kinds: unknown[] = [];
    for (const answer of [privateName, missingName]) {
      expect(JSON.stringify(answer.body)).not.toMatch(/10\.1\.2\.3|private address|ENOTFOUND|resolve/);
      const delivery = await api.request("GET", `${endpoints}/${created.body.id}/deliveries/${answer.body.deliveryId}`);
      expect(delivery.body.attempts).toEqual([expect.objectContaining({ error: answer.body.error, verdict: answer.body.verdict })]);
      expect(JSON.stringify(delivery.body)).not.toMatch(/10\.1\.2\.3|private address|ENOTFOUND|resolve/);
      kinds.push(delivery.body.attempts[0].errorKind);
    }
    expect(kinds).toEqual(["refused-by-policy", "connection"]);
    const logged = detailsLogged().join("\n");
    expect(logged).toContain(`${HOST}: 10.1.2.3 is a private address`);
    expect(logged).toContain(`${HOST} does not resolve (ENOTFOUND)`);
  });
});
