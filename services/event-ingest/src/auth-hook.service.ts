/**
 * The synchronous `member.connecting` hook (spec: Events > member.connecting): while the platform
 * authenticates a member, every enabled endpoint of the world subscribed to `auth` is called, one
 * after another in creation order. It never blocks access: whatever the receivers do, the caller
 * gets 200 with one result per endpoint.
 *
 * Budget: the answer comes within AUTH_HOOK_TIMEOUT_MS of the request, whatever the number of
 * endpoints (the spec gives the platform's access check 5 s, not 5 s per endpoint). Each call gets
 * what is left of the budget; the endpoints not reached when it runs out are listed as
 * `not-reached` and called after the answer, still one after another, each with a whole
 * AUTH_HOOK_TIMEOUT_MS of its own, on the world's lane of {@link DeferredHookCalls} (bounded); their
 * calls are recorded in the history like the others, never retried, never counted.
 *
 * No retry, no failure counting, no disabling: the endpoint row is only read, never written
 * (a 410 here leaves the endpoint enabled; spec: "Its failures do not count towards disabling").
 *
 * History: each call is recorded as a finished delivery (`member.connecting`, delivered or
 * failed, one attempt with trigger `hook`) so it shows in the dashboard like any other. The rows
 * are written AFTER the answer is computed and the caller does not wait for them: the access check
 * is on the member's critical path and the history is not. Rows of the calls answered within
 * {@link HISTORY_FLUSH_MS} are written together in one statement (at most {@link HISTORY_BATCH_MAX}
 * deliveries each), so a busy world's connections cost one insert per window instead of one per
 * member, and no insert competes with the next member's hook. The cost of that choice is that a
 * crash loses the rows of the current window (at most {@link HISTORY_FLUSH_MS} of history); a
 * failed write is logged. {@link AuthHookService.drain} writes what is pending and waits for the
 * writes in flight (shutdown does).
 */
import { performance } from "node:perf_hooks";
import { newDeliveryId, worldsBySlugs, type Statement } from "@vw/db";
import type { IngestDatabase } from "./database.js";
import type { Logger } from "@vw/service-kit";
import { AppError, traceAttempt, withSpan } from "@vw/service-kit";
import {
  buildEnvelope,
  buildLegacyAuthBody,
  SecretCache,
  sendAttempt,
  worldReference,
  type AttemptRecord,
  type DeliveryAgents,
  type SecretBox,
} from "@vw/webhook-core";
import type { AuthHookError, ValidAuthHookRequest as AuthHookRequest } from "@vw/contracts";
import { DeferredHookCalls } from "./auth-hook-deferred.js";
import type { WorldSettingsCache } from "./world-settings-cache.js";

/** The event type of the hook. */
export const MEMBER_CONNECTING = "member.connecting";

/** How long answered calls' history waits to be written with the next calls' (ms), by default. */
export const HISTORY_FLUSH_MS = 50;
/** Most deliveries one history statement carries; a full batch is written at once. */
export const HISTORY_BATCH_MAX = 500;

/** One endpoint's outcome, as answered to the caller. */
export interface AuthHookResult {
  endpointId: string;
  /** The receiver's HTTP status; null when there was none (timeout, connection error, refused address). */
  status: number | null;
  durationMs: number;
  /**
   * Why there was no HTTP status: `timeout`, `connection`, `refused-by-policy`, `redirect`,
   * `secret-unavailable`; `not-reached` when the budget ran out before this endpoint's turn (it is
   * called after the answer).
   */
  error?: AuthHookError;
}

/** What `POST /v1/auth-hook` answers. */
export interface AuthHookResponse {
  results: AuthHookResult[];
}

/** What the hook is built from besides the database. */
export interface AuthHookOptions {
  /** PLAY_URL, for the envelope's `world.url`. */
  playUrl: string;
  /** Opens endpoint secrets (SECRETS_ENCRYPTION_KEY). */
  secretBox: SecretBox;
  /** `createDeliveryAgents(ENDPOINT_URL_POLICY)`: the connect-time address check. */
  agents: DeliveryAgents;
  /** AUTH_HOOK_TIMEOUT_MS: budget of the whole answer, and of each call made after it. */
  timeoutMs: number;
  logger: Logger;
  /**
   * The world-and-endpoints cache, kept exact by change notifications (world-settings-cache.ts);
   * without it every call reads the database.
   */
  cache?: WorldSettingsCache<HookTarget>;
  /** How long answered calls' history waits for the next calls' before it is written; {@link HISTORY_FLUSH_MS} by default. */
  historyFlushMs?: number;
  /** Clock of the envelope's `timestamp` and of the attempts; the system clock by default. */
  now?: () => Date;
  /** Monotonic clock (ms) of the answer's budget; `performance.now` by default. */
  monotonic?: () => number;
  /** Where calls past the budget wait; one with the defaults (1000 calls at most) unless given. */
  deferred?: DeferredHookCalls;
}

type HookEndpoint = HookTarget["endpoints"][number];

