import { describe, expect, it } from "@jest/globals";
import { checkEndpointUrl, parseEndpointUrlPolicy, type HostResolver, type ResolvedAddress } from "./url-policy.js";

/** A fake DNS: every name it knows resolves to the listed addresses; others fail like ENOTFOUND. */
function fakeResolver(table: Record<string, string[]>): HostResolver & { asked: string[] } {
  const asked: string[] = [];
  const resolver = async (hostname: string): Promise<ResolvedAddress[]> => {
    asked.push(hostname);
    const answers = table[hostname];
    if (!answers) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return answers.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(resolver, { asked });
}

const dns = fakeResolver({
  "hooks.example.com": ["93.184.216.34"],
  "v6.example.com": ["2606:2800:220:1:248:1893:25c8:1946"],
  "both.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
  "internal.example.com": ["10.0.0.1"],
  "mixed.example.com": ["93.184.216.34", "10.0.0.1"],
  "mixed-v6.example.com": ["93.184.216.34", "fd00::1"],
  "metadata.example.com": ["169.254.169.254"],
  "mapped.example.com": ["::ffff:127.0.0.1"],
  "nat64.example.com": ["64:ff9b::a00:1"],
  "empty.example.com": [],
});

describe("checkEndpointUrl under public-https", () => {
  it.each([
    ["https://hooks.example.com/webhooks", "https://hooks.example.com/webhooks"],
    ["https://HOOKS.example.com:8443/a?b=c", "https://hooks.example.com:8443/a?b=c"],
    ["https://v6.example.com/", "https://v6.example.com/"],
    ["https://both.example.com/", "https://both.example.com/"],
    ["https://93.184.216.34/hook", "https://93.184.216.34/hook"],
    ["https://[2606:4700:4700::1111]/hook", "https://[2606:4700:4700::1111]/hook"],
  ])("accepts %s", async (input, normalised) => {
    const result = await checkEndpointUrl(input, "public-https", dns);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.url.href).toBe(normalised);
  });

  it.each([
    ["http://hooks.example.com/", /must use https/],
    ["ftp://hooks.example.com/", /must use https/],
    ["not a url", /not a valid absolute URL/],
    ["https://user:pass@hooks.example.com/", /user name or password/],
    ["https://user@hooks.example.com/", /user name or password/],
    ["https://localhost/", /localhost/],
    ["https://LOCALHOST./", /localhost/],
    ["https://api.localhost/", /localhost/],
    ["https://127.0.0.1/", /^127\.0\.0\.1 is a loopback address; only public addresses are allowed$/],
    ["https://2130706433/", /127\.0\.0\.1 is a loopback address/],
    ["https://0177.0.0.1/", /127\.0\.0\.1 is a loopback address/],
    ["https://0x7f.0.0.1/", /127\.0\.0\.1 is a loopback address/],
    ["https://0x7f000001/", /127\.0\.0\.1 is a loopback address/],
    ["https://127.1/", /127\.0\.0\.1 is a loopback address/],
    ["https://012.0.0.1/", /10\.0\.0\.1 is a private address/],
    ["https://0/", /0\.0\.0\.0 is an unspecified address/],
    ["https://10.1.2.3/", /private/],
    ["https://172.16.0.1/", /private/],
    ["https://192.168.0.10/", /private/],
    ["https://169.254.169.254/latest/meta-data", /link-local/],
    ["https://100.64.0.1/", /carrier-grade-nat/],
    ["https://224.0.0.1/", /multicast/],
    ["https://255.255.255.255/", /broadcast/],
    ["https://192.0.2.1/", /documentation/],
    ["https://[::1]/", /::1 is a loopback address/],
    ["https://[fe80::1]/", /link-local/],
    ["https://[fd00::1]/", /unique-local/],
    ["https://[::ffff:127.0.0.1]/", /an ipv4-mapped IPv6 address embedding the loopback address 127\.0\.0\.1/],
    ["https://[::ffff:10.0.0.1]/", /embedding the private address 10\.0\.0\.1/],
    ["https://[64:ff9b::10.0.0.1]/", /nat64 IPv6 address embedding the private address 10\.0\.0\.1/],
  ])("refuses %s", async (input, reason) => {
    const result = await checkEndpointUrl(input, "public-https", dns);
    expect(result).toEqual({ ok: false, reason: expect.stringMatching(reason) });
  });

  it.each([
    ["https://internal.example.com/", "internal.example.com", /internal\.example\.com resolves to a non-public address: 10\.0\.0\.1 is a private address/],
    ["https://mixed.example.com/", "mixed.example.com", /resolves to a non-public address: 10\.0\.0\.1/],
    ["https://mixed-v6.example.com/", "mixed-v6.example.com", /resolves to a non-public address: fd00::1 is a unique-local address/],
    ["https://metadata.example.com/", "metadata.example.com", /169\.254\.169\.254 is a link-local/],
    ["https://mapped.example.com/", "mapped.example.com", /embedding the loopback address 127\.0\.0\.1/],
    ["https://nat64.example.com/", "nat64.example.com", /embedding the private address 10\.0\.0\.1/],
    ["https://unknown.example.com/", "unknown.example.com", /does not resolve \(ENOTFOUND\)/],
    ["https://empty.example.com/", "empty.example.com", /does not resolve \(no address\)/],
  ])("refuses the name of %s with the one generic reason, keeping what DNS said for the log", async (input, host, detail) => {
    const result = await checkEndpointUrl(input, "public-https", dns);
    expect(result).toEqual({ ok: false, reason: `${host} is not a public address`, detail: expect.stringMatching(detail) });
  });

  it("gives a name that resolves to a private address and a name that does not resolve the same answer", async () => {
    const [privateName, missingName] = await Promise.all([
      checkEndpointUrl("https://vm.example.com/", "public-https", fakeResolver({ "vm.example.com": ["127.0.0.1"] })),
      checkEndpointUrl("https://vm.example.com/", "public-https", fakeResolver({})),
    ]);
    expect(privateName.ok || missingName.ok).toBe(false);
    if (!privateName.ok && !missingName.ok) {
      expect(privateName.reason).toBe(missingName.reason);
      expect(privateName.reason).not.toMatch(/127|loopback|resolve/);
    }
  });

  it("judges IP literals itself and never asks DNS about them or about localhost", async () => {
    const resolver = fakeResolver({});
    await checkEndpointUrl("https://2130706433/", "public-https", resolver);
    await checkEndpointUrl("https://[::1]/", "public-https", resolver);
    await checkEndpointUrl("https://93.184.216.34/", "public-https", resolver);
    await checkEndpointUrl("https://localhost/", "public-https", resolver);
    expect(resolver.asked).toEqual([]);
  });

  it("asks the resolver for the host name without brackets, port or trailing path", async () => {
    const resolver = fakeResolver({ "hooks.example.com": ["93.184.216.34"] });
    await checkEndpointUrl("https://hooks.example.com:8443/x/y", "public-https", resolver);
    expect(resolver.asked).toEqual(["hooks.example.com"]);
  });

  it("never leaks the URL's password into the reason", async () => {
    const result = await checkEndpointUrl("https://u:s3cr3t-pass@hooks.example.com/", "public-https", dns);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).not.toContain("s3cr3t-pass");
  });
});

