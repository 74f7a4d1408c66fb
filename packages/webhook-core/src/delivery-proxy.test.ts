import { describe, expect, it } from "@jest/globals";
import { DeliveryProxyUrlError, parseDeliveryProxyUrl, readDeliveryProxyUrl } from "./delivery-proxy.js";

describe("parseDeliveryProxyUrl", () => {
  it("reads host, port and credentials; the credentials become a Basic Proxy-Authorization", () => {
    expect(parseDeliveryProxyUrl("http://egress.internal:3128")).toEqual({ host: "egress.internal", port: 3128, authorization: null, address: "egress.internal:3128" });
    const withAuth = parseDeliveryProxyUrl("http://deliveries:p%40ss%3Aword@10.0.0.5:8888");
    expect(withAuth.authorization).toBe(`Basic ${Buffer.from("deliveries:p@ss:word").toString("base64")}`);
    expect(withAuth.address).toBe("10.0.0.5:8888");
    expect(parseDeliveryProxyUrl("http://[fd00::5]:3128")).toMatchObject({ host: "fd00::5", address: "[fd00::5]:3128" });
  });

  it.each([
    ["https://egress:3128", /only http is supported/],
    ["http://egress", /port is missing/],
    ["http://egress:3128/path", /no path/],
    ["http://egress:3128/?x=1", /no path, query/],
    ["http://:pw@egress:3128", /password without a user/],
    ["egress:3128", /scheme is egress|not an absolute URL/],
    ["not a url", /not an absolute URL/],
  ])("refuses %s", (text, reason) => {
    expect(() => parseDeliveryProxyUrl(text)).toThrow(DeliveryProxyUrlError);
    expect(() => parseDeliveryProxyUrl(text)).toThrow(reason);
  });
});

describe("readDeliveryProxyUrl (config.ts)", () => {
  it("no variable, no proxy", () => {
    expect(readDeliveryProxyUrl(undefined)).toEqual({ proxy: null, problem: null });
    expect(readDeliveryProxyUrl("  ")).toEqual({ proxy: null, problem: null });
  });

  it("names the variable in its problem and never repeats the password", () => {
    const { proxy, problem } = readDeliveryProxyUrl("https://deliveries:hunter2-secret@egress:3128");
    expect(proxy).toBeNull();
    expect(problem).toMatch(/^DELIVERY_PROXY_URL must be http:\/\/\[user:password@\]host:port/);
    expect(problem).not.toContain("hunter2-secret");
  });
});
