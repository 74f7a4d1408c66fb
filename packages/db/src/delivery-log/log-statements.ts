/**
 * The DeliveryLog's SQL, the only place that spells the log tables' columns (what its statements
 * do to endpoints, their lock and the failure counters, comes from endpoints/endpoint-statements.ts).
 *
 * Two tables hold a delivery. `webhook_deliveries` (partitioned by day) is written once, at its
 * creation: the bytes, the endpoint, the event. `delivery_states` (one table) holds the state of a
 * delivery that is not delivered: `pending` with when it is due and a copy of its bytes, `failed`
 * or `skipped`; no row means delivered. So the hot path (intake, claim, attempt) never updates the
 * partitioned table, and only inserts into it, which routes each row to its day's partition
 * without planning or locking the others.
 *
 * Every statement that changes a delivery's state, or logs an attempt, also adds its change to the
 * `endpoint_stats` rollup, in the same statement, from the rows it already holds (stats.ts).
 *
 * Attempts always travel as 14 parallel arrays in this order: id, delivery_id, attempt_number,
 * trigger, started_at (ISO text), request_headers (JSON text), response_status, response_headers
 * (JSON text or null), response_body, response_body_truncated, duration_ms, error_kind, error,
 * verdict.
 */
import { failureCounterUpdate, lockedEndpoints } from "../endpoints/endpoint-statements.js";
import { worldsBySlugs } from "../world-directory.js";
import { amongIds } from "../sql-sets.js";
import type { Statement } from "./sql-runner.js";
import { attemptStatsRows, upsertStats } from "./stats.js";

const ATTEMPT_COLUMNS = `id, delivery_id, delivery_created_at, endpoint_id, attempt_number, trigger, started_at, request_headers,
  response_status, response_headers, response_body, response_body_truncated, duration_ms, error_kind, error, verdict`;

/** The 14 attempt arrays from `$first`, then `extra` more arrays (`[type, name]`), as one relation `t`. */
const attemptsFrom = (first: number, extra: readonly [string, string][] = []): string => {
  const p = (i: number) => `$${first + i}`;
  const extras = extra.map(([type], i) => `, ${p(14 + i)}::${type}[]`).join("");
  const names = extra.map(([, name]) => `, ${name}`).join("");
  return `unnest(${p(0)}::uuid[], ${p(1)}::uuid[], ${p(2)}::int[], ${p(3)}::text[], ${p(4)}::timestamptz[], ${p(5)}::text[], ${p(6)}::int[],
                 ${p(7)}::text[], ${p(8)}::text[], ${p(9)}::bool[], ${p(10)}::int[], ${p(11)}::text[], ${p(12)}::text[], ${p(13)}::text[]${extras})
         AS t(id, delivery_id, attempt_number, trigger, started_at, request_headers, response_status, response_headers,
              response_body, response_body_truncated, duration_ms, error_kind, error, verdict${names})`;
};

/**
 * The state rows of the ids `id` of relation `from`, each locked through its own probe of the
 * primary key, as relation `x(delivery_id, status, claimed_until)`. `only` (optional) keeps rows
 * out before they are locked; it must not imply a partial index's predicate. Other filters go
 * outside. A lateral lookup that names the key is planned as that probe whatever the statistics
 * of this queue table say; a condition on the status alone next to the key would match a partial
 * index that statistics taken in a lull make look cheaper to walk whole (`OFFSET 0` keeps the
 * filters outside from being pushed into the lookup).
 */
const lockedStates = (from: string, id: string, only?: string): string => `${from} CROSS JOIN LATERAL (
      SELECT s.delivery_id, s.status, s.claimed_until FROM delivery_states s
      WHERE s.delivery_id = ${id}${only === undefined ? "" : ` AND ${only}`} OFFSET 0 FOR UPDATE) x`;

/**
 * The value of attempt array `param` (of `type`) for the state row `s` of the group commit: its
 * delivery's place among the attempts' delivery ids ($5). A lookup in the statement's own arrays,
 * so the state rows are reached by key alone, with no join the planner could turn into a scan.
 */
const ofAttempt = (param: string, type: string): string => `(${param}::${type}[])[array_position($5::uuid[], s.delivery_id)]`;