describe("checkEndpointUrl under any", () => {
  it.each(["http://127.0.0.1:3000/hook", "http://localhost/", "https://10.0.0.1/", "http://user:pw@internal.example.com/"])(
    "accepts %s without asking DNS",
    async (input) => {
      const resolver = fakeResolver({});
      const result = await checkEndpointUrl(input, "any", resolver);
      expect(result.ok).toBe(true);
      expect(resolver.asked).toEqual([]);
    },
  );

  it.each(["ftp://example.com/", "file:///etc/passwd", "javascript:alert(1)", "nope"])("still refuses %s", async (input) => {
    expect((await checkEndpointUrl(input, "any", fakeResolver({}))).ok).toBe(false);
  });
});

describe("parseEndpointUrlPolicy", () => {
  it("defaults to public-https when unset or empty", () => {
    expect(parseEndpointUrlPolicy(undefined)).toBe("public-https");
    expect(parseEndpointUrlPolicy("  ")).toBe("public-https");
  });

  it("accepts the two values", () => {
    expect(parseEndpointUrlPolicy("any")).toBe("any");
    expect(parseEndpointUrlPolicy("public-https")).toBe("public-https");
  });

  it("refuses anything else naming the variable", () => {
    expect(() => parseEndpointUrlPolicy("public")).toThrow(/ENDPOINT_URL_POLICY.*"public"/);
  });
});