export interface HookTarget {
  world_id: string;
  world_slug: string;
  org_slug: string;
  custom_domain: string | null;
  identity_providers: unknown;
  /** Enabled `auth` endpoints in creation order; empty when there are none. */
  endpoints: { id: string; url: string; format: string; apiVersion: string; secretSealed: string | null; headersSealed: string | null }[];
}

interface HistoryRow {
  worldId: string;
  endpointId: string;
  body: Buffer;
  attempt: AttemptRecord;
  finishedAt: Date;
}

/**
 * The tokens that may leave: only those of the world's `openid-connect` providers configured to
 * expose them. Generic logins (Google, Microsoft, Discord, GitHub, LinkedIn) are never sent,
 * whatever `provider` the caller names; unknown providers are dropped too. Order is the caller's.
 */
export function exposedAccessTokens(storedProviders: unknown, tokens: readonly { provider: string; token: string }[]): { provider: string; token: string }[] {
  const exposed = new Set<string>();
  if (Array.isArray(storedProviders)) {
    for (const p of storedProviders as unknown[]) {
      if (typeof p !== "object" || p === null) continue;
      const { id, kind, exposeAccessToken } = p as Record<string, unknown>;
      if (typeof id === "string" && kind === "openid-connect" && exposeAccessToken === true) exposed.add(id);
    }
  }
  return tokens.filter((t) => exposed.has(t.provider)).map((t) => ({ provider: t.provider, token: t.token }));
}

