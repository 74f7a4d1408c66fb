/**
 * DELIVERY_PROXY_URL against a real forward proxy (Debian's tinyproxy, started here on a free
 * port) and real receivers named by host name (an injected DNS maps `receiver.test` to
 * 127.0.0.1), over https (a self-signed certificate trusted through the agents' `ca`) and plain
 * http. What the proxy was asked for is read from its own log; the receivers verify every
 * delivery with `standardwebhooks`.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, selfSignedCertificate, startForwardProxy, startWebhookReceiver, type ForwardProxy, type TlsCertificate, type WebhookReceiver } from "@vw/testing";
import { sendAttempt, type AttemptRecord } from "./attempt.js";
import { createDeliveryAgents, destroyDeliveryAgents, type DeliveryAgents } from "./delivery-agents.js";
import { parseDeliveryProxyUrl } from "./delivery-proxy.js";
import { closedPort, fakeLookup } from "./loopback-receiver.test-helper.js";
import { generateSecret } from "./signing.js";
import type { EndpointUrlPolicy } from "./url-policy.js";

const secret = generateSecret();
const body = Buffer.from('{"type":"ping","data":{}}');
const lookup = fakeLookup({ "receiver.test": ["127.0.0.1"], "private.test": ["10.1.2.3"] });
const CREDENTIALS = { user: "deliveries", password: "pr0xy-s3cret" };

let cert: TlsCertificate;
let httpsReceiver: WebhookReceiver;
let httpReceiver: WebhookReceiver;
let proxy: ForwardProxy;
let authProxy: ForwardProxy;
const created: DeliveryAgents[] = [];
const proxies: ForwardProxy[] = [];

beforeAll(async () => {
  cert = await selfSignedCertificate(["receiver.test"]);
  [httpsReceiver, httpReceiver, proxy, authProxy] = await Promise.all([
    startWebhookReceiver({ secret, tls: cert, answer: 200 }),
    startWebhookReceiver({ secret, answer: 200 }),
    startForwardProxy(),
    startForwardProxy({ basicAuth: CREDENTIALS }),
  ]);
  proxies.push(proxy, authProxy);
});
afterAll(async () => {
  created.forEach(destroyDeliveryAgents);
  await Promise.all([httpsReceiver.close(), httpReceiver.close(), ...proxies.map((p) => p.stop())]);
});

/** Agents that trust only the receiver's self-signed certificate, going through `proxyUrl`. */
function agentsVia(proxyUrl: string, policy: EndpointUrlPolicy = "any"): DeliveryAgents {
  const agents = createDeliveryAgents(policy, { lookup, proxy: parseDeliveryProxyUrl(proxyUrl), agentOptions: { ca: cert.cert } });
  created.push(agents);
  return agents;
}

function attempt(url: string, agents: DeliveryAgents, timeoutMs = 10_000): Promise<AttemptRecord> {
  return sendAttempt({ url, deliveryId: "msg_proxy", attemptNumber: 1, trigger: "initial", body, secret, agents, timeoutMs, headers: { Authorization: "Bearer gw" } });
}

const httpsUrl = () => `https://receiver.test:${httpsReceiver.port}/hook`;
const httpUrl = () => `http://receiver.test:${httpReceiver.port}/hook`;

