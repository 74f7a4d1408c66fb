/**
 * Environment parsing shared by every service's `src/config.ts`.
 * Each service calls {@link parseEnv} once with `process.env`; nothing else reads the environment.
 */

import { isIP } from "node:net";

export type Env = Readonly<Record<string, string | undefined>>;

/** Thrown when one or more variables are missing or malformed; the message names each of them. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
  }
}

/**
 * `value` as it may appear in an error message: anything between `://` (or the start, when there
 * is no `://` before it) and the last `@` becomes `***`, so a malformed `DATABASE_URL` or
 * `REDIS_URL` never puts its password in the logs. Values without `@` are returned unchanged.
 */
export function redactCredentials(value: string): string {
  const at = value.lastIndexOf("@");
  if (at === -1) return value;
  const scheme = value.indexOf("://");
  const start = scheme !== -1 && scheme < at ? scheme + 3 : 0;
  return `${value.slice(0, start)}***${value.slice(at)}`;
}

/**
 * Collects readings of environment variables and the problems found along the way. A problem
 * that repeats a value repeats it through {@link redactCredentials}: any variable may be given a
 * URL with a password by mistake, not only the ones read with {@link EnvReader.url}.
 */
export class EnvReader {
  private readonly problems: string[] = [];
  constructor(private readonly env: Env) {}

  private raw(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v.trim() === "" ? undefined : v.trim();
  }

  string(name: string, fallback?: string): string {
    const v = this.raw(name) ?? fallback;
    if (v === undefined) {
      this.problems.push(`${name} is required`);
      return "";
    }
    return v;
  }

  optionalString(name: string): string | undefined {
    return this.raw(name);
  }

  int(name: string, fallback: number, opts: { min?: number; max?: number } = {}): number {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    if (!/^-?\d+$/.test(v)) {
      this.problems.push(`${name} must be an integer, got "${redactCredentials(v)}"`);
      return fallback;
    }
    const n = Number(v);
    if ((opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max)) {
      this.problems.push(`${name} must be between ${opts.min ?? "-inf"} and ${opts.max ?? "+inf"}, got ${n}`);
    }
    return n;
  }

  bool(name: string, fallback: boolean): boolean {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    if (/^(1|true|yes|on)$/i.test(v)) return true;
    if (/^(0|false|no|off)$/i.test(v)) return false;
    this.problems.push(`${name} must be true or false, got "${redactCredentials(v)}"`);
    return fallback;
  }

  /**
   * An absolute URL with one of `protocols`, trailing slashes dropped. Its problems name the
   * protocol, or repeat a malformed value without its credentials, never the password itself.
   */
  url(name: string, fallback?: string, protocols: string[] = ["http:", "https:"]): string {
    const v = this.raw(name) ?? fallback;
    if (v === undefined) {
      this.problems.push(`${name} is required`);
      return "";
    }
    try {
      const u = new URL(v);
      if (!protocols.includes(u.protocol)) this.problems.push(`${name} must use ${protocols.join(" or ")}, got "${u.protocol}"`);
    } catch {
      this.problems.push(`${name} must be a URL, got "${redactCredentials(v)}"`);
    }
    return v.replace(/\/+$/, "");
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(v)) {
      this.problems.push(`${name} must be one of ${allowed.join(", ")}, got "${redactCredentials(v)}"`);
      return fallback;
    }
    return v as T;
  }

  /** Records a problem found by a cross-field check. */
  problem(message: string): void {
    this.problems.push(message);
  }

  /** Throws a {@link ConfigError} naming every bad variable, if any. */
  done(): void {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
  }
}

