/**
 * The DeliveryLog's SQL, the only place that spells the log tables' columns (what its statements
 * do to endpoints, their lock and the failure counters, comes from endpoints/endpoint-statements.ts). Attempts always travel
 * as 14 parallel arrays in this order: id, delivery_id, attempt_number, trigger, started_at (ISO
 * text), request_headers (JSON text), response_status, response_headers (JSON text or null),
 * response_body, response_body_truncated, duration_ms, error_kind, error, verdict.
 */
import { failureCounterUpdate, lockedEndpoints } from "../endpoints/endpoint-statements.js";
import type { Statement } from "./sql-runner.js";

/** `text` with each `[from, to]` replaced once; throws when `from` is missing (a statement edited without its variant). */
function variantOf(text: string, ...replacements: [string, string][]): string {
  let out = text;
  for (const [from, to] of replacements) {
    if (!out.includes(from)) throw new Error(`log-statements: variant expects ${JSON.stringify(from)}`);
    out = out.replace(from, to);
  }
  return out;
}

const ATTEMPT_COLUMNS = `id, delivery_id, delivery_created_at, endpoint_id, attempt_number, trigger, started_at, request_headers,
  response_status, response_headers, response_body, response_body_truncated, duration_ms, error_kind, error, verdict`;

/** The 14 attempt arrays starting at parameter `$first`, as a relation `t` (see the file comment). */
const attemptsFrom = (first: number): string => {
  const p = (i: number) => `$${first + i}`;
  return `unnest(${p(0)}::uuid[], ${p(1)}::uuid[], ${p(2)}::int[], ${p(3)}::text[], ${p(4)}::timestamptz[], ${p(5)}::text[], ${p(6)}::int[],
                 ${p(7)}::text[], ${p(8)}::text[], ${p(9)}::bool[], ${p(10)}::int[], ${p(11)}::text[], ${p(12)}::text[], ${p(13)}::text[])
         AS t(id, delivery_id, attempt_number, trigger, started_at, request_headers, response_status, response_headers,
              response_body, response_body_truncated, duration_ms, error_kind, error, verdict)`;
};

/** The nine delivery arrays starting at parameter `$first` (id … created_at, test), as a relation `v`. */
const deliveryValues = (first: number): string => {
  const p = (i: number) => `$${first + i}`;
  return `unnest(${p(0)}::uuid[], ${p(1)}::uuid[], ${p(2)}::uuid[], ${p(3)}::uuid[], ${p(4)}::text[], ${p(5)}::text[], ${p(6)}::text[], ${p(7)}::timestamptz[], ${p(8)}::bool[])
  AS v(id, endpoint_id, world_id, event_id, event_producer_id, type, body, created_at, test)`;
};

/**
 * How a delivery row is written from `v` (see {@link deliveryValues}): pending and due at once (its
 * `next_attempt_at` is its creation time: the schedule of record), its body decoded from base64.
 */
const INSERT_DELIVERY_ROWS = `INSERT INTO webhook_deliveries (id, endpoint_id, world_id, event_id, event_producer_id, type, status, body, test, next_attempt_at, created_at, updated_at)
    SELECT id, endpoint_id, world_id, event_id, event_producer_id, type, 'pending', decode(body, 'base64'), test, created_at, created_at, created_at`;

/**
 * $1 ids … $8 created_at, $9 test: pending deliveries. Returns the number inserted (`n`) and the
 * endpoints no longer there (`gone`): their endpoint rows are locked first (key share, sorted), so
 * one deleted since the writer read it is left out instead of failing the statement on the foreign
 * key, and a deletion that comes later waits for this commit and then removes what it wrote.
 */
export const INSERT_DELIVERIES: Statement = {
  name: "dl-insert-deliveries",
  text: `WITH ep AS (${lockedEndpoints("$2", "KEY SHARE")}), ins AS (
    ${INSERT_DELIVERY_ROWS}
    FROM ${deliveryValues(1)}
    WHERE v.endpoint_id IN (SELECT id FROM ep)
    RETURNING 1)
  SELECT (SELECT count(*) FROM ins)::int AS n,
         ARRAY(SELECT DISTINCT g FROM unnest($2::uuid[]) AS g WHERE g NOT IN (SELECT id FROM ep)) AS gone`,
};