describe("DELIVERY_PROXY_URL: https through a CONNECT tunnel", () => {
  it("asks the proxy for the resolved address, and checks the receiver's certificate against the endpoint's host name", async () => {
    const before = httpsReceiver.received.length;
    const sent = await attempt(httpsUrl(), agentsVia(proxy.url));
    expect(sent).toMatchObject({ verdict: "delivered", responseStatus: 200, errorKind: null });
    const [got] = httpsReceiver.received.slice(before);
    expect(got?.verifyError).toBeNull();
    expect(got?.headers.authorization).toBe("Bearer gw");
    // The tunnel went to the address, never to the name: the proxy cannot resolve it differently.
    await eventually("the proxy logged the CONNECT", () => proxy.requests().includes(`CONNECT 127.0.0.1:${httpsReceiver.port} HTTP/1.1`));
    expect(proxy.log()).not.toContain("receiver.test");
  });

  it("refuses a certificate that does not name the endpoint's host, though the tunnel reached the right address", async () => {
    const other = await selfSignedCertificate(["other.test"]);
    const impostor = await startWebhookReceiver({ secret, tls: other, answer: 200 });
    try {
      const agents = createDeliveryAgents("any", { lookup, proxy: parseDeliveryProxyUrl(proxy.url), agentOptions: { ca: [cert.cert, other.cert] } });
      created.push(agents);
      const sent = await attempt(`https://receiver.test:${impostor.port}/hook`, agents);
      expect(sent).toMatchObject({ verdict: "retry", errorKind: "connection", responseStatus: null });
      expect(sent.error).toMatch(/altnames|receiver\.test/i);
      expect(impostor.received).toHaveLength(0);
    } finally {
      await impostor.close();
    }
  });

  it("keeps the tunnel alive between attempts to one receiver", async () => {
    const agents = agentsVia(proxy.url);
    const connectsBefore = proxy.requests().length;
    for (let i = 0; i < 3; i += 1) expect((await attempt(httpsUrl(), agents)).verdict).toBe("delivered");
    expect(proxy.requests().length - connectsBefore).toBe(1);
  });
});

describe("DELIVERY_PROXY_URL: plain http in absolute form", () => {
  it("POSTs http://<resolved address>:<port>/path to the proxy, which forwards it", async () => {
    const before = httpReceiver.received.length;
    const sent = await attempt(httpUrl(), agentsVia(proxy.url));
    expect(sent).toMatchObject({ verdict: "delivered", responseStatus: 200 });
    const [got] = httpReceiver.received.slice(before);
    expect(got?.verifyError).toBeNull();
    expect(got?.headers.authorization).toBe("Bearer gw");
    // tinyproxy's mark on what it forwarded: the request really went through it.
    expect(got?.headers.via).toMatch(/tinyproxy/);
    await eventually("the proxy logged the absolute-form POST", () => proxy.requests().includes(`POST http://127.0.0.1:${httpReceiver.port}/hook HTTP/1.1`));
    expect(proxy.log()).not.toContain("receiver.test");
  });

  it("takes a receiver's own error answer (forwarded, with Via) as the receiver's", async () => {
    httpReceiver.answerWith(400);
    try {
      const sent = await attempt(httpUrl(), agentsVia(proxy.url));
      expect(sent).toMatchObject({ verdict: "rejected", responseStatus: 400, errorKind: null });
    } finally {
      httpReceiver.answerWith(200);
    }
  });
});

describe("DELIVERY_PROXY_URL: credentials", () => {
  it.each([
    ["https", httpsUrl],
    ["http", httpUrl],
  ])("sends them as Proxy-Authorization only, over %s; neither the record nor the receiver sees them", async (_scheme, url) => {
    const receiver = url === httpsUrl ? httpsReceiver : httpReceiver;
    const before = receiver.received.length;
    const sent = await attempt(url(), agentsVia(authProxy.url));
    expect(sent.verdict).toBe("delivered");
    const basic = Buffer.from(`${CREDENTIALS.user}:${CREDENTIALS.password}`).toString("base64");
    for (const text of [JSON.stringify(sent), JSON.stringify(receiver.received.slice(before))]) {
      expect(text).not.toContain(CREDENTIALS.password);
      expect(text).not.toContain(basic);
      expect(text.toLowerCase()).not.toContain("proxy-authorization");
    }
  });

  it.each([
    ["https", httpsUrl],
    ["http", httpUrl],
  ])("a proxy refusing them fails the attempt as a connection error, retried, without leaking them (%s)", async (_scheme, url) => {
    const wrong = `http://${CREDENTIALS.user}:not-the-password@127.0.0.1:${authProxy.port}`;
    const sent = await attempt(url(), agentsVia(wrong));
    expect(sent).toMatchObject({ verdict: "retry", errorKind: "connection", responseStatus: null, responseBody: null });
    // tinyproxy answers a CONNECT without valid credentials 401, an absolute-form request 407.
    expect(sent.error).toMatch(/^could not connect to receiver\.test: the delivery proxy refused \((401 Unauthorized|407 Proxy Authentication Required)\)$/);
    expect(sent.errorDetail).toContain(`127.0.0.1:${authProxy.port}`);
    // The platform's egress refused: the receiver was never tried, so it is not the receiver's failure.
    expect(sent.egressFailure).toBe(true);
    expect(JSON.stringify(sent)).not.toContain("not-the-password");
  });
});

