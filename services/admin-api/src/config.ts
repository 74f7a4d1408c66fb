import { DEFAULT_MAX_STORAGE_BYTES_PER_WORLD, MAX_STORAGE_BYTES_CEILING } from "@vw/contracts";
import { readQueueShards } from "@vw/queues";
import { readDatabaseSettings } from "@vw/db/settings";
import {
  parseEnv,
  readAuthThrottle,
  readCommon,
  readPlayUrl,
  readRedisKeyPrefix,
  readRedisTopology,
  readTrustProxy,
  redactCredentials,
  weakTokenProblem,
  type Env,
  type EnvReader,
} from "@vw/service-kit";
import { DEFAULT_ENDPOINT_URL_POLICY, readDeliveryProxyUrl, secretBoxKeyProblem, type EndpointUrlPolicy } from "@vw/webhook-core";

/** Default of DATABASE_POOL_MAX: operator and dashboard requests, and the Inbound API's member lookups (README, Operations). */
export const DEFAULT_DATABASE_POOL_MAX = 5;

/** Defaults of MAX_ENDPOINTS_PER_WORLD and MAX_AUTH_ENDPOINTS_PER_WORLD (the operator raises them per world). */
export const DEFAULT_ENDPOINT_QUOTAS = Object.freeze({ maxEndpoints: 50, maxAuthEndpoints: 10 });

/** Values of `ENDPOINT_URL_POLICY`. */
const ENDPOINT_URL_POLICIES: readonly EndpointUrlPolicy[] = ["public-https", "any"];

/**
 * admin-api configuration; the only reader of the environment. Throws a `ConfigError` naming
 * every missing or malformed variable (never echoing the token or the encryption keys).
 */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3003);
    const adminToken = r.string("ADMIN_TOKEN");
    const tokenProblem = weakTokenProblem("ADMIN_TOKEN", adminToken);
    if (tokenProblem !== null) r.problem(tokenProblem);
    const secretsEncryptionKey = r.string("SECRETS_ENCRYPTION_KEY");
    const keyProblem = secretsEncryptionKey === "" ? null : secretBoxKeyProblem(secretsEncryptionKey);
    if (keyProblem !== null) r.problem(`SECRETS_ENCRYPTION_KEY: ${keyProblem}`);
    const redisKeyPrefix = readRedisKeyPrefix(r, "vw");
    const publicAdminUrl = readPublicAdminUrl(r);
    const dashboardFrameAncestors = readFrameAncestors(r);
    const deliveryProxy = readDeliveryProxyUrl(r.optionalString("DELIVERY_PROXY_URL"));
    if (deliveryProxy.problem !== null) r.problem(deliveryProxy.problem);
    return {
      ...common,
      /**
       * DATABASE_URL (possibly a transaction-pooling PgBouncer, `?pgbouncer=true`), DIRECT_URL
       * (PostgreSQL itself: migrations), DATABASE_POOL_MAX: every connection of
       * this process to DATABASE_URL, all together; application_name "admin-api".
       */
      database: readDatabaseSettings(r, { service: "admin-api", defaultPoolMax: DEFAULT_DATABASE_POOL_MAX }),
      /** Bearer token of every `/admin/v1` request. */
      adminToken,
      /** Public address of map-storage; a world's files live under `<this>/<org>/<world>`. */
      publicMapStorageUrl: r.url("PUBLIC_MAP_STORAGE_URL", "http://localhost:3001"),
      /**
       * map-storage as admin-api reaches it (`http://map-storage:3001` in a cluster), for the
       * dashboard's room listing; PUBLIC_MAP_STORAGE_URL when unset.
       */
      mapStorageInternalUrl: r.optionalString("MAP_STORAGE_INTERNAL_URL") === undefined ? undefined : r.url("MAP_STORAGE_INTERNAL_URL", ""),
      /**
       * Public address of the play client; room URLs are `<this>/@/<org>/<world>/<path>.wam`.
       * The default matches map-storage's, a local-only name that cannot leak to real users.
       */
      playUrl: readPlayUrl(r),
      /**
       * `public-https` (default): endpoint URLs must be https to public addresses.
       * `any`: every http(s) URL, for development and tests only (logged loudly at start-up).
       */
      endpointUrlPolicy: r.oneOf("ENDPOINT_URL_POLICY", ENDPOINT_URL_POLICIES, DEFAULT_ENDPOINT_URL_POLICY),
      /**
       * DELIVERY_PROXY_URL: the forward proxy the Test action's requests go through, as every
       * request to a customer does (asked for the address this process resolved and vetted);
       * null: they leave directly.
       */
      deliveryProxy: deliveryProxy.proxy,
      /**
       * Keys of the secret box that seals endpoint secrets at rest: comma-separated base64 32-byte
       * keys; the first seals, all open (rotation).
       */
      secretsEncryptionKey,
      /**
       * Redis of the delivery queue: REDIS_URL (a database number in the path is honoured), or
       * REDIS_SENTINELS with REDIS_SENTINEL_MASTER, or REDIS_CLUSTER_NODES.
       */
      redis: readRedisTopology(r),
      /** Prefix of every Redis key; must be the delivery worker's, or replays land in a queue nobody reads. */
      redisKeyPrefix,
      /** QUEUE_SHARDS: the deliveries queue's shards; producers and workers must agree (see readQueueShards). */
      queueShards: readQueueShards(r),
      /**
       * Public origin of admin-api (no path): dashboard links are `<this>/dashboard/#code=...`, it
       * is the origin state-changing dashboard requests must come from, and an https one makes the
       * session cookie Secure.
       */
      publicAdminUrl,
      /** Origins allowed to embed the dashboard in a frame (CSP frame-ancestors); none by default. */
      dashboardFrameAncestors,
      /** Whole-attempt budget of a Test delivery (the spec's 15 s answer time by default). */
      deliveryTimeoutMs: r.int("DELIVERY_TIMEOUT_MS", 15_000, { min: 1, max: 120_000 }),
      /** How long the Inbound API trusts an API key lookup: a revoked key stops working within this time (0: every request asks). */
      apiKeyCacheTtlMs: r.int("API_KEY_CACHE_TTL_MS", 5_000, { min: 0, max: 60_000 }),
      /** Platform defaults of the endpoint quotas; a world's own values (set by the operator) win. */
      endpointQuotas: {
        /** MAX_ENDPOINTS_PER_WORLD: endpoints of one world. */
        maxEndpoints: r.int("MAX_ENDPOINTS_PER_WORLD", DEFAULT_ENDPOINT_QUOTAS.maxEndpoints, { min: 1, max: 100_000 }),
        /** MAX_AUTH_ENDPOINTS_PER_WORLD: endpoints of one world subscribed to `auth` (each one is on the member's connection path). */
        maxAuthEndpoints: r.int("MAX_AUTH_ENDPOINTS_PER_WORLD", DEFAULT_ENDPOINT_QUOTAS.maxAuthEndpoints, { min: 1, max: 1_000 }),
      },
      /** MAX_STORAGE_BYTES_PER_WORLD: map-storage's quota of a world without its own, shown with each world (set it as map-storage's). */
      maxStorageBytesPerWorld: r.int("MAX_STORAGE_BYTES_PER_WORLD", DEFAULT_MAX_STORAGE_BYTES_PER_WORLD, { min: 1, max: MAX_STORAGE_BYTES_CEILING }),
      /** AUTH_FAILURES_MAX and AUTH_FAILURES_WINDOW_S: failed authentications one client may have per window. */
      authThrottle: readAuthThrottle(r),
      /** TRUST_PROXY: whose X-Forwarded-For names the client (for throttling); nobody's by default. */
      trustProxy: readTrustProxy(r),
    };
  });
}