/** The insert of relation `t` (attempt columns plus `created_at`, `endpoint_id`) into delivery_attempts. */
const INSERT_ATTEMPTS_FROM_T = `INSERT INTO delivery_attempts (${ATTEMPT_COLUMNS})
    SELECT t.id, t.delivery_id, t.created_at, t.endpoint_id, t.attempt_number, t.trigger, t.started_at, t.request_headers::jsonb,
           t.response_status, t.response_headers::jsonb, t.response_body, t.response_body_truncated, t.duration_ms, t.error_kind, t.error, t.verdict
    FROM t`;

/**
 * The ten delivery arrays starting at `$first` (id, endpoint_id, world_id, event_id,
 * event_producer_id, type, body as base64 text, created_at, test, trace), as a relation `v` whose
 * `bytes` are the decoded body.
 */
const deliveryValues = (first: number): string => {
  const p = (i: number) => `$${first + i}`;
  return `SELECT v.*, decode(v.body, 'base64') AS bytes
    FROM unnest(${p(0)}::uuid[], ${p(1)}::uuid[], ${p(2)}::uuid[], ${p(3)}::uuid[], ${p(4)}::text[], ${p(5)}::text[], ${p(6)}::text[],
                ${p(7)}::timestamptz[], ${p(8)}::bool[], ${p(9)}::text[])
         AS v(id, endpoint_id, world_id, event_id, event_producer_id, type, body, created_at, test, trace)`;
};

/**
 * Inserts relation `nv` (see {@link deliveryValues}) as deliveries, pending and due at their
 * creation. Without a conflict clause every row of `nv` is inserted (or the statement fails), so
 * the states are written from `nv` itself: joining two row sets of the statement would be planned,
 * in a generic plan that guesses ten rows each, as a nested loop over both, quadratic in the batch.
 * With one, only the rows inserted get a state ({@link amongIds}).
 */
const insertNewDeliveries = (nv: string, conflict: string): string => `ins AS (
    INSERT INTO webhook_deliveries (id, endpoint_id, world_id, event_id, event_producer_id, type, body, test, created_at)
    SELECT id, endpoint_id, world_id, event_id, event_producer_id, type, bytes, test, created_at FROM ${nv}
    ${conflict} RETURNING id),
  st AS (
    INSERT INTO delivery_states (delivery_id, created_at, endpoint_id, status, due_at, body, test, trace, updated_at)
    SELECT n.id, n.created_at, n.endpoint_id, 'pending', n.created_at, n.bytes, n.test, n.trace, n.created_at
    FROM ${nv} n${conflict === "" ? "" : ` WHERE ${amongIds("n.id", "ins")}`}
    RETURNING endpoint_id, created_at),
  stats AS (${upsertStats("SELECT endpoint_id, created_at, 1 AS p, 0 AS d, 0 AS f, 0 AS k FROM st")})`;

/** The endpoints of `$param` that are gone (not among the locked `ep`). */
const goneEndpoints = (param: string): string => `ARRAY(SELECT DISTINCT g FROM unnest(${param}::uuid[]) AS g WHERE g NOT IN (SELECT id FROM ep))`;

/** {@link INSERT_DELIVERIES}'s text; `ignoreExisting` leaves an id already stored as it is. */
const insertDeliveriesText = (ignoreExisting: boolean): string => `WITH ep AS (${lockedEndpoints("$2", "KEY SHARE")}),
  nv AS (${deliveryValues(1)} WHERE ${amongIds("v.endpoint_id", "ep")}),
  ${insertNewDeliveries("nv", ignoreExisting ? "ON CONFLICT (id, created_at) DO NOTHING" : "")}
  SELECT (SELECT count(*) FROM ins)::int AS n, ${goneEndpoints("$2")} AS gone`;

/**
 * $1..$10 deliveries (see {@link deliveryValues}): pending and due at once. Their endpoints are
 * locked first (key share, sorted), so one deleted since the writer read it is left out instead of
 * failing the statement on the foreign key, and a deletion that comes later waits for this commit
 * and then removes what it wrote. Returns how many were inserted (`n`) and the endpoints gone.
 */
export const INSERT_DELIVERIES: Statement = { name: "dl2-insert-deliveries", text: insertDeliveriesText(false) };

/** {@link INSERT_DELIVERIES}, leaving an id already stored as it is (a writer retrying the same batch). */
export const INSERT_DELIVERIES_IGNORING_EXISTING: Statement = { name: "dl2-insert-deliveries-ignoring", text: insertDeliveriesText(true) };