describe("DELIVERY_PROXY_URL: a proxy that cannot carry the attempt", () => {
  it("refusing the tunnel's port (403) is a connection failure of the attempt", async () => {
    const strict = await startForwardProxy({ connectPorts: [443] });
    proxies.push(strict);
    const sent = await attempt(httpsUrl(), agentsVia(strict.url));
    expect(sent).toMatchObject({ verdict: "retry", errorKind: "connection", responseStatus: null, error: "could not connect to receiver.test: the delivery proxy refused (403 Forbidden)", egressFailure: true });
  });

  it.each([
    ["http", (port: number) => `http://receiver.test:${port}/hook`],
    ["https", (port: number) => `https://receiver.test:${port}/hook`],
  ])("failing to reach the receiver itself (%s: its own error answer, no Via) is the receiver's connection failure", async (_scheme, url) => {
    const closed = await closedPort();
    const sent = await attempt(url(closed), agentsVia(proxy.url));
    expect(sent).toMatchObject({ verdict: "retry", errorKind: "connection", responseStatus: null, responseBody: null });
    expect(sent.error).toMatch(/^could not connect to receiver\.test through the delivery proxy \(5\d\d [A-Za-z ]+\)$/);
    // The proxy did its part: this one is the receiver's, and counts like any unreachable receiver.
    expect(sent.egressFailure).toBeUndefined();
  });

  it("down: a connection failure whose text names neither the proxy's address nor its credentials", async () => {
    const gone = await startForwardProxy({ basicAuth: CREDENTIALS });
    const agents = agentsVia(gone.url);
    expect((await attempt(httpsUrl(), agents)).verdict).toBe("delivered");
    await gone.stop();
    for (const url of [httpsUrl(), httpUrl()]) {
      const sent = await attempt(url, agents);
      expect(sent).toMatchObject({ verdict: "retry", errorKind: "connection", error: "could not connect to receiver.test: the delivery proxy could not be reached", egressFailure: true });
      expect(sent.errorDetail).toMatch(new RegExp(`^delivery proxy 127\\.0\\.0\\.1:${gone.port}: `));
      expect(`${sent.error} ${sent.errorDetail}`).not.toContain(CREDENTIALS.password);
    }
  });

  it("silent (accepts, never answers the CONNECT): the attempt's own timeout ends it", async () => {
    const silent = await silentServer();
    try {
      const sent = await attempt(httpsUrl(), agentsVia(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`), 300);
      expect(sent).toMatchObject({ verdict: "retry", errorKind: "timeout" });
    } finally {
      silent.close();
    }
  });
});

describe("DELIVERY_PROXY_URL keeps the address policy (public-https)", () => {
  it.each([
    ["a name resolving to a private address", "https://private.test/hook"],
    ["a name resolving to loopback", () => httpsUrl()],
    ["a private IP literal", "https://10.9.8.7/hook"],
  ])("refuses %s before asking the proxy anything", async (_case, url) => {
    const watched = await startForwardProxy();
    proxies.push(watched);
    const sent = await attempt(typeof url === "string" ? url : url(), agentsVia(watched.url, "public-https"));
    expect(sent).toMatchObject({ verdict: "rejected", errorKind: "refused-by-policy" });
    expect(sent.error).toMatch(/is not a public address$/);
    expect(watched.requests()).toEqual([]);
  });
});

/** A TCP server that accepts connections and never says a word (a hung proxy). */
async function silentServer(): Promise<Server> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const close = server.close.bind(server);
  server.close = (callback?: (err?: Error) => void) => {
    for (const socket of sockets) socket.destroy();
    return close(callback);
  };
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}