/**
 * PUBLIC_ADMIN_URL: an http(s) origin. A path is refused: the page loads its files from
 * `/dashboard/` of that host and calls `/admin/v1` there, so admin-api must be at the root of it;
 * credentials, a query or a fragment would end up in every link.
 */
function readPublicAdminUrl(r: EnvReader): string {
  const value = r.url("PUBLIC_ADMIN_URL", "http://localhost:3003");
  try {
    const url = new URL(value);
    if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
      r.problem(`PUBLIC_ADMIN_URL must be an origin such as https://admin.example.com (admin-api at the root of its host, no path, query, fragment or credentials), got "${redactCredentials(value)}"`);
    }
    return url.origin;
  } catch {
    return value; // r.url has already said why
  }
}

/**
 * DASHBOARD_FRAME_ANCESTORS: space-separated http(s) origins (`https://app.example.com`, a
 * `https://*.example.com` wildcard allowed as CSP allows it). Anything else (a path, a query, a
 * keyword such as `*` or `'self'`) is refused, so the value can be put in the CSP header as is.
 */
function readFrameAncestors(r: EnvReader): string[] {
  const raw = r.optionalString("DASHBOARD_FRAME_ANCESTORS")?.trim() ?? "";
  if (raw === "") return [];
  const origins: string[] = [];
  for (const item of raw.split(/\s+/)) {
    const match = /^(https?):\/\/(\*\.)?([a-z0-9.-]+|\[[0-9a-f:.]+\])(:\d{1,5})?\/?$/i.exec(item);
    if (!match) {
      r.problem(`DASHBOARD_FRAME_ANCESTORS must be space-separated origins such as https://app.example.com, got "${redactCredentials(item)}"`);
      continue;
    }
    origins.push(item.replace(/\/$/, "").toLowerCase());
  }
  return origins;
}

export type AdminApiConfig = ReturnType<typeof loadConfig>;