/**
 * The first statement of an intake's transaction. $1 organization slugs, $2 world slugs (one of
 * each per event): the worlds named that exist, each with its enabled endpoints (one row per
 * endpoint, and one row with null endpoint columns for a world without any); which events each
 * endpoint gets is the fan-out's to decide, once. The worlds and endpoints are read on this
 * statement's snapshot, as they were when the request came.
 */
export const RESOLVE_WORLDS: Statement = {
  name: "dl2-intake-resolve",
  text: `SELECT w.id, w.world_slug, w.org_slug, w.custom_domain, e.id AS endpoint_id, e.api_version, e.subscriptions
    FROM ${worldsBySlugs("$1::text[]", "$2::text[]")} w LEFT JOIN webhook_endpoints e ON e.world_id = w.id AND e.enabled = true`,
};

/**
 * The second statement of an intake's transaction, after {@link RESOLVE_WORLDS}. $1..$5 the
 * events (in one sorted order of their keys: see below), $6 the intake time (their partition),
 * $7..$16 the deliveries planned for all of them (see {@link deliveryValues}). Stores the key of
 * each event whose (world, producer id) is not known yet, then those events and their deliveries
 * only, whose endpoints are still there. Returns the new events' ids (`fresh`), how many
 * deliveries were inserted (`n`) and the endpoints gone.
 *
 * The keys' unique index deduplicates (one probe per event) and serialises two intakes of one id:
 * the second waits for the first's commit, then finds the key there. Keys are inserted in the
 * order given, which every intake sorts the same way, so two intakes sharing ids never wait for
 * each other in a cycle.
 */
export const STORE_INTAKE: Statement = {
  name: "dl2-intake-store",
  text: `WITH v AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY AS v(id, world_id, producer_id, type, occurred_at, i)
  ), k AS (
    INSERT INTO webhook_event_keys (world_id, producer_id, created_at)
    SELECT world_id, producer_id, $6::timestamptz FROM v ORDER BY i
    ON CONFLICT (world_id, producer_id) DO NOTHING
    RETURNING world_id, producer_id
  ), ev AS (
    INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at, created_at)
    SELECT v.id, v.world_id, v.producer_id, v.type, v.occurred_at, $6::timestamptz
    FROM v JOIN k ON k.world_id = v.world_id AND k.producer_id = v.producer_id
    RETURNING id
  ), ep AS (${lockedEndpoints("$8", "KEY SHARE")}),
  nv AS (${deliveryValues(7)} WHERE ${amongIds("v.event_id", "ev")} AND ${amongIds("v.endpoint_id", "ep")}),
  ${insertNewDeliveries("nv", "")}
  SELECT ARRAY(SELECT id FROM ev) AS fresh, (SELECT count(*) FROM ins)::int AS n, ${goneEndpoints("$8")} AS gone`,
};

/**
 * Deliveries whose only attempt is over (auth hook calls, Test sends), each with that attempt, in
 * ONE statement: no delivery without its attempt. $1 ids, $2 endpoints, $3 worlds, $4 types, $5
 * bodies (base64), $6 test flags, $7 final statuses (`delivered` or `failed`), $8 finish times,
 * $9 creation times, $10..$23 the attempts (one per delivery, in their order), $24 and $25 the
 * creation times and endpoints again, with the attempts (one unnest: no join of two row sets). A failed one gets its final state row; a delivered one
 * none. The endpoints are locked first, as in {@link INSERT_DELIVERIES}: one deleted meanwhile gets nothing.
 */