/** {@link INSERT_DELIVERIES}, leaving an id already stored as it is (same id, same day: same partition). */
export const INSERT_DELIVERIES_IGNORING_EXISTING: Statement = {
  name: "dl-insert-deliveries-ignoring",
  text: variantOf(INSERT_DELIVERIES.text, ["RETURNING 1", "ON CONFLICT (id, created_at) DO NOTHING RETURNING 1"]),
};

/**
 * The first statement of an intake's transaction. $1 organization slugs, $2 world slugs, $3
 * producer ids (one of each per event), $4 subscriptions: the worlds named that exist, each with its
 * enabled endpoints subscribed to any of the subscriptions (one row per endpoint; one row with null
 * endpoint columns for a world without any); and, before it answers, one transaction advisory lock
 * per (world, producer id) of those worlds' events, always in the same order, so concurrent intakes
 * of one id wait for each other and the next statement's snapshot sees what the other committed.
 * The worlds and endpoints are read on this statement's snapshot, as they were when the request
 * came. One round trip for what took two (the lookup, before the transaction, and the locks): an
 * intake of a few events is mostly round trips. The `locks` and `plans` columns are there so the
 * locking CTE is evaluated whatever the planner prunes; the caller does not read them.
 *
 * Also switches the rest of the transaction to generic plans (`SET LOCAL`, without a round trip of
 * its own): the duplicate check of {@link INSERT_EVENTS_AND_DELIVERIES} looks in every partition of
 * the events, so a custom plan would plan all of them again on every intake, which with many days
 * of partitions costs more than running it; nothing else in that transaction prunes by plan.
 */
export const RESOLVE_AND_LOCK_EVENTS: Statement = {
  name: "dl-intake-resolve-lock",
  text: `WITH w AS (
      SELECT w.id, w.slug AS world_slug, o.slug AS org_slug, w.custom_domain
      FROM (SELECT DISTINCT org, world FROM unnest($1::text[], $2::text[]) AS r(org, world)) r
      JOIN organizations o ON o.slug = r.org
      JOIN worlds w ON w.organization_id = o.id AND w.slug = r.world),
    locks AS (
      SELECT count(pg_advisory_xact_lock(k))::int AS n, set_config('plan_cache_mode', 'force_generic_plan', true) AS plans FROM (
        SELECT DISTINCT hashtextextended(w.id::text || ':' || x.p, 0) AS k
        FROM unnest($1::text[], $2::text[], $3::text[]) AS x(org, world, p)
        JOIN w ON w.org_slug = x.org AND w.world_slug = x.world
        ORDER BY 1) s)
    SELECT w.id, w.world_slug, w.org_slug, w.custom_domain, e.id AS endpoint_id, e.api_version, e.subscriptions, l.n AS locks, l.plans
    FROM locks l CROSS JOIN w
    LEFT JOIN webhook_endpoints e ON e.world_id = w.id AND e.enabled = true AND e.subscriptions && $4::text[]`,
};

/**
 * The second statement of an intake's transaction, after {@link RESOLVE_AND_LOCK_EVENTS}. $1..$5
 * the events, $6 the intake time (their partition), $7..$15 the deliveries planned for all of them
 * (see {@link deliveryValues}). Inserts the events whose (world, producer id) is in no partition
 * yet, and the deliveries of those events only, whose endpoints are still there (locked as in
 * {@link INSERT_DELIVERIES}). Returns the new events' ids (`fresh`), how many deliveries were
 * inserted (`n`) and the endpoints no longer there (`gone`). Duplicates within the batch are the
 * caller's to drop. One round trip where the events and the deliveries took one each.
 *
 * The duplicate check is one probe of each partition's (world, producer id) index per event,
 * whatever the planner believes about the tables' sizes (`OFFSET 0` keeps the `NOT EXISTS` a
 * subplan run per event instead of an anti join the planner may choose): the intake runs on a
 * generic plan, made once per connection, and one made while the partitions were empty or small
 * hashed every stored event of every partition on each intake, a cost that grew with the log
 * until an ANALYZE made PostgreSQL plan again (pruning.int.test.ts checks the plan).
 */
