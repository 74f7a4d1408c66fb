/**
 * The SQL of `webhook_endpoints`, the only place that writes it. The delivery log's statements
 * take two pieces from here (the endpoint lock that comes first in each of them, and the failure
 * counters of the worker's group commit), so what they do to endpoints is spelled here too.
 *
 * Lock order, shared by every writer that touches an endpoint and its deliveries: the endpoint
 * rows first (several at once: sorted by id), then the deliveries. A disable, a deletion (the
 * cascade deletes deliveries after the endpoint row), the group commit and every insert of
 * deliveries follow it, so none of them can deadlock against another.
 */
import type { Statement } from "../delivery-log/sql-runner.js";
import { amongIds } from "../sql-sets.js";

/** The columns of an endpoint as {@link EndpointRecord} names them. */
const RECORD_COLUMNS = `id, world_id AS "worldId", url, subscriptions, enabled, disabled_reason AS "disabledReason", disabled_at AS "disabledAt",
  format, api_version AS "apiVersion", secret_sealed AS "secretSealed", secret_rotated_at AS "secretRotatedAt", secret_version AS "secretVersion",
  consecutive_failures AS "consecutiveFailures", rate_limit_per_second AS "rateLimitPerSecond",
  headers_sealed AS "headersSealed", header_names AS "headerNames", created_at AS "createdAt", updated_at AS "updatedAt"`;

/**
 * The endpoints named by the uuid[] parameter `param`, locked in id order (the lock order above):
 * a writer adding rows for endpoints it read earlier keeps only those still there, and a deletion
 * after the lock waits for its commit. `KEY SHARE` for writers that only add rows referring to
 * them, `NO KEY UPDATE` for the group commit, which also changes their counters.
 */
export const lockedEndpoints = (param: string, mode: "KEY SHARE" | "NO KEY UPDATE"): string =>
  `SELECT id FROM webhook_endpoints WHERE id = ANY(${param}::uuid[]) ORDER BY id FOR ${mode}`;

/**
 * The consecutive-failure counters of a group commit, as a data-modifying CTE body: parameters
 * `ids` (sorted), `reset` and `n` are the three arrays of {@link failureCounterChanges}, `locked`
 * the CTE that locked the batch's endpoints ({@link lockedEndpoints}, `NO KEY UPDATE`). Returns
 * `id, consecutive_failures` of every endpoint whose count changed; one at zero that succeeded
 * again is not written. The endpoints are reached through their key (`= ANY` of the ids) and
 * take their values from the arrays by position: joined with the arrays, a generic plan guessing
 * ten ids either hashed them and scanned every endpoint of the deployment on each group commit, or
 * looped over the arrays for each endpoint.
 */
export const failureCounterUpdate = (ids: string, reset: string, n: string, locked: string): string => {
  const at = (param: string, type: string): string => `(${param}::${type}[])[array_position(${ids}::uuid[], e.id)]`;
  return `UPDATE webhook_endpoints e
    SET consecutive_failures = CASE WHEN ${at(reset, "bool")} THEN ${at(n, "int")} ELSE e.consecutive_failures + ${at(n, "int")} END
    WHERE e.id = ANY(${ids}::uuid[]) AND ${amongIds("e.id", locked)} AND (${at(n, "int")} > 0 OR e.consecutive_failures <> 0)
    RETURNING e.id, e.consecutive_failures`;
};

/** $1 id, $2 world, $3 url, $4 subscriptions, $5 format, $6 api version, $7 sealed secret, $8 throttle, $9 sealed headers, $10 their names. */
export const INSERT_ENDPOINT: Statement = {
  name: "ep-insert",
  text: `INSERT INTO webhook_endpoints (id, world_id, url, subscriptions, format, api_version, secret_sealed, rate_limit_per_second, headers_sealed, header_names, created_at, updated_at)
    VALUES ($1::uuid, $2::uuid, $3, $4::text[], $5, $6, $7, $8::int, $9, $10::text[], now(), now())
    RETURNING ${RECORD_COLUMNS}`,
};

/**
 * $1 id, $2 world; then each editable column as a (set?, value) pair: $3/$4 url, $5/$6
 * subscriptions, $7/$8 throttle, $9/$10 format, $11/$12 sealed secret (a new one also stamps the
 * rotation and counts the version up), $13/$14 sealed headers with $15 their names (the set is
 * replaced as a whole). Null when there is no such endpoint in the world.
 */