export const RECORD_FINISHED: Statement = {
  name: "dl2-record-finished",
  text: `WITH ep AS (${lockedEndpoints("$2", "KEY SHARE")}),
  f AS (SELECT v.* FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::bool[], $7::text[], $16::int[], $8::timestamptz[], $9::timestamptz[])
         AS v(id, endpoint_id, world_id, type, body, test, status, last_status, finished_at, created_at)
        WHERE ${amongIds("v.endpoint_id", "ep")}),
  d AS (
    INSERT INTO webhook_deliveries (id, endpoint_id, world_id, type, body, test, created_at)
    SELECT id, endpoint_id, world_id, type, decode(body, 'base64'), test, created_at FROM f
    RETURNING id),
  s AS (
    INSERT INTO delivery_states (delivery_id, created_at, endpoint_id, status, run_attempts, attempt_count, last_status, test, updated_at)
    SELECT id, created_at, endpoint_id, status, 1, 1, last_status, test, finished_at FROM f WHERE status <> 'delivered'
    RETURNING 1),
  t AS (SELECT * FROM ${attemptsFrom(10, [["timestamptz", "created_at"], ["uuid", "endpoint_id"]])} WHERE ${amongIds("t.endpoint_id", "ep")}),
  att AS (${INSERT_ATTEMPTS_FROM_T} RETURNING 1),
  stats AS (${upsertStats(
    `SELECT endpoint_id, created_at, 0 AS p, (status = 'delivered')::int AS d, (status = 'failed')::int AS f, 0 AS k FROM f`,
    attemptStatsRows("t"),
  )})
  SELECT (SELECT count(*) FROM d)::int AS n`,
};

/**
 * A drain's claim: $1 endpoint ids, $2 how many of each (at most), $3 the lease (ms). Takes each
 * endpoint's due pending deliveries, oldest due first, that no other drain holds (never claimed,
 * or its lease over: a drain that died), and holds them until the lease ends; rows another claim
 * is taking right now are skipped, not waited for. One statement for the claims of every drain of
 * the moment (the worker coalesces them). The setting of `claimed_until` touches no index, so the
 * row is updated in place (HOT). The rows claimed are updated by key (`= ANY`), not joined with the
 * claim: beside an endpoint with a backlog the planner guesses a tenth of that backlog for a
 * parameter `LIMIT`, and hashed every state to join them (tens of milliseconds per claim). Rows
 * come oldest due first (then in creation order: UUIDv7), each with its endpoint's current settings,
 * read through the endpoints' key (`= ANY($1)`): joined with the claimed rows alone, a generic plan
 * guessing ten of them hashed them and scanned every endpoint of the deployment on each claim.
 */
export const CLAIM_DUE: Statement = {
  name: "dl2-claim-due",
  text: `WITH c AS (
    SELECT x.delivery_id FROM unnest($1::uuid[], $2::int[]) AS w(endpoint_id, n)
    CROSS JOIN LATERAL (
      SELECT s.delivery_id FROM delivery_states s
      WHERE s.endpoint_id = w.endpoint_id AND s.status = 'pending' AND s.due_at <= now()
        AND (s.claimed_until IS NULL OR s.claimed_until < now())
      ORDER BY s.due_at LIMIT w.n FOR UPDATE SKIP LOCKED) x
  ), u AS (
    UPDATE delivery_states s SET claimed_until = now() + make_interval(secs => $3::int / 1000.0)
    WHERE s.delivery_id = ANY(ARRAY(SELECT delivery_id FROM c))
    RETURNING s.delivery_id, s.created_at, s.endpoint_id, s.due_at, s.run, s.run_attempts, s.attempt_count, s.body, s.test, s.trace, s.claimed_until)
  SELECT u.delivery_id, u.created_at, u.endpoint_id, u.due_at, u.run, u.run_attempts, u.attempt_count, u.body, u.test, u.trace,
         u.claimed_until, u.claimed_until::text AS lease,
         e.url, e.enabled, e.secret_sealed, e.rate_limit_per_second, e.headers_sealed
  FROM u JOIN webhook_endpoints e ON e.id = u.endpoint_id
  WHERE e.id = ANY($1::uuid[])
  ORDER BY u.due_at, u.delivery_id`,
};