export const INSERT_EVENTS_AND_DELIVERIES: Statement = {
  name: "dl-insert-events-deliveries",
  text: `WITH ev AS (
    INSERT INTO webhook_events (id, world_id, producer_id, type, occurred_at, created_at)
    SELECT v.id, v.world_id, v.producer_id, v.type, v.occurred_at, $6::timestamptz
    FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[]) AS v(id, world_id, producer_id, type, occurred_at)
    WHERE NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.world_id = v.world_id AND e.producer_id = v.producer_id OFFSET 0)
    RETURNING id
  ), ep AS (${lockedEndpoints("$8", "KEY SHARE")}), ins AS (
    ${INSERT_DELIVERY_ROWS}
    FROM ${deliveryValues(7)}
    WHERE v.event_id IN (SELECT id FROM ev) AND v.endpoint_id IN (SELECT id FROM ep)
    RETURNING 1)
  SELECT ARRAY(SELECT id FROM ev) AS fresh, (SELECT count(*) FROM ins)::int AS n,
         ARRAY(SELECT DISTINCT g FROM unnest($8::uuid[]) AS g WHERE g NOT IN (SELECT id FROM ep)) AS gone`,
};

/** $1 world ids, $2 producer ids: deliveries of those events still pending and never attempted. */
export const UNATTEMPTED_OF_EVENTS: Statement = {
  name: "dl-unattempted-of-events",
  text: `SELECT d.id, d.endpoint_id, d.run
    FROM unnest($1::uuid[], $2::text[]) AS k(world_id, producer_id)
    JOIN webhook_events e ON e.world_id = k.world_id AND e.producer_id = k.producer_id
    JOIN webhook_deliveries d ON d.event_id = e.id AND d.created_at = e.created_at
    WHERE d.status = 'pending' AND d.attempt_count = 0 AND d.test = false`,
};

/**
 * $1..$9 the deliveries (…, status, finished at, created at), $10..$23 their attempts. The
 * endpoints are locked first, as in {@link INSERT_DELIVERIES}: one deleted meanwhile gets nothing.
 */
export const RECORD_FINISHED: Statement = {
  name: "dl-record-finished",
  text: `WITH ep AS (${lockedEndpoints("$2", "KEY SHARE")}), d AS (
    INSERT INTO webhook_deliveries (id, endpoint_id, world_id, type, body, test, status, attempt_count, last_status, next_attempt_at, created_at, updated_at)
    SELECT v.id, v.endpoint_id, v.world_id, v.type, decode(v.body, 'base64'), v.test, v.status, 1, v.last_status, NULL, v.created_at, v.updated_at
    FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::bool[], $7::text[], $16::int[], $8::timestamptz[], $9::timestamptz[])
         AS v(id, endpoint_id, world_id, type, body, test, status, last_status, updated_at, created_at)
    WHERE v.endpoint_id IN (SELECT id FROM ep)
    RETURNING id, endpoint_id, created_at
  )
  INSERT INTO delivery_attempts (${ATTEMPT_COLUMNS})
  SELECT t.id, t.delivery_id, d.created_at, d.endpoint_id, t.attempt_number, t.trigger, t.started_at, t.request_headers::jsonb,
         t.response_status, t.response_headers::jsonb, t.response_body, t.response_body_truncated, t.duration_ms, t.error_kind, t.error, t.verdict
  FROM ${attemptsFrom(10)}
  JOIN d ON d.id = t.delivery_id`,
};

const LOAD_COLUMNS = `d.id, d.endpoint_id, d.created_at, d.body, d.status, d.attempt_count, d.next_attempt_at, d.run, d.run_attempts, d.test,
  e.url, e.enabled, e.secret_sealed, e.rate_limit_per_second`;

/**
 * $1 ids, $2 their creation times (UUIDv7): one partition probed per id. The `= ANY($2)` repeats
 * the join's condition where the planner can use it: it prunes to the partitions of those days when
 * the statement is planned, instead of planning (and locking) every partition of the history for
 * rows that come from an `unnest` (with 90 days of partitions, planning them all cost far more
 * than running a small batch).
 */