/** Parses with `build`, deep-freezes the result; throws {@link ConfigError} on any problem. */
export function parseEnv<T extends object>(env: Env, build: (r: EnvReader) => T): Readonly<T> {
  const reader = new EnvReader(env);
  const value = build(reader);
  reader.done();
  return deepFreeze(value);
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === "object") {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** Values of LOG_FORMAT. */
export const LOG_FORMATS = ["json", "pretty"] as const;
/** How log lines are written: JSON lines (production) or human-readable (development). */
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Common variables of every service (the root README's "Configuration"). */
export interface CommonConfig {
  port: number;
  /** HOST: the address the HTTP server binds; every interface by default (containers). */
  host: string;
  logLevel: string;
  /** LOG_FORMAT: `json` (default, one JSON object a line) or `pretty` (coloured lines for a terminal, development). */
  logFormat: LogFormat;
  /** The `OTEL_*` variables: OpenTelemetry traces, off unless an endpoint is set (tracing.ts). */
  tracing: TracingConfig;
}

/** A host name (letters, digits, `-`, dot-separated labels); IP literals are checked by isIP. */
const HOST_NAME_RE = /^(?:[0-9A-Za-z-]{1,63}\.)*[0-9A-Za-z-]{1,63}$/;

export function readCommon(r: EnvReader, defaultPort: number): CommonConfig {
  const host = r.string("HOST", "0.0.0.0");
  if (isIP(host) === 0 && !HOST_NAME_RE.test(host)) r.problem(`HOST must be an IP address or a host name (127.0.0.1, ::, localhost), got "${redactCredentials(host)}"`);
  return {
    port: r.int("PORT", defaultPort, { min: 0, max: 65535 }),
    host,
    logLevel: r.oneOf("LOG_LEVEL", ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const, "info"),
    logFormat: r.oneOf("LOG_FORMAT", LOG_FORMATS, "json"),
    tracing: readTracing(r),
  };
}

/** Default of PLAY_URL: a local-only name, so a forgotten setting cannot send users anywhere real. */
export const DEFAULT_PLAY_URL = "https://play.localhost";

/**
 * PLAY_URL, the public address of the play client, read alike by every service that puts it in
 * a room URL or a world's `url` (`<PLAY_URL>/@/<org>/<world>`): http(s), a path allowed, trailing
 * slashes dropped. A query or a fragment would swallow the path appended to it, and credentials
 * would be sent to every webhook receiver (hence refused without being repeated).
 */
export function readPlayUrl(r: EnvReader): string {
  const value = r.url("PLAY_URL", DEFAULT_PLAY_URL);
  const problem = playUrlProblem(value);
  if (problem !== null) r.problem(problem);
  return value;
}

/** What is wrong with a PLAY_URL beyond what {@link EnvReader.url} checks, or null. */
function playUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null; // already reported by r.url
  }
  if (url.username !== "" || url.password !== "") return "PLAY_URL must not contain credentials (it is sent in every analytics.batch envelope)";
  if (/[?#]/.test(value)) return `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "${redactCredentials(value)}"`;
  return null;
}

/** REDIS_KEY_PREFIX: characters that need no quoting in BullMQ's key names, logs or redis-cli. */
const REDIS_KEY_PREFIX_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * REDIS_KEY_PREFIX, read alike by every service that writes to Redis: 1-64 letters, digits, `_`,
 * `.`, `:` or `-`. `fallback` is the service's default (the queue services share `vw`, so that
 * their BullMQ keys meet; map-storage keeps its own keys apart).
 */
export function readRedisKeyPrefix(r: EnvReader, fallback: string): string {
  const value = r.string("REDIS_KEY_PREFIX", fallback);
  if (!REDIS_KEY_PREFIX_RE.test(value)) {
    r.problem(`REDIS_KEY_PREFIX must be 1-64 letters, digits, '_', '.', ':' or '-', got "${redactCredentials(value)}"`);
  }
  return value;
}

/**
 * AUTH_FAILURES_MAX (failed authentications a client may have in a window, 1-10000, default 20) and
 * AUTH_FAILURES_WINDOW_S (the window, 1-86400 seconds, default 60), read alike by every service
 * that checks a credential.
 */
export function readAuthThrottle(r: EnvReader): { maxFailures: number; windowMs: number } {
  return {
    maxFailures: r.int("AUTH_FAILURES_MAX", 20, { min: 1, max: 10_000 }),
    windowMs: r.int("AUTH_FAILURES_WINDOW_S", 60, { min: 1, max: 86_400 }) * 1000,
  };
}

/** Names express's `trust proxy` takes besides addresses. */
const TRUST_PROXY_NAMES = new Set(["loopback", "linklocal", "uniquelocal"]);

/**
 * TRUST_PROXY: which peers' `X-Forwarded-For` is believed when telling clients apart (express's
 * `trust proxy`). Unset: none, the client is the TCP peer. A number: that many proxies in front
 * (the address that many hops from the right of the header). Otherwise a comma-separated list of
 * addresses, CIDR blocks or `loopback`, `linklocal`, `uniquelocal`. `true` is refused: it would
 * believe the left-most address, which any client can write.
 */
export function readTrustProxy(r: EnvReader): number | string[] | false {
  const raw = r.optionalString("TRUST_PROXY");
  if (raw === undefined || /^(false|0)$/i.test(raw)) return false;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 10) r.problem(`TRUST_PROXY must be between 0 and 10 proxies, got ${hops}`);
    return hops;
  }
  if (/^true$/i.test(raw)) {
    r.problem("TRUST_PROXY=true would believe any X-Forwarded-For a client writes; give the number of proxies in front, or their addresses");
    return false;
  }
  const items = raw.split(",").map((item) => item.trim()).filter((item) => item !== "");
  for (const item of items) {
    const [address = "", bits, extra] = item.split("/");
    const family = isIP(address);
    const maxBits = family === 6 ? 128 : 32;
    const ok =
      TRUST_PROXY_NAMES.has(item) ||
      (family !== 0 && extra === undefined && (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= maxBits)));
    if (!ok) r.problem(`TRUST_PROXY must be a number of proxies, or addresses, CIDR blocks, loopback, linklocal or uniquelocal separated by commas, got "${redactCredentials(item)}"`);
  }
  return items;
}