/**
 * The worker's group commit: $1..$3 endpoint counters (ids sorted, reset, n), $4..$17 the
 * attempts, $18 their deliveries' creation times, $19 endpoint ids, $20 what each delivery becomes
 * (`delivered`, `pending` for a retry, `failed`), $21 when a retry is due, $22 why it is due later
 * than the schedule (null: it is not), $23 the run each attempt belongs to. Applies what the
 * delivery's fate decided: logs the attempt, deletes the state of a delivered delivery, moves a
 * retried or failed one on. Only a state still `pending` in the attempt's run moves: one skipped
 * while its attempt was in flight stays skipped (no catch-up after a re-enable), and one that a
 * Replay or recover put in a new run meanwhile stays due in it. A skipped or failed one still counts
 * the attempt (its attempt count and last status), so the history's count matches the attempts it
 * lists; a pending one of a newer run is not touched at all, not even locked: its drain may be
 * claiming it right now, and a claim skips locked rows (it counts the attempts of its own run).
 * Every endpoint of the batch is locked first (sorted: the lock order shared with every disable
 * and deletion, endpoints before deliveries); an attempt whose endpoint is gone is left out. Returns each touched endpoint's consecutive failures afterwards.
 *
 * The states are reached by key only: each attempt's state is locked through its own index probe
 * (`cur`, {@link lockedStates}; a pending one of a newer run is left out before it is locked), and the changes name the locked
 * ids (`= ANY`) and take their values from the arrays. `delivery_states` is a queue whose
 * statistics are whatever the last ANALYZE saw; analyzed in a lull and then given a burst, a join
 * with the attempts was planned as a walk through the whole table on every group commit, which
 * grew slower as the burst piled up (a soak's deliveries waited 40 s).
 */
export const RECORD_ATTEMPTS: Statement = {
  name: "dl2-record-attempts",
  text: `WITH locked AS (${lockedEndpoints("$19", "NO KEY UPDATE")}), counters AS (
    ${failureCounterUpdate("$1", "$2", "$3", "locked")}
  ), t AS (
    SELECT * FROM ${attemptsFrom(4, [["timestamptz", "created_at"], ["uuid", "endpoint_id"], ["text", "becomes"], ["timestamptz", "due_at"], ["text", "wait_reason"], ["int", "run"]])}
    WHERE ${amongIds("t.endpoint_id", "locked")} AND (SELECT count(*) FROM counters) >= 0
  ), att AS (${INSERT_ATTEMPTS_FROM_T} RETURNING 1
  ), cur AS (
    SELECT t.delivery_id, t.becomes, x.status FROM ${lockedStates("t", "t.delivery_id", "(s.status <> 'pending' OR s.run = t.run)")}
  ), del AS (
    DELETE FROM delivery_states s
    WHERE s.delivery_id = ANY(ARRAY(SELECT delivery_id FROM cur WHERE status = 'pending' AND becomes = 'delivered'))
    RETURNING s.endpoint_id, s.created_at
  ), upd AS (
    UPDATE delivery_states s
    SET status = ${ofAttempt("$20", "text")}, due_at = ${ofAttempt("$21", "timestamptz")}, claimed_until = NULL, run_attempts = s.run_attempts + 1,
        attempt_count = s.attempt_count + 1, last_status = ${ofAttempt("$10", "int")}, wait_reason = ${ofAttempt("$22", "text")},
        body = CASE WHEN ${ofAttempt("$20", "text")} = 'pending' THEN s.body END, updated_at = now()
    WHERE s.delivery_id = ANY(ARRAY(SELECT delivery_id FROM cur WHERE status = 'pending' AND becomes <> 'delivered'))
    RETURNING s.endpoint_id, s.created_at, s.status AS becomes
  ), counted AS (
    UPDATE delivery_states s SET attempt_count = s.attempt_count + 1, last_status = ${ofAttempt("$10", "int")}, updated_at = now()
    WHERE s.delivery_id = ANY(ARRAY(SELECT delivery_id FROM cur WHERE status <> 'pending'))
    RETURNING 1
  ), stats AS (${upsertStats(
    `SELECT endpoint_id, created_at, -1 AS p, 1 AS d, 0 AS f, 0 AS k FROM del
     UNION ALL SELECT endpoint_id, created_at, -1, 0, 1, 0 FROM upd WHERE becomes = 'failed'`,
    attemptStatsRows("t"),
  )})
  SELECT id, consecutive_failures FROM counters`,
};

/** The skip of the state rows `where` selects (pending ones only): `skipped`, due never, bytes dropped. */
const skipPending = (where: string): string => `s AS (
    UPDATE delivery_states SET status = 'skipped', due_at = NULL, claimed_until = NULL, body = NULL, updated_at = now()
    WHERE ${where} RETURNING endpoint_id, created_at
  ), stats AS (${upsertStats("SELECT endpoint_id, created_at, -1 AS p, 0 AS d, 0 AS f, 1 AS k FROM s")})
  SELECT count(*)::int AS n FROM s`;