export const LOAD_TIMED: Statement = {
  name: "dl-load-timed",
  text: `SELECT ${LOAD_COLUMNS}
    FROM unnest($1::uuid[], $2::timestamptz[]) AS k(id, created_at)
    JOIN webhook_deliveries d ON d.id = k.id AND d.created_at = k.created_at
    JOIN webhook_endpoints e ON e.id = d.endpoint_id
    WHERE d.created_at = ANY($2::timestamptz[])`,
};

/** $1 ids without a time (v4 ids of older history): every partition's primary key is probed. */
export const LOAD_UNTIMED: Statement = {
  name: "dl-load-untimed",
  text: `SELECT ${LOAD_COLUMNS} FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = ANY($1::uuid[])`,
};

/**
 * $1..$3 endpoint counters (ids sorted, reset, n), $4..$17 the attempts, $18 their deliveries'
 * creation times, $19 endpoint ids, $20 new statuses, $21 next attempt times. Every endpoint of the
 * batch is locked first (sorted: the lock order shared with every disable and deletion, endpoints
 * before deliveries); an attempt whose endpoint is gone (deleted while the attempt was in flight,
 * its deliveries with it) is left out instead of failing the whole batch on the foreign key, and
 * a deletion that comes later waits for this commit and then removes what it wrote. The scalar
 * subquery in `upd` makes the deliveries wait for `counters`; its `= ANY($18)` prunes the update
 * to the partitions of those days (see {@link LOAD_TIMED}).
 */
export const RECORD_ATTEMPTS: Statement = {
  name: "dl-record-attempts",
  text: `WITH locked AS (${lockedEndpoints("$19", "NO KEY UPDATE")}), counters AS (
    ${failureCounterUpdate("$1", "$2", "$3", "locked")}
  ), inserted AS (
    INSERT INTO delivery_attempts (${ATTEMPT_COLUMNS})
    SELECT t.id, t.delivery_id, x.created_at, x.endpoint_id, t.attempt_number, t.trigger, t.started_at, t.request_headers::jsonb,
           t.response_status, t.response_headers::jsonb, t.response_body, t.response_body_truncated, t.duration_ms, t.error_kind, t.error, t.verdict
    FROM ${attemptsFrom(4)}
    JOIN unnest($4::uuid[], $18::timestamptz[], $19::uuid[]) AS x(attempt_id, created_at, endpoint_id) ON x.attempt_id = t.id
    WHERE x.endpoint_id IN (SELECT id FROM locked)
  ), upd AS (
    UPDATE webhook_deliveries d
    SET status = CASE WHEN d.status = 'skipped' AND v.status = 'pending' THEN 'skipped' ELSE v.status END,
        attempt_count = d.attempt_count + 1, run_attempts = d.run_attempts + 1, last_status = v.last_status,
        next_attempt_at = CASE WHEN d.status = 'skipped' THEN NULL ELSE v.next_at END, updated_at = now()
    FROM unnest($5::uuid[], $18::timestamptz[], $20::text[], $10::int[], $21::timestamptz[]) AS v(id, created_at, status, last_status, next_at)
    WHERE d.id = v.id AND d.created_at = v.created_at AND d.created_at = ANY($18::timestamptz[]) AND (SELECT count(*) FROM counters) >= 0
  )
  SELECT id, consecutive_failures FROM counters`,
};

/** $1 id, $2 its creation time. */
export const MARK_SKIPPED: Statement = {
  name: "dl-mark-skipped",
  text: `UPDATE webhook_deliveries SET status = 'skipped', next_attempt_at = NULL, updated_at = now()
    WHERE id = $1::uuid AND created_at = $2::timestamptz AND status = 'pending'`,
};

/** $1 endpoint id. Returns the number skipped. */
export const SKIP_PENDING_OF_ENDPOINT: Statement = {
  name: "dl-skip-pending-of-endpoint",
  text: `WITH s AS (
    UPDATE webhook_deliveries SET status = 'skipped', next_attempt_at = NULL, updated_at = now()
    WHERE endpoint_id = $1::uuid AND status = 'pending' RETURNING 1)
  SELECT count(*)::int AS n FROM s`,
};