/** Runs the hook; the route calls {@link AuthHookService.run}. */
export class AuthHookService {
  private readonly playUrl: string;
  private readonly secrets: SecretCache;
  private readonly writes = new Set<Promise<void>>();
  private pending: HistoryRow[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private readonly deferred: DeferredHookCalls;

  /**
   * @param db the process's one way to PostgreSQL (database.ts): its runner (the hook's two
   *   statements are prepared once per connection, not compiled by Prisma on every call) and its
   *   delivery log, the one the event intake writes through too.
   */
  constructor(
    private readonly db: Pick<IngestDatabase, "sql" | "log">,
    private readonly options: AuthHookOptions,
  ) {
    this.playUrl = options.playUrl.replace(/\/+$/, "");
    this.secrets = new SecretCache(options.secretBox);
    this.deferred = options.deferred ?? new DeferredHookCalls({ logger: options.logger });
  }

  /**
   * Calls the world's `auth` endpoints one after another within the budget and answers; those not
   * reached are called afterwards (see the file comment). 404 for an unknown world.
   */
  run(request: AuthHookRequest): Promise<AuthHookResponse> {
    return withSpan("auth hook", { "world.ref": request.world }, () => this.runUntraced(request));
  }

  private async runUntraced(request: AuthHookRequest): Promise<AuthHookResponse> {
    const clock = this.options.monotonic ?? (() => performance.now());
    const deadline = clock() + this.options.timeoutMs;
    const target = await this.findTarget(request);
    const accessTokens = exposedAccessTokens(target.identity_providers, request.accessTokens);

    const results: AuthHookResult[] = [];
    const history: HistoryRow[] = [];
    let next = 0;
    // One after another (spec rule 5): a receiver may change the member's tags before the next one runs.
    for (; next < target.endpoints.length; next += 1) {
      // Whole milliseconds: a call with less than 1 ms left could not be made anyway.
      const left = Math.floor(deadline - clock());
      if (left < 1) break;
      const call = await this.call(target, target.endpoints[next] as HookEndpoint, request, accessTokens, left);
      results.push(call.result);
      if (call.history) history.push(call.history);
    }
    const late = target.endpoints.slice(next);
    for (const endpoint of late) results.push({ endpointId: endpoint.id, status: null, durationMs: 0, error: "not-reached" });
    this.record(history);
    if (late.length > 0) {
      this.deferred.enqueue(
        target.world_id,
        late.map((endpoint) => async () => {
          const call = await this.call(target, endpoint, request, accessTokens, this.options.timeoutMs);
          if (call.history) this.record([call.history]);
        }),
      );
    }
    return { results };
  }

  /** One endpoint's call within `timeoutMs`: its result for the answer and its history row (none when nothing was sent). */
  private async call(
    target: HookTarget,
    endpoint: HookEndpoint,
    request: AuthHookRequest,
    accessTokens: { provider: string; token: string }[],
    timeoutMs: number,
  ): Promise<{ result: AuthHookResult; history?: HistoryRow }> {
    const now = this.options.now ?? (() => new Date());
    const deliveryId = newDeliveryId();
    const body =
      endpoint.format === "legacy"
        ? buildLegacyAuthBody({ roomUrl: request.roomUrl, uuid: request.uuid, accessTokens })
        : buildEnvelope({
            deliveryId,
            apiVersion: endpoint.apiVersion,
            type: MEMBER_CONNECTING,
            timestamp: now().toISOString(),
            world: worldReference(this.playUrl, target.org_slug, target.world_slug, target.custom_domain),
            data: { roomUrl: request.roomUrl, uuid: request.uuid, accessTokens },
          });
    let secret: string | null;
    let headers: Readonly<Record<string, string>>;
    try {
      secret = this.secrets.secretOf(endpoint.id, endpoint.secretSealed);
      headers = this.secrets.headersOf(endpoint.id, endpoint.headersSealed);
    } catch (err) {
      // Sealed with a key this process lacks: sending unsigned, or without the gateway's headers, would be worse than not sending.
      this.options.logger.error({ endpointId: endpoint.id, err: (err as Error).message }, "auth hook: endpoint secret or custom headers cannot be opened; not sent");
      return { result: { endpointId: endpoint.id, status: null, durationMs: 0, error: "secret-unavailable" } };
    }
    const attempt = await traceAttempt(endpoint.url, { deliveryId, endpointId: endpoint.id, trigger: "hook" }, () =>
      sendAttempt({ url: endpoint.url, deliveryId, attemptNumber: 1, trigger: "hook", body, secret, headers, agents: this.options.agents, timeoutMs, now }),
    );
    // What a policy refusal was about, what the resolver said of a host without an address, or what
    // the delivery proxy said, stays on the server: the history says only "not a public address" or
    // "could not connect".
    if (attempt.errorDetail !== undefined) {
      this.options.logger.warn(
        { endpointId: endpoint.id, deliveryId, detail: attempt.errorDetail },
        attempt.errorKind === "refused-by-policy" ? "auth hook call refused by ENDPOINT_URL_POLICY" : "auth hook call could not connect: see detail",
      );
    }
    return {
      result: {
        endpointId: endpoint.id,
        status: attempt.responseStatus,
        durationMs: attempt.durationMs,
        ...(attempt.errorKind === null ? {} : { error: attempt.errorKind as AuthHookError }),
      },
      history: { worldId: target.world_id, endpointId: endpoint.id, body, attempt, finishedAt: new Date() },
    };
  }

  /**
   * Lets the deferred calls finish, writes the pending history now and resolves once every write
   * started so far has finished (successfully or not).
   */
  async drain(): Promise<void> {
    await this.deferred.drain();
    this.flush();
    while (this.writes.size > 0) await Promise.all([...this.writes]);
  }

  /** The world and its enabled `auth` endpoints: from the cache, or in one round trip. */
  private async findTarget(request: AuthHookRequest): Promise<HookTarget> {
    const cache = this.options.cache;
    const key = `${request.organizationSlug}/${request.worldSlug}`;
    const cached = cache?.get(key);
    if (cached !== undefined) return cached;
    const snapshot = cache?.snapshot() ?? 0;
    const [target] = await this.db.sql.query<HookTarget>(TARGET, [request.organizationSlug, request.worldSlug]);
    if (target === undefined) {
      throw new AppError(404, "unknown-world", `No such world: ${request.world}.`, { errors: [{ pointer: "/world", detail: "names no known world" }] });
    }
    // Unknown worlds are not cached: creating a world sends no notification.
    cache?.set(key, target, snapshot);
    return target;
  }

  /** Queues one call's history for the next write (see the file comment). */
  private record(rows: readonly HistoryRow[]): void {
    if (rows.length === 0) return;
    this.pending.push(...rows);
    if (this.pending.length >= HISTORY_BATCH_MAX) this.flush();
    else this.flushTimer ??= setTimeout(() => this.flush(), this.options.historyFlushMs ?? HISTORY_FLUSH_MS);
  }

  /** Starts writing the pending history in the background; failures are logged. */
  private flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const rows = this.pending;
    if (rows.length === 0) return;
    this.pending = [];
    const write = this.db.log
      .recordFinished(
        rows.map((r) => ({
          delivery: { id: r.attempt.deliveryId, endpointId: r.endpointId, worldId: r.worldId, type: MEMBER_CONNECTING, body: r.body },
          test: false,
          attempt: r.attempt,
          finishedAt: r.finishedAt,
        })),
      )
      .catch((err: unknown) => {
      this.options.logger.error({ err: (err as Error).message, deliveries: rows.map((r) => r.attempt.deliveryId) }, "auth hook: delivery history not recorded");
    });
    this.writes.add(write);
    void write.finally(() => this.writes.delete(write));
  }
}

/** The world (by its slugs: the world directory's join) and its enabled `auth` endpoints in creation order, in one round trip. */
const TARGET: Statement = {
  name: "ah-target",
  text: `
  SELECT w.id AS world_id, w.world_slug, w.org_slug, w.custom_domain, w.identity_providers,
    COALESCE((
      SELECT json_agg(json_build_object('id', e.id, 'url', e.url, 'format', e.format, 'apiVersion', e.api_version, 'secretSealed', e.secret_sealed,
                                        'headersSealed', e.headers_sealed)
                      ORDER BY e.created_at, e.id)
      FROM webhook_endpoints e
      WHERE e.world_id = w.id AND e.enabled = true AND 'auth' = ANY(e.subscriptions)
    ), '[]'::json) AS endpoints
  FROM ${worldsBySlugs("ARRAY[$1::text]", "ARRAY[$2::text]")} w`,
};