/** $1 delivery ids: those still pending become `skipped` (their endpoint is disabled). Returns how many. */
export const SKIP_DELIVERIES: Statement = {
  name: "dl2-skip-deliveries",
  text: `WITH k AS (SELECT x.delivery_id FROM ${lockedStates("unnest($1::uuid[]) AS i(id)", "i.id")} WHERE x.status = 'pending'),
  ${skipPending("delivery_id = ANY(ARRAY(SELECT delivery_id FROM k))")}`,
};

/** $1 endpoint id: every pending delivery of it becomes `skipped`. Returns how many. */
export const SKIP_PENDING_OF_ENDPOINT: Statement = {
  name: "dl2-skip-pending-of-endpoint",
  text: `WITH ${skipPending("endpoint_id = $1::uuid AND status = 'pending'")}`,
};

/**
 * Replay and recover: $1 endpoint, $2 delivery ids, $3 their UUIDv7 times, $4 the status they must
 * be in now (null: any; `delivered` means they have no state row). Only while the endpoint is
 * enabled. Each becomes pending and due at once in a new run, with its stored bytes: a state row
 * that exists is moved on, a delivered delivery gets one again (its attempts so far counted).
 * Both partitioned tables are read with the days of the ids named (`= ANY($3)`), so PostgreSQL
 * plans and locks those days' partitions only, not every day of the retention. Returns the
 * deliveries put back.
 */
export const REQUEUE: Statement = {
  name: "dl2-requeue",
  text: `WITH e AS (SELECT id FROM webhook_endpoints WHERE id = $1::uuid AND enabled FOR KEY SHARE),
  d AS (
    SELECT d.id, d.created_at, d.body, d.test FROM unnest($2::uuid[], $3::timestamptz[]) AS k(id, at)
    JOIN webhook_deliveries d ON d.id = k.id AND d.created_at = k.at AND d.created_at = ANY($3::timestamptz[])
    WHERE d.endpoint_id IN (SELECT id FROM e)
  ), old AS (
    SELECT s.delivery_id, s.status FROM delivery_states s JOIN d ON s.delivery_id = d.id FOR UPDATE OF s
  ), target AS (
    SELECT d.*, old.status AS prev FROM d LEFT JOIN old ON old.delivery_id = d.id
    WHERE $4::text IS NULL OR COALESCE(old.status, 'delivered') = $4::text
  ), upd AS (
    UPDATE delivery_states s SET status = 'pending', due_at = clock_timestamp(), claimed_until = NULL, run = s.run + 1, run_attempts = 0,
           body = t.body, wait_reason = NULL, updated_at = clock_timestamp()
    FROM target t WHERE s.delivery_id = t.id AND t.prev IS NOT NULL
    RETURNING s.delivery_id, s.endpoint_id, s.created_at, t.prev
  ), ins AS (
    INSERT INTO delivery_states (delivery_id, created_at, endpoint_id, status, due_at, run, run_attempts, attempt_count, last_status, body, test, updated_at)
    SELECT t.id, t.created_at, $1::uuid, 'pending', clock_timestamp(), 1, 0, a.n, a.last, t.body, t.test, clock_timestamp()
    FROM target t CROSS JOIN LATERAL (
      SELECT count(*)::int AS n, (array_agg(x.response_status ORDER BY x.started_at DESC, x.attempt_number DESC))[1] AS last
      FROM delivery_attempts x WHERE x.delivery_id = t.id AND x.delivery_created_at = t.created_at AND x.delivery_created_at = ANY($3::timestamptz[])) a
    WHERE t.prev IS NULL
    ON CONFLICT (delivery_id) DO NOTHING
    RETURNING delivery_id, endpoint_id, created_at, 'delivered'::text AS prev
  ), moved AS (SELECT * FROM upd UNION ALL SELECT * FROM ins),
  stats AS (${upsertStats(
    `SELECT endpoint_id, created_at, 1 - (prev = 'pending')::int AS p, -(prev = 'delivered')::int AS d,
            -(prev = 'failed')::int AS f, -(prev = 'skipped')::int AS k FROM moved`,
  )})
  SELECT delivery_id AS id FROM moved`,
};

/**
 * $1 endpoint, $2 delivery ids written before partitioning (v4: no time in them): the creation
 * time of those that are the endpoint's (one probe of each day's primary key), for {@link REQUEUE}.
 */