/**
 * $1 endpoint, $2 delivery ids, $3 their UUIDv7 times (null for v4 ids), $4 required current
 * status (null: any). Only while the endpoint is enabled. Returns the previous state of each.
 */
export const REQUEUE: Statement = {
  name: "dl-requeue",
  text: `WITH target AS (
    SELECT d.id, d.created_at, d.status, d.next_attempt_at, d.updated_at, d.run, d.run_attempts
    FROM unnest($2::uuid[], $3::timestamptz[]) AS k(id, at)
    JOIN webhook_deliveries d ON d.id = k.id AND (k.at IS NULL OR d.created_at = k.at)
    JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
    WHERE d.endpoint_id = $1::uuid AND ($4::text IS NULL OR d.status = $4::text)
    FOR UPDATE OF d
  )
  UPDATE webhook_deliveries d
  SET status = 'pending', next_attempt_at = clock_timestamp(), run = d.run + 1, run_attempts = 0, updated_at = clock_timestamp()
  FROM target
  WHERE d.id = target.id AND d.created_at = target.created_at
  RETURNING d.id, d.run, target.status AS prev_status, target.next_attempt_at AS prev_next, target.updated_at AS prev_updated,
            target.run AS prev_run, target.run_attempts AS prev_run_attempts, d.updated_at`,
};

/**
 * {@link REQUEUE} when every id is a UUIDv7 (all of them since partitioning): also pruned to the
 * partitions of those days when planned (see {@link LOAD_TIMED}), instead of planning every day of
 * the history for each Replay or recover batch.
 */
export const REQUEUE_TIMED: Statement = {
  name: "dl-requeue-timed",
  text: variantOf(
    REQUEUE.text,
    ["JOIN webhook_deliveries d ON d.id = k.id AND (k.at IS NULL OR d.created_at = k.at)", "JOIN webhook_deliveries d ON d.id = k.id AND d.created_at = k.at AND d.created_at = ANY($3::timestamptz[])"],
    ["WHERE d.id = target.id AND d.created_at = target.created_at", "WHERE d.id = target.id AND d.created_at = target.created_at AND d.created_at = ANY($3::timestamptz[])"],
  ),
};

/** $1 ids, $2 their UUIDv7 times (null for v4), $3 the requeue times, $4..$8 the previous status, next attempt, updated at, run, run's attempts. */
export const RESTORE: Statement = {
  name: "dl-restore",
  text: `UPDATE webhook_deliveries d SET status = p.status, next_attempt_at = p.next_attempt_at, updated_at = p.updated_at, run = p.run, run_attempts = p.run_attempts
    FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::int[], $8::int[])
         AS p(id, at, requeued_at, status, next_attempt_at, updated_at, run, run_attempts)
    WHERE d.id = p.id AND (p.at IS NULL OR d.created_at = p.at) AND d.status = 'pending' AND d.updated_at = p.requeued_at`,
};

/** {@link RESTORE} when every id is a UUIDv7: pruned to those days' partitions when planned. */
export const RESTORE_TIMED: Statement = {
  name: "dl-restore-timed",
  text: variantOf(RESTORE.text, ["WHERE d.id = p.id AND (p.at IS NULL OR d.created_at = p.at)", "WHERE d.id = p.id AND d.created_at = p.at AND d.created_at = ANY($2::timestamptz[])"]),
};

/**
 * The schedule of record: $1 due at or before, $2/$3 the keyset cursor (due time, id; exclusive),
 * $4 the page size. Pending deliveries in due order, through the partial index of pending rows
 * (`webhook_deliveries_due_idx`, one per partition, merged in order): a page costs its own rows,
 * whatever the size of the history.
 */
export const PENDING_DUE: Statement = {
  name: "dl-pending-due",
  text: `SELECT d.id, d.endpoint_id, d.run, d.next_attempt_at
    FROM webhook_deliveries d
    WHERE d.status = 'pending' AND d.next_attempt_at <= $1::timestamptz
      AND (d.next_attempt_at, d.id) > ($2::timestamptz, $3::uuid)
    ORDER BY d.next_attempt_at, d.id
    LIMIT $4::int`,
};
