/**
 * HTTP agents for deliveries: the connect-time half of the SSRF defence.
 *
 * Under `public-https` the agents come from `request-filtering-agent` 3.2.1, which checks the
 * address every connection actually uses (after DNS, so a name that rebinds to a private address
 * between creation and delivery is still refused). Our own address table (`ip-ranges.ts`) runs
 * first, at the same two points (IP literal host, and every address DNS returns), so creation and
 * delivery refuse exactly the same ranges; the library's check stays as a second line.
 *
 * The agents keep connections alive: deliveries to one receiver reuse sockets.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http from "node:http";
import https from "node:https";
import { Socket, isIP, type LookupFunction, type TcpNetConnectOpts } from "node:net";
import type { Duplex } from "node:stream";
import { RequestFilteringHttpAgent, RequestFilteringHttpsAgent } from "request-filtering-agent";
import { ProxyTunnelAgent, type AddressVetter, type DeliveryProxy } from "./delivery-proxy.js";
import { classifyAddress, describeAddress, type SpecialRangeName } from "./ip-ranges.js";
import type { EndpointUrlPolicy } from "./url-policy.js";

/** The agents a delivery POST goes through, and the policy they were built for. */
export interface DeliveryAgents {
  readonly policy: EndpointUrlPolicy;
  /** Plain http: to the receiver, or to the proxy (absolute-form requests) when {@link proxy} is set. */
  readonly http: http.Agent;
  /** https: to the receiver, or through CONNECT tunnels of the proxy when {@link proxy} is set. */
  readonly https: https.Agent;
  /** Set when deliveries leave through DELIVERY_PROXY_URL. */
  readonly proxy?: ProxyRoute;
}

/** How {@link postDelivery} sends plain http through the proxy: to an address vetted like a direct connection's. */
export interface ProxyRoute {
  readonly proxy: DeliveryProxy;
  /** The address to ask the proxy for: resolved and checked as a direct connection would be (refusals included). */
  readonly vet: AddressVetter;
}

/** Options of {@link createDeliveryAgents}. */
export interface DeliveryAgentOptions {
  /** Extra `http.Agent` options (keep-alive is always on); `ca` here is what receivers' certificates are checked against. */
  agentOptions?: https.AgentOptions;
  /** DNS lookup used for connections (default `dns.lookup`); injectable to test rebinding. */
  lookup?: LookupFunction;
  /**
   * DELIVERY_PROXY_URL, parsed ({@link parseDeliveryProxyUrl}): every connection to a receiver
   * goes through it, to the address this process resolved and vetted. Null or absent: direct.
   */
  proxy?: DeliveryProxy | null;
}

/** Code of the error our own connect-time check raises (got keeps it as the RequestError's code). */
export const ADDRESS_REFUSED_CODE = "ERR_ADDRESS_REFUSED_BY_POLICY";

/**
 * A connection refused because its host is not publicly reachable: it resolved to an address that
 * is not public unicast (`address` and `range` say which). The message names neither: it reaches
 * delivery logs that customers read. {@link AddressRefusedError.detail} says what happened, for
 * the server's log only.
 */
export class AddressRefusedError extends Error {
  override readonly name = "AddressRefusedError";
  readonly code = ADDRESS_REFUSED_CODE;
  constructor(
    readonly host: string,
    /** What was refused: the address and its range, or why the name gave none. */
    readonly detail: string,
    readonly address: string | null = null,
    readonly range: SpecialRangeName | null = null,
  ) {
    super(`connection to ${host} refused by ENDPOINT_URL_POLICY: ${host} is not a public address`);
  }

  /** The refusal of `address` (resolved from `host`, or `host` itself), which is not public. */
  static ofAddress(address: string, range: SpecialRangeName, host: string): AddressRefusedError {
    return new AddressRefusedError(host, `${host}: ${describeAddress(address)}`, address, range);
  }
}

/** Code of {@link UnresolvedHostError} (got keeps it as the RequestError's code). */
export const HOST_UNRESOLVED_CODE = "ERR_HOST_UNRESOLVED";

/**
 * Resolver answers that mean "this name has no address now" (NXDOMAIN, no record of the family).
 * At send time they are connection errors, retried like any other: a customer's DNS zone that
 * briefly answers NXDOMAIN must not cost deliveries, and a name that never resolved, or resolved
 * only inside the platform's network, could not have been saved under `public-https` anyway.
 */
const NO_ADDRESS_CODES = new Set(["ENOTFOUND", "ENODATA"]);

