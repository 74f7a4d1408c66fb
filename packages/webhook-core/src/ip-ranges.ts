/**
 * Which IP addresses a webhook may be delivered to under the `public-https` policy: public
 * unicast only.
 *
 * The table covers every range that `request-filtering-agent` 3.2.1 refuses at connect time (it
 * asks ipaddr.js 2.5 for `range() !== "unicast"`), plus the deprecated IPv4-compatible IPv6 block
 * `::/96`, so a URL accepted at creation is never refused later for an address reason the
 * creation check did not know. `ip-ranges.test.ts` cross-checks both tables.
 *
 * IPv6 forms that carry an IPv4 address (mapped, translated, compatible, NAT64, 6to4) are refused
 * as a whole (the connect-time agent refuses them too); the embedded IPv4 is still judged so the
 * reason names it when it is private.
 */
import { BlockList, isIP } from "node:net";

/** Name of a special-purpose range (RFC 6890 and successors). */
export type SpecialRangeName =
  | "unspecified"
  | "private"
  | "carrier-grade-nat"
  | "loopback"
  | "link-local"
  | "ietf-protocol-assignments"
  | "documentation"
  | "6to4-relay-anycast"
  | "benchmarking"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "as112"
  | "amt"
  | "ipv4-mapped"
  | "ipv4-translated"
  | "ipv4-compatible"
  | "nat64"
  | "nat64-local"
  | "discard"
  | "6to4"
  | "segment-routing"
  | "unique-local"
  | "site-local";

interface RangeEntry {
  name: SpecialRangeName;
  list: BlockList;
  /** Where an embedded IPv4 address sits in the 16 bytes of an IPv6 address. */
  embeddedIpv4At?: number;
}

/** Verdict on one address. */
export type AddressVerdict =
  | { readonly public: true }
  | {
      readonly public: false;
      /** The special range the address is in. */
      readonly range: SpecialRangeName;
      /** For IPv6 forms carrying an IPv4 address: that address and its own verdict. */
      readonly embeddedIpv4?: string;
      readonly embeddedRange?: SpecialRangeName;
    };

// Order matters: the first matching entry names the range, so specific blocks come first.
const IPV4_TABLE: ReadonlyArray<[SpecialRangeName, string]> = [
  ["unspecified", "0.0.0.0/8"],
  ["private", "10.0.0.0/8"],
  ["carrier-grade-nat", "100.64.0.0/10"],
  ["loopback", "127.0.0.0/8"],
  ["link-local", "169.254.0.0/16"],
  ["private", "172.16.0.0/12"],
  ["ietf-protocol-assignments", "192.0.0.0/24"],
  ["documentation", "192.0.2.0/24"],
  ["6to4-relay-anycast", "192.88.99.0/24"],
  ["private", "192.168.0.0/16"],
  ["benchmarking", "198.18.0.0/15"],
  ["documentation", "198.51.100.0/24"],
  ["documentation", "203.0.113.0/24"],
  ["multicast", "224.0.0.0/4"],
  ["broadcast", "255.255.255.255/32"],
  ["reserved", "240.0.0.0/4"],
  // Public anycast sinks no receiver lives on; listed because the connect-time agent refuses them.
  ["as112", "192.175.48.0/24"],
  ["as112", "192.31.196.0/24"],
  ["amt", "192.52.193.0/24"],
];

const IPV6_TABLE: ReadonlyArray<[SpecialRangeName, string, number?]> = [
  ["unspecified", "::/128"],
  ["loopback", "::1/128"],
  ["ipv4-mapped", "::ffff:0:0/96", 12],
  ["ipv4-translated", "::ffff:0:0:0/96", 12],
  ["ipv4-compatible", "::/96", 12],
  ["nat64", "64:ff9b::/96", 12],
  ["nat64-local", "64:ff9b:1::/48"],
  ["discard", "100::/64"],
  // Covers Teredo, benchmarking, ORCHID, AMT and AS112 assignments inside 2001::/23.
  ["ietf-protocol-assignments", "2001::/23"],
  ["documentation", "2001:db8::/32"],
  ["6to4", "2002::/16", 2],
  ["as112", "2620:4f:8000::/48"],
  ["documentation", "3fff::/20"],
  ["segment-routing", "5f00::/16"],
  ["unique-local", "fc00::/7"],
  ["site-local", "fec0::/10"],
  ["link-local", "fe80::/10"],
  ["multicast", "ff00::/8"],
];

