import { parseEnv, readCommon, type Env } from "@vw/service-kit";

/** Shortest accepted ADMIN_TOKEN: anything shorter is guessable and refused at start-up. */
export const MIN_ADMIN_TOKEN_LENGTH = 16;

/**
 * admin-api configuration; the only reader of the environment. Throws a `ConfigError` naming
 * every missing or malformed variable (never echoing the token itself).
 */
export function loadConfig(env: Env) {
  return parseEnv(env, (r) => {
    const common = readCommon(r, 3003);
    const adminToken = r.string("ADMIN_TOKEN");
    if (adminToken !== "" && adminToken.length < MIN_ADMIN_TOKEN_LENGTH) {
      r.problem(`ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters long, got ${adminToken.length}`);
    }
    return {
      ...common,
      databaseUrl: r.url("DATABASE_URL", undefined, ["postgres:", "postgresql:"]),
      /** Bearer token of every `/admin/v1` request. */
      adminToken,
      /** Public address of map-storage; a world's files live under `<this>/<org>/<world>`. */
      publicMapStorageUrl: r.url("PUBLIC_MAP_STORAGE_URL", "http://localhost:3001"),
      /**
       * Public address of the play client; room URLs are `<this>/@/<org>/<world>/<path>.wam`.
       * The default matches map-storage's, a local-only name that cannot leak to real users.
       */
      playUrl: r.url("PLAY_URL", "https://play.localhost"),
    };
  });
}

export type AdminApiConfig = ReturnType<typeof loadConfig>;