/**
 * A connection not made because its host name had no address (under `public-https`). Its message
 * says only that the connection could not be made, not that the name did not resolve, so a
 * delivery log does not say which names exist; {@link UnresolvedHostError.detail} does, for the
 * server's log only. Not a policy refusal: {@link isPolicyRefusal} is false and the attempt is
 * retried.
 */
export class UnresolvedHostError extends Error {
  override readonly name = "UnresolvedHostError";
  readonly code = HOST_UNRESOLVED_CODE;
  /** What the resolver said, for the server's log only. */
  readonly detail: string;
  constructor(
    readonly host: string,
    resolverCode: string,
  ) {
    super(`could not connect to ${host}`);
    this.detail = `${host} does not resolve (${resolverCode})`;
  }
}

/**
 * Builds the delivery agents for a policy: address-filtering keep-alive agents under
 * `public-https`, plain keep-alive agents under `any`.
 *
 * Both agents of the `public-https` pair filter addresses. Plain http is refused before any
 * connection by {@link postDelivery}, which reads `policy` from the returned object.
 *
 * With `proxy`, the same addresses are resolved and refused before the proxy is asked for the
 * vetted address (delivery-proxy.ts): https through CONNECT tunnels, plain http in absolute form.
 */
export function createDeliveryAgents(policy: EndpointUrlPolicy, options: DeliveryAgentOptions = {}): DeliveryAgents {
  const base: https.AgentOptions = { ...options.agentOptions, keepAlive: true };
  if (options.proxy) {
    const vet = addressVetter(policy, options.lookup);
    // Connections to the proxy itself: a plain agent and the system resolver, as the proxy is the
    // operator's own host, usually on a private address that the policy would refuse.
    return { policy, http: new http.Agent(base), https: new ProxyTunnelAgent(base, options.proxy, vet), proxy: { proxy: options.proxy, vet } };
  }
  if (policy === "any") {
    const lookup = options.lookup;
    const withLookup = lookup ? { ...base, lookup } : base;
    return { policy, http: new http.Agent(withLookup), https: new https.Agent(withLookup) };
  }
  const lookup = policyLookup(options.lookup ?? (dnsLookup as LookupFunction));
  // allowPrivateIPAddress false refuses every non-unicast range; meta addresses (0.0.0.0, ::) too.
  const filter = { allowPrivateIPAddress: false, allowMetaIPAddress: false, allowIPAddressList: [], denyIPAddressList: [] };
  return {
    policy,
    http: new PolicyHttpAgent({ ...base, ...filter }, lookup),
    https: new PolicyHttpsAgent({ ...base, ...filter }, lookup),
  };
}

/** Closes every socket the agents hold (call on shutdown). */
export function destroyDeliveryAgents(agents: DeliveryAgents): void {
  agents.http.destroy();
  agents.https.destroy();
}

/**
 * True when `err` (or an error in its `cause` chain) is a connect-time policy refusal: ours
 * ({@link AddressRefusedError}) or request-filtering-agent's. With got 14 the latter surfaces as
 * `ERR_GOT_REQUEST_ERROR` with a message such as `DNS lookup 127.0.0.1(family:4, host:localhost)
 * is not allowed. Because, It is private IP address.`: a refusal, not a connection error, so it
 * must not be retried.
 */
export function isPolicyRefusal(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    if (current instanceof AddressRefusedError) return true;
    if ((current as { code?: unknown }).code === ADDRESS_REFUSED_CODE) return true;
    if (LIBRARY_REFUSAL.test(current.message)) return true;
    current = current.cause;
  }
  return false;
}

/** request-filtering-agent's refusal message. */
const LIBRARY_REFUSAL = /^DNS lookup .+ is not allowed\. Because,? It is (private IP address|meta IP address|defined in denyIPAddressList)/;

/**
 * A policy refusal as customers may see it (delivery logs, the Test answer, the auth hook's
 * history): `<host> is not a public address`, without the address or what the resolver said;
 * `detail` keeps that for the server's log. Null when `err` is not a policy refusal.
 */
export function describePolicyRefusal(err: unknown, host: string): { message: string; detail: string } | null {
  // Ours first, wherever it is in the chain (got wraps it in a RequestError that copies its code).
  const chain: Error[] = [];
  for (let current: unknown = err; chain.length < 5 && current instanceof Error; current = current.cause) chain.push(current);
  const ours = chain.find((e): e is AddressRefusedError => e instanceof AddressRefusedError);
  if (ours) return { message: ours.message, detail: ours.detail };
  const theirs = chain.find((e) => (e as { code?: unknown }).code === ADDRESS_REFUSED_CODE || LIBRARY_REFUSAL.test(e.message));
  return theirs ? { message: `connection to ${host} refused by ENDPOINT_URL_POLICY: ${host} is not a public address`, detail: theirs.message } : null;
}