/**
 * For `main.ts`: loads the configuration or, on a {@link ConfigError}, prints which variables are
 * wrong and exits 1 (a process with bad configuration must not start half-working).
 */
export function loadConfigOrExit<T>(service: string, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${service}: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}

/** Values of OTEL_EXPORTER_OTLP_PROTOCOL this platform exports with (gRPC is not built in). */
export const OTLP_PROTOCOLS = ["http/protobuf", "http/json"] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** Values of OTEL_TRACES_SAMPLER understood here (the specification's built-in samplers). */
export const TRACE_SAMPLERS = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"] as const;
export type TraceSamplerName = (typeof TRACE_SAMPLERS)[number];

/** What the `OTEL_*` variables say; `endpoint` null means tracing is off. */
export interface TracingConfig {
  /** Where spans are POSTed (the traces URL itself, `.../v1/traces`), or null: off. */
  endpoint: string | null;
  protocol: OtlpProtocol;
  /** OTEL_SERVICE_NAME, or null for the service's own name. */
  serviceName: string | null;
  sampler: TraceSamplerName;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the `*traceidratio` samplers, 0 to 1. */
  samplerRatio: number;
}

/**
 * Reads the tracing variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended), `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`,
 * `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`; `OTEL_SDK_DISABLED=true`
 * or `OTEL_TRACES_EXPORTER=none` turn tracing off whatever the endpoint.
 */
export function readTracing(r: EnvReader): TracingConfig {
  const tracesEndpoint = r.optionalString("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const baseEndpoint = r.optionalString("OTEL_EXPORTER_OTLP_ENDPOINT");
  let endpoint: string | null = null;
  if (tracesEndpoint !== undefined) endpoint = r.url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  else if (baseEndpoint !== undefined) endpoint = `${r.url("OTEL_EXPORTER_OTLP_ENDPOINT")}/v1/traces`;
  const protocolName = r.optionalString("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") === undefined ? "OTEL_EXPORTER_OTLP_PROTOCOL" : "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
  const protocol = r.oneOf(protocolName, OTLP_PROTOCOLS, "http/protobuf");
  const sampler = r.oneOf("OTEL_TRACES_SAMPLER", TRACE_SAMPLERS, "parentbased_always_on");
  const ratioText = r.optionalString("OTEL_TRACES_SAMPLER_ARG");
  let samplerRatio = 1;
  if (ratioText !== undefined && sampler.endsWith("traceidratio")) {
    samplerRatio = Number(ratioText);
    if (!Number.isFinite(samplerRatio) || samplerRatio < 0 || samplerRatio > 1) {
      r.problem(`OTEL_TRACES_SAMPLER_ARG must be a number between 0 and 1, got "${ratioText}"`);
      samplerRatio = 1;
    }
  }
  const exporter = r.optionalString("OTEL_TRACES_EXPORTER");
  if (exporter !== undefined && exporter !== "otlp" && exporter !== "none") r.problem(`OTEL_TRACES_EXPORTER must be otlp or none, got "${exporter}"`);
  const off = r.bool("OTEL_SDK_DISABLED", false) || exporter === "none";
  return { endpoint: off ? null : endpoint, protocol, serviceName: r.optionalString("OTEL_SERVICE_NAME") ?? null, sampler, samplerRatio };
}
