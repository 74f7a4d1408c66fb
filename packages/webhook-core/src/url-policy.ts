/**
 * Endpoint URL rules checked when an endpoint is created or its url edited (`ENDPOINT_URL_POLICY`).
 *
 * This is the creation-time half of the SSRF defence: it gives the customer a clear refusal
 * early. It cannot stop DNS rebinding (a name may resolve differently at delivery time), which is
 * why deliveries also go through the connect-time agents of `delivery-agents.ts`.
 */
import { promises as dns } from "node:dns";
import { isIP } from "node:net";
import { classifyAddress, describeAddress } from "./ip-ranges.js";

/** `public-https` (default, production): HTTPS to public addresses only. `any`: development and tests. */
export type EndpointUrlPolicy = "public-https" | "any";

/** The policy used when `ENDPOINT_URL_POLICY` is not set. */
export const DEFAULT_ENDPOINT_URL_POLICY: EndpointUrlPolicy = "public-https";

/** One resolved address, as `dns.promises.lookup(host, { all: true })` returns them. */
export interface ResolvedAddress {
  address: string;
  family?: number;
}

/** Resolves a hostname to every address a connection could use; injectable for tests. */
export type HostResolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/**
 * Result of {@link checkEndpointUrl}: the normalised URL, or a customer-facing reason. For a host
 * name, the reason is the same whether it resolves to a non-public address or does not resolve
 * at all (see {@link notPublicReason}); `detail` then says which, for the server's log only.
 */
export type UrlCheckResult = { ok: true; url: URL } | { ok: false; reason: string; detail?: string };

/**
 * The one refusal of a host name that is not publicly reachable, whether it resolves to a private
 * address, to nothing, or to something invalid: answering differently would let anyone who can
 * create an endpoint (or run a Test) map the platform's internal names.
 */
export function notPublicReason(host: string): string {
  return `${host} is not a public address`;
}

/** The system resolver (getaddrinfo, so /etc/hosts counts), every address of both families. */
export const systemResolver: HostResolver = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

/**
 * Parses the `ENDPOINT_URL_POLICY` value; unset or empty means the production-safe default.
 *
 * @throws Error naming the variable and the allowed values
 */
export function parseEndpointUrlPolicy(value: string | undefined): EndpointUrlPolicy {
  const text = value?.trim() ?? "";
  if (text === "") return DEFAULT_ENDPOINT_URL_POLICY;
  if (text === "public-https" || text === "any") return text;
  throw new Error(`ENDPOINT_URL_POLICY must be "public-https" or "any", got "${text}"`);
}

/**
 * Checks an endpoint URL against the policy.
 *
 * Under `public-https`: scheme https; no user name or password; not `localhost` or a
 * `*.localhost` name; an IP literal, or every address the name resolves to, must be public
 * unicast (see `ip-ranges.ts`). IPv4 literals are judged after WHATWG URL parsing, which
 * normalises decimal, octal and hex spellings (`https://2130706433/`, `https://0177.0.0.1/`
 * both become 127.0.0.1). A name that does not resolve is refused: it is not reachable. A name
 * is refused with one reason whatever the resolver said ({@link notPublicReason}); what it said
 * is in `detail`, for the server's log.
 *
 * Under `any`: http or https with any host.
 *
 * @param resolver defaults to {@link systemResolver}
 */
export async function checkEndpointUrl(
  url: string | URL,
  policy: EndpointUrlPolicy,
  resolver: HostResolver = systemResolver,
): Promise<UrlCheckResult> {
  let parsed: URL;
  try {
    parsed = new URL(String(url));
  } catch {
    return { ok: false, reason: "not a valid absolute URL" };
  }

  if (policy === "any") {
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      return { ok: false, reason: "the URL must use http or https" };
    }
    return { ok: true, url: parsed };
  }

  if (parsed.protocol !== "https:") return { ok: false, reason: "the URL must use https" };
  if (parsed.username !== "" || parsed.password !== "") {
    // Credentials in the URL would be stored and shown in delivery logs; receivers verify signatures instead.
    return { ok: false, reason: "the URL must not contain a user name or password" };
  }

  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  const name = host.replace(/\.$/, "").toLowerCase();
  if (name === "localhost" || name.endsWith(".localhost")) {
    return { ok: false, reason: "localhost is not reachable from the internet" };
  }

  if (isIP(host) !== 0) {
    const verdict = classifyAddress(host);
    return verdict.public ? { ok: true, url: parsed } : { ok: false, reason: `${describeAddress(host, verdict)}; only public addresses are allowed` };
  }

  const refused = (detail: string): UrlCheckResult => ({ ok: false, reason: notPublicReason(host), detail: `the host name ${host} ${detail}` });
  let addresses: readonly ResolvedAddress[];
  try {
    addresses = await resolver(host);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return refused(`does not resolve${typeof code === "string" ? ` (${code})` : ""}`);
  }
  if (addresses.length === 0) return refused("does not resolve (no address)");
  for (const { address } of addresses) {
    // One private answer is enough to refuse: a connection may use any of them.
    const verdict = isIP(address.replace(/%.*$/, "")) === 0 ? null : classifyAddress(address);
    if (verdict === null) return refused(`resolves to an invalid address: ${address}`);
    if (!verdict.public) return refused(`resolves to a non-public address: ${describeAddress(address, verdict)}`);
  }
  return { ok: true, url: parsed };
}