export const CREATION_TIMES: Statement = {
  name: "dl2-creation-times",
  text: `SELECT id, created_at FROM webhook_deliveries WHERE id = ANY($2::uuid[]) AND endpoint_id = $1::uuid`,
};

/**
 * $1 delivery ids, $2 the leases they were claimed with (`claimed_until` as text, exact): claims
 * given back (a worker shutting down), so another drain takes them at once. Only a claim still held
 * with that lease: one that expired and was claimed again belongs to its new holder.
 */
export const RELEASE_CLAIMS: Statement = {
  name: "dl2-release-claims",
  text: `WITH k AS (SELECT x.delivery_id FROM ${lockedStates("unnest($1::uuid[], $2::timestamptz[]) AS k(id, lease)", "k.id")}
    WHERE x.status = 'pending' AND x.claimed_until = k.lease)
  UPDATE delivery_states s SET claimed_until = NULL WHERE s.delivery_id = ANY(ARRAY(SELECT delivery_id FROM k))`,
};

/**
 * $1 delivery ids, $2 the leases they were claimed with, $3 a new lease in ms: renews the claims
 * still held with those leases (a drain about to send a delivery whose lease runs short). Returns
 * the ones renewed with their new lease; a claim that expired and was taken again is not.
 */
export const RENEW_CLAIMS: Statement = {
  name: "dl2-renew-claims",
  text: `WITH k AS (SELECT x.delivery_id FROM ${lockedStates("unnest($1::uuid[], $2::timestamptz[]) AS k(id, lease)", "k.id")}
    WHERE x.status = 'pending' AND x.claimed_until = k.lease)
  UPDATE delivery_states s SET claimed_until = now() + make_interval(secs => $3::int / 1000.0)
    WHERE s.delivery_id = ANY(ARRAY(SELECT delivery_id FROM k))
    RETURNING s.delivery_id, s.claimed_until, s.claimed_until::text AS lease`,
};

/**
 * The schedule of record, by endpoint: every endpoint with pending deliveries and the earliest due
 * time among them. One probe of the due index per endpoint (a loose index scan), whatever the
 * number of pending deliveries behind each.
 */
export const DUE_ENDPOINTS: Statement = {
  name: "dl2-due-endpoints",
  text: `WITH RECURSIVE e AS (
    (SELECT endpoint_id, due_at FROM delivery_states WHERE status = 'pending' ORDER BY endpoint_id, due_at LIMIT 1)
    UNION ALL
    SELECT n.endpoint_id, n.due_at FROM e CROSS JOIN LATERAL (
      SELECT endpoint_id, due_at FROM delivery_states
      WHERE status = 'pending' AND endpoint_id > e.endpoint_id ORDER BY endpoint_id, due_at LIMIT 1) n
  ) SELECT endpoint_id, due_at FROM e`,
};

/**
 * Every endpoint and due time of the pending deliveries due later than now, distinct (the
 * reconciler's rebuild after Redis lost its data: the retries whose timers went with it). Walks the
 * pending index.
 */
export const PENDING_LATER: Statement = {
  name: "dl2-pending-later",
  text: `SELECT DISTINCT endpoint_id, due_at FROM delivery_states WHERE status = 'pending' AND due_at > now() ORDER BY endpoint_id, due_at`,
};

/** $1 cutoff: the states of deliveries created before it (their partitions are being dropped). */
export const DELETE_STATES_BEFORE: Statement = {
  name: "dl2-delete-states-before",
  text: `WITH d AS (DELETE FROM delivery_states WHERE created_at < $1::timestamptz RETURNING 1) SELECT count(*)::int AS n FROM d`,
};

/**
 * $1 cutoff, $2 batch size: deletes up to that many event keys older than the cutoff (their events'
 * partitions are gone or going). Returns how many; run again until fewer than the batch.
 */
export const DELETE_EVENT_KEYS_BEFORE: Statement = {
  name: "dl2-delete-event-keys-before",
  text: `WITH d AS (
    DELETE FROM webhook_event_keys WHERE (world_id, producer_id) IN (
      SELECT world_id, producer_id FROM webhook_event_keys WHERE created_at < $1::timestamptz LIMIT $2::int)
    RETURNING 1)
  SELECT count(*)::int AS n FROM d`,
};
