import { describe, expect, it } from "@jest/globals";
import ipaddr from "ipaddr.js";
import { classifyAddress, describeAddress, isPublicAddress } from "./ip-ranges.js";

describe("classifyAddress", () => {
  it.each([
    ["0.0.0.0", "unspecified"],
    ["0.255.255.255", "unspecified"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["100.64.0.1", "carrier-grade-nat"],
    ["100.127.255.254", "carrier-grade-nat"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.169.254", "link-local"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.0.0.8", "ietf-protocol-assignments"],
    ["192.0.2.1", "documentation"],
    ["192.168.1.1", "private"],
    ["198.18.0.1", "benchmarking"],
    ["198.51.100.7", "documentation"],
    ["203.0.113.9", "documentation"],
    ["224.0.0.251", "multicast"],
    ["239.255.255.250", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf:ffff::1", "link-local"],
    ["fc00::1", "unique-local"],
    ["fd12:3456:789a::1", "unique-local"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "documentation"],
    ["fec0::1", "site-local"],
    ["100::1", "discard"],
  ])("refuses %s as %s", (address, range) => {
    expect(classifyAddress(address)).toEqual({ public: false, range });
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.167.255.255",
    "192.169.0.0",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2a00:1450:4007:80e::200e",
    "2001:4860:4860::8888",
  ])("accepts public unicast %s", (address) => {
    expect(classifyAddress(address)).toEqual({ public: true });
  });

  it.each([
    ["::ffff:127.0.0.1", "ipv4-mapped", "127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "ipv4-mapped", "127.0.0.1", "loopback"],
    ["::ffff:10.1.2.3", "ipv4-mapped", "10.1.2.3", "private"],
    ["::ffff:a9fe:a9fe", "ipv4-mapped", "169.254.169.254", "link-local"],
    ["64:ff9b::10.0.0.1", "nat64", "10.0.0.1", "private"],
    ["64:ff9b::a00:1", "nat64", "10.0.0.1", "private"],
    ["64:ff9b::7f00:1", "nat64", "127.0.0.1", "loopback"],
    ["::7f00:1", "ipv4-compatible", "127.0.0.1", "loopback"],
    ["::ffff:0:c0a8:101", "ipv4-translated", "192.168.1.1", "private"],
    ["2002:c0a8:101::1", "6to4", "192.168.1.1", "private"],
  ])("judges the IPv4 address embedded in %s", (address, range, embeddedIpv4, embeddedRange) => {
    expect(classifyAddress(address)).toEqual({ public: false, range, embeddedIpv4, embeddedRange });
    expect(describeAddress(address)).toContain(`${embeddedRange} address ${embeddedIpv4}`);
  });

  it("refuses IPv6 forms embedding a public IPv4 too, naming the IPv4 address to use instead", () => {
    expect(classifyAddress("::ffff:93.184.216.34")).toEqual({ public: false, range: "ipv4-mapped", embeddedIpv4: "93.184.216.34" });
    expect(classifyAddress("64:ff9b::5db8:d822")).toEqual({ public: false, range: "nat64", embeddedIpv4: "93.184.216.34" });
    expect(describeAddress("64:ff9b::5db8:d822")).toContain("use the IPv4 address 93.184.216.34");
  });

  it("throws on something that is not an IP address", () => {
    expect(() => classifyAddress("example.com")).toThrow(TypeError);
    expect(() => classifyAddress("2130706433")).toThrow(TypeError);
  });
});

/**
 * The connect-time agent (request-filtering-agent 3.2.1) refuses what ipaddr.js 2.5 does not call
 * "unicast". Creation and delivery must agree, so every boundary of every ipaddr.js special range,
 * and the addresses just outside it, must get the same answer from both (the one deliberate
 * difference: we also refuse the deprecated IPv4-compatible block ::/96).
 */
describe("agreement with request-filtering-agent's classification (ipaddr.js)", () => {
  type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];
  const specialRanges = (kind: typeof ipaddr.IPv4 | typeof ipaddr.IPv6): Cidr[] => {
    const table = (kind.prototype as unknown as { SpecialRanges: Record<string, Cidr | Cidr[]> }).SpecialRanges;
    return Object.values(table).flatMap((entry) => (Array.isArray(entry[0]) ? (entry as Cidr[]) : [entry as Cidr]));
  };
  const toBig = (addr: ipaddr.IPv4 | ipaddr.IPv6): bigint => addr.toByteArray().reduce((acc, b) => (acc << 8n) | BigInt(b), 0n);
  const fromBig = (value: bigint, bytes: number): string => {
    const out: number[] = [];
    for (let i = 0; i < bytes; i += 1) out.unshift(Number((value >> BigInt(8 * i)) & 0xffn));
    return ipaddr.fromByteArray(out).toString();
  };
  const boundaryAddresses = (): string[] => {
    const out: string[] = [];
    for (const [kind, bytes] of [[ipaddr.IPv4, 4], [ipaddr.IPv6, 16]] as const) {
      const max = (1n << BigInt(bytes * 8)) - 1n;
      for (const [addr, bits] of specialRanges(kind)) {
        const cidr = `${addr.toString()}/${bits}`;
        const first = toBig(kind.networkAddressFromCIDR(cidr));
        const last = toBig(kind.broadcastAddressFromCIDR(cidr));
        for (const v of [first - 1n, first, first + 1n, last - 1n, last, last + 1n]) {
          if (v >= 0n && v <= max) out.push(fromBig(v, bytes));
        }
      }
    }
    return out;
  };
  const agentRefuses = (address: string): boolean => ipaddr.parse(address).range() !== "unicast";
  const inIpv4Compatible = (address: string): boolean =>
    ipaddr.IPv6.isValid(address) && ipaddr.IPv6.parse(address).match(ipaddr.IPv6.parse("::"), 96);

  it("refuses every address the agent refuses at each range boundary, and accepts the same public ones", () => {
    const addresses = boundaryAddresses();
    expect(addresses.length).toBeGreaterThan(200);
    const disagreements = addresses.filter((a) => agentRefuses(a) === isPublicAddress(a) && !(inIpv4Compatible(a) && !isPublicAddress(a)));
    expect(disagreements).toEqual([]);
  });

  it("agrees on 50,000 pseudo-random IPv4 addresses", () => {
    let seed = 12345;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    const disagreements: string[] = [];
    for (let i = 0; i < 50_000; i += 1) {
      const n = next();
      const address = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
      if (agentRefuses(address) === isPublicAddress(address)) disagreements.push(address);
    }
    expect(disagreements).toEqual([]);
  });
});