export const UPDATE_ENDPOINT: Statement = {
  name: "ep-update",
  text: `UPDATE webhook_endpoints SET
      url = CASE WHEN $3::bool THEN $4 ELSE url END,
      subscriptions = CASE WHEN $5::bool THEN $6::text[] ELSE subscriptions END,
      rate_limit_per_second = CASE WHEN $7::bool THEN $8::int ELSE rate_limit_per_second END,
      format = CASE WHEN $9::bool THEN $10 ELSE format END,
      secret_sealed = CASE WHEN $11::bool THEN $12 ELSE secret_sealed END,
      secret_rotated_at = CASE WHEN $11::bool THEN now() ELSE secret_rotated_at END,
      secret_version = CASE WHEN $11::bool THEN secret_version + 1 ELSE secret_version END,
      headers_sealed = CASE WHEN $13::bool THEN $14 ELSE headers_sealed END,
      header_names = CASE WHEN $13::bool THEN $15::text[] ELSE header_names END,
      updated_at = now()
    WHERE id = $1::uuid AND world_id = $2::uuid
    RETURNING ${RECORD_COLUMNS}`,
};

/** $1 id, $2 world. Its deliveries, attempts, stats and recoveries go with it (`ON DELETE CASCADE`). */
export const DELETE_ENDPOINT: Statement = {
  name: "ep-delete",
  text: `WITH gone AS (DELETE FROM webhook_endpoints WHERE id = $1::uuid AND world_id = $2::uuid RETURNING 1) SELECT count(*)::int AS n FROM gone`,
};

/**
 * $1 id, $2 world (null: any), $3 reason. Only an enabled endpoint changes (the first reason and
 * time are kept); the conditional update decides which of concurrent disables wins. Returns the
 * time of the disable, when this statement made it.
 */
export const DISABLE_ENDPOINT: Statement = {
  name: "ep-disable",
  text: `UPDATE webhook_endpoints SET enabled = false, disabled_reason = $3, disabled_at = now(), updated_at = now()
    WHERE id = $1::uuid AND ($2::uuid IS NULL OR world_id = $2::uuid) AND enabled
    RETURNING disabled_at AS "disabledAt"`,
};

/** $1 id, $2 world. Clears the reason and the failure count of a disabled endpoint. */
export const ENABLE_ENDPOINT: Statement = {
  name: "ep-enable",
  text: `UPDATE webhook_endpoints SET enabled = true, disabled_reason = NULL, disabled_at = NULL, consecutive_failures = 0, updated_at = now()
    WHERE id = $1::uuid AND world_id = $2::uuid AND NOT enabled`,
};

/**
 * $1 world. Locks the world's row (`FOR NO KEY UPDATE`: it serialises endpoint creations and quota
 * changes without holding up the intake's inserts, which take its key-share lock) and reads its
 * quotas. No row: no such world. The count comes in the next statement, whose snapshot sees what a
 * writer that held the lock before committed.
 */
export const LOCK_WORLD: Statement = {
  name: "ep-lock-world",
  text: `SELECT max_endpoints AS "maxEndpoints", max_auth_endpoints AS "maxAuthEndpoints" FROM worlds WHERE id = $1::uuid FOR NO KEY UPDATE`,
};

/** $1 world, $2 the endpoint an edit replaces (null for a creation): the world's endpoints, those subscribed to `auth`, and whether the replaced one is. */
export const COUNT_ENDPOINTS: Statement = {
  name: "ep-count",
  text: `SELECT count(*)::int AS endpoints, count(*) FILTER (WHERE 'auth' = ANY(subscriptions))::int AS "authEndpoints",
           coalesce(bool_or(id = $2::uuid AND 'auth' = ANY(subscriptions)), false) AS "replacingHasAuth"
    FROM webhook_endpoints WHERE world_id = $1::uuid`,
};

/** $1 id, $2 world: the endpoint as {@link INSERT_ENDPOINT} returns it (the one record type of reads and writes). */
export const FIND_ENDPOINT: Statement = {
  name: "ep-find",
  text: `SELECT ${RECORD_COLUMNS} FROM webhook_endpoints WHERE id = $1::uuid AND world_id = $2::uuid`,
};

/**
 * $1 world, $2/$3 the cursor (created_at and id of the last endpoint of the previous page, or
 * nulls), $4 how many: the world's endpoints newest first.
 */
export const LIST_ENDPOINTS: Statement = {
  name: "ep-list",
  text: `SELECT ${RECORD_COLUMNS} FROM webhook_endpoints
    WHERE world_id = $1::uuid AND ($2::timestamptz IS NULL OR created_at < $2::timestamptz OR (created_at = $2::timestamptz AND id < $3::uuid))
    ORDER BY created_at DESC, id DESC LIMIT $4::int`,
};

/** $1 world: the ids of its endpoints. */
export const ENDPOINT_IDS: Statement = {
  name: "ep-ids",
  text: `SELECT id FROM webhook_endpoints WHERE world_id = $1::uuid`,
};
