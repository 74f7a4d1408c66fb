import { parseEnv, readCommon, type Env } from "@vw/service-kit";

/** Shortest accepted INGEST_TOKEN: anything shorter is guessable and refused at start-up. */
export const MIN_INGEST_TOKEN_LENGTH = 16;

/** Default and ceiling of MAX_EVENTS_PER_REQUEST. */
export const DEFAULT_MAX_EVENTS_PER_REQUEST = 500;
export const MAX_EVENTS_PER_REQUEST_CEILING = 10_000;

/** A Redis key prefix: letters, digits and separators (map-storage's default is `vw:map-storage:`). */
const KEY_PREFIX_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * event-ingest configuration; the only reader of the environment. Throws a `ConfigError` naming
 * every missing or malformed variable (never echoing the token).
 */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3002);
    const ingestToken = r.string("INGEST_TOKEN");
    if (ingestToken !== "" && ingestToken.length < MIN_INGEST_TOKEN_LENGTH) {
      r.problem(`INGEST_TOKEN must be at least ${MIN_INGEST_TOKEN_LENGTH} characters long, got ${ingestToken.length}`);
    }
    const redisKeyPrefix = r.string("REDIS_KEY_PREFIX", "vw");
    if (!KEY_PREFIX_RE.test(redisKeyPrefix)) {
      r.problem(`REDIS_KEY_PREFIX must be 1-64 letters, digits, '_', '.', ':' or '-', got "${redisKeyPrefix}"`);
    }
    return {
      ...common,
      databaseUrl: r.url("DATABASE_URL", undefined, ["postgres:", "postgresql:"]),
      /** `redis://host:6379/3` selects database 3 (ioredis reads the number from the path). */
      redisUrl: r.url("REDIS_URL", "redis://127.0.0.1:6379", ["redis:", "rediss:"]),
      /** Prefix of every Redis key (BullMQ keys are `<prefix>:bull:<queue>:...`, trailing colons dropped); the worker's must match. */
      redisKeyPrefix,
      /** Bearer token of every `/v1` request. */
      ingestToken,
      /**
       * Public address of the play client; a world's `url` in the envelope is `<this>/@/<org>/<world>`
       * (or its custom domain). Same default as admin-api's, a local-only name.
       */
      playUrl: r.url("PLAY_URL", "https://play.localhost"),
      /** Most events in one `{events: [...]}` request. */
      maxEventsPerRequest: r.int("MAX_EVENTS_PER_REQUEST", DEFAULT_MAX_EVENTS_PER_REQUEST, { min: 1, max: MAX_EVENTS_PER_REQUEST_CEILING }),
    };
  });
}

export type IngestConfig = ReturnType<typeof loadConfig>;