function buildTable(rows: ReadonlyArray<readonly [SpecialRangeName, string, number?]>, type: "ipv4" | "ipv6"): RangeEntry[] {
  return rows.map(([name, cidr, embeddedIpv4At]) => {
    const [network, prefix] = cidr.split("/") as [string, string];
    const list = new BlockList();
    list.addSubnet(network, Number(prefix), type);
    return embeddedIpv4At === undefined ? { name, list } : { name, list, embeddedIpv4At };
  });
}

const V4 = buildTable(IPV4_TABLE, "ipv4");
const V6 = buildTable(IPV6_TABLE, "ipv6");

/** The special ranges as CIDR text, for documentation and diagnostics. */
export const SPECIAL_RANGES: ReadonlyArray<{ readonly name: SpecialRangeName; readonly cidr: string }> = Object.freeze(
  [...IPV4_TABLE, ...IPV6_TABLE].map(([name, cidr]) => Object.freeze({ name, cidr })),
);

/**
 * Classifies an IP address (IPv4 dotted quad or IPv6, optionally with a `%zone`).
 *
 * @throws TypeError when `address` is not an IP address
 */
export function classifyAddress(address: string): AddressVerdict {
  const bare = address.replace(/%.*$/, "");
  const family = isIP(bare);
  if (family === 4) {
    const hit = V4.find((entry) => entry.list.check(bare, "ipv4"));
    return hit ? { public: false, range: hit.name } : { public: true };
  }
  if (family === 6) {
    const hit = V6.find((entry) => entry.list.check(bare, "ipv6"));
    if (!hit) return { public: true };
    if (hit.embeddedIpv4At === undefined) return { public: false, range: hit.name };
    const embeddedIpv4 = ipv6Bytes(bare).subarray(hit.embeddedIpv4At, hit.embeddedIpv4At + 4).join(".");
    const inner = classifyAddress(embeddedIpv4);
    return inner.public
      ? { public: false, range: hit.name, embeddedIpv4 }
      : { public: false, range: hit.name, embeddedIpv4, embeddedRange: inner.range };
  }
  throw new TypeError("not an IP address");
}

/** True when `address` is a public unicast address a webhook may be delivered to. */
export function isPublicAddress(address: string): boolean {
  return classifyAddress(address).public;
}

/** A one-line, log-safe explanation of why `address` is refused (empty for a public one). */
export function describeAddress(address: string, verdict: AddressVerdict = classifyAddress(address)): string {
  if (verdict.public) return "";
  const kind = `${/^(un[^i]|[aeio])/.test(verdict.range) ? "an" : "a"} ${verdict.range}`;
  if (verdict.embeddedIpv4 === undefined) return `${address} is ${kind} address`;
  return verdict.embeddedRange
    ? `${address} is ${kind} IPv6 address embedding the ${verdict.embeddedRange} address ${verdict.embeddedIpv4}`
    : `${address} is ${kind} IPv6 address (use the IPv4 address ${verdict.embeddedIpv4} itself)`;
}

/** Expands an IPv6 text address (with `::` and an optional trailing dotted quad) to 16 bytes. */
function ipv6Bytes(address: string): Buffer {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const [a, b, c, d] = dotted[1].split(".").map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::") as [string, string | undefined];
  const headGroups = head === "" ? [] : head.split(":");
  const tailGroups = tail === undefined || tail === "" ? [] : tail.split(":");
  const missing = 8 - headGroups.length - tailGroups.length;
  const groups = tail === undefined ? headGroups : [...headGroups, ...Array<string>(missing).fill("0"), ...tailGroups];
  const bytes = Buffer.alloc(16);
  groups.forEach((group, i) => bytes.writeUInt16BE(parseInt(group, 16), i * 2));
  return bytes;
}