/**
 * A host without an address at send time as customers may see it: `could not connect to <host>`,
 * with what the resolver said in `detail` for the server's log. Null when `err` is not one.
 */
export function describeUnresolvedHost(err: unknown): { message: string; detail: string } | null {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    if (current instanceof UnresolvedHostError) return { message: current.message, detail: current.detail };
    current = current.cause;
  }
  return null;
}

type ConnectionListener = (error: Error | null, socket: Duplex) => void;

/**
 * Wraps a DNS lookup so any non-public answer fails the lookup (all answers are checked). A name
 * without any address fails as an {@link UnresolvedHostError}: retried, and reported without the
 * resolver's words.
 */
function policyLookup(inner: LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    inner(hostname, options, (err, address, family) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== undefined && NO_ADDRESS_CODES.has(code)) return callback(new UnresolvedHostError(hostname, code), address, family);
        return callback(err, address, family);
      }
      const answers: LookupAddress[] = Array.isArray(address) ? address : [{ address, family: family ?? isIP(address) }];
      for (const answer of answers) {
        if (isIP(answer.address.replace(/%.*$/, "")) === 0) continue; // the library refuses non-IPs
        const verdict = classifyAddress(answer.address);
        if (!verdict.public) return callback(AddressRefusedError.ofAddress(answer.address, verdict.range, hostname), address, family);
      }
      callback(null, address, family);
    });
  };
}

/**
 * What the proxy is asked for: the address a direct connection to `host` would use, refused as it
 * would be. Under `public-https` an IP literal is judged by the address table and a name resolved
 * through {@link policyLookup} (every answer checked); the first answer is the one used, as a
 * direct connection tries it first.
 */
function addressVetter(policy: EndpointUrlPolicy, lookup: LookupFunction = dnsLookup as LookupFunction): AddressVetter {
  const resolve = policy === "public-https" ? policyLookup(lookup) : lookup;
  return (host) =>
    new Promise((done, fail) => {
      const bare = host.replace(/^\[(.*)\]$/, "$1");
      if (isIP(bare.replace(/%.*$/, "")) !== 0) {
        const verdict = classifyAddress(bare);
        if (policy === "public-https" && !verdict.public) return fail(AddressRefusedError.ofAddress(bare, verdict.range, bare));
        return done(bare);
      }
      resolve(bare, { all: true }, (err, address) => {
        if (err) return fail(err);
        const first = Array.isArray(address) ? address[0]?.address : address;
        if (first === undefined) return fail(new UnresolvedHostError(bare, "ENODATA"));
        done(first);
      });
    });
}

/** Refuses an IP-literal host before connecting: Node skips the lookup for literals. */
function refuseLiteral(options: TcpNetConnectOpts, listener: ConnectionListener | undefined): Socket | null {
  const host = options.host;
  if (host === undefined || isIP(host.replace(/%.*$/, "")) === 0) return null;
  const verdict = classifyAddress(host);
  if (verdict.public) return null;
  const error = AddressRefusedError.ofAddress(host, verdict.range, host);
  // Same shape as request-filtering-agent's refusal: the request sees the error, no packet is sent.
  const socket = new Socket();
  if (listener) listener(error, socket);
  else socket.destroy(error);
  return socket;
}

class PolicyHttpAgent extends RequestFilteringHttpAgent {
  constructor(
    options: ConstructorParameters<typeof RequestFilteringHttpAgent>[0],
    private readonly policyLookupFn: LookupFunction,
  ) {
    super(options);
  }

  override createConnection(options: TcpNetConnectOpts, listener?: ConnectionListener): Duplex | Socket {
    return refuseLiteral(options, listener) ?? super.createConnection({ ...options, lookup: this.policyLookupFn }, listener);
  }
}

class PolicyHttpsAgent extends RequestFilteringHttpsAgent {
  constructor(
    options: ConstructorParameters<typeof RequestFilteringHttpsAgent>[0],
    private readonly policyLookupFn: LookupFunction,
  ) {
    super(options);
  }

  override createConnection(options: TcpNetConnectOpts, listener?: ConnectionListener): Duplex | Socket {
    return refuseLiteral(options, listener) ?? super.createConnection({ ...options, lookup: this.policyLookupFn }, listener);
  }
}
