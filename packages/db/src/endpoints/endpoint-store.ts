/**
 * The one owner of `webhook_endpoints`: every change of an endpoint's state goes through it, from
 * admin-api (create, edit, rotate, delete, disable, enable) and from the delivery worker (disable
 * on a 410 or too many failures) alike. The failure counters are written by the delivery log's
 * group commit with `failureCounterUpdate` of endpoint-statements.ts, so that they commit
 * with the attempts that move them, in one statement.
 *
 * Runs over any {@link SqlRunner}: the process's `pg` pool in the worker and in admin-api. Reads of
 * one world's endpoints ({@link EndpointStore.find}, {@link EndpointStore.list}) answer the same
 * {@link EndpointRecord} that writes return, so admin-api shows what it wrote.
 */
import { randomUUID } from "node:crypto";
import { DeliveryLog } from "../delivery-log/delivery-log.js";
import type { SqlRunner } from "../delivery-log/sql-runner.js";
import * as sql from "./endpoint-statements.js";

/** `manual` (an administrator), `gone` (a 410), `failures` (DISABLE_AFTER_FAILURES in a row). */
export type EndpointDisableReason = "manual" | "gone" | "failures";

/** A stored endpoint (the sealed secret included: never show it). */
export interface EndpointRecord {
  id: string;
  worldId: string;
  url: string;
  subscriptions: string[];
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: Date | null;
  format: string;
  apiVersion: string;
  secretSealed: string | null;
  secretRotatedAt: Date | null;
  secretVersion: number;
  consecutiveFailures: number;
  rateLimitPerSecond: number | null;
  /** The custom headers sealed as one value (`sealEndpointHeaders` of @vw/webhook-core); null for none. Never show it. */
  headersSealed: string | null;
  /** Their names, sorted case-insensitively: all that reads show. */
  headerNames: string[];
  createdAt: Date;
  updatedAt: Date;
}

/** An endpoint to create. */
export interface NewEndpoint {
  worldId: string;
  url: string;
  subscriptions: readonly string[];
  format: string;
  apiVersion: string;
  secretSealed: string | null;
  rateLimitPerSecond?: number | null;
  /** Custom headers, sealed; absent for none. */
  headers?: SealedHeaders;
}

/** A set of custom headers as stored: sealed (null for an empty set) and the names reads show. */
export interface SealedHeaders {
  sealed: string | null;
  names: readonly string[];
}

/** What an edit may change; absent fields stay as they are. A new `secretSealed` is a rotation. */
export interface EndpointPatch {
  url?: string;
  subscriptions?: readonly string[];
  rateLimitPerSecond?: number | null;
  format?: string;
  secretSealed?: string;
  /** Replaces the whole set of custom headers (an empty one clears it). */
  headers?: SealedHeaders;
}

/** An endpoint of a world. */
export interface EndpointKey {
  id: string;
  worldId: string;
}

/** A world's endpoint quotas (null: the platform default) and what it has, read under the world's lock. */
export interface WorldEndpointCounts {
  maxEndpoints: number | null;
  maxAuthEndpoints: number | null;
  endpoints: number;
  authEndpoints: number;
  /** The endpoint an edit replaces is subscribed to `auth` already. */
  replacingHasAuth: boolean;
}

/**
 * Decides whether a write may go on, from the world's counts (null: the world is gone); it throws
 * to refuse, and nothing is written.
 */
export type QuotaCheck = (counts: WorldEndpointCounts | null) => void;

/** See the file comment. */
export class EndpointStore {
  /**
   * @param log the process's delivery log (a disable skips pending deliveries through it); one
   *   over `db` when not given.
   */
  constructor(
    private readonly db: SqlRunner,
    private readonly log: DeliveryLog = new DeliveryLog(db),
  ) {}

  /** The endpoint of the world, or null. */
  async find(key: EndpointKey): Promise<EndpointRecord | null> {
    return one(this.db.query<EndpointRecord>(sql.FIND_ENDPOINT, [key.id, key.worldId]));
  }

  /** Up to `limit` endpoints of the world, newest first, after `after` (the last one of the previous page). */
  async list(worldId: string, limit: number, after?: { createdAt: Date; id: string }): Promise<EndpointRecord[]> {
    const rows = await this.db.query<EndpointRecord>(sql.LIST_ENDPOINTS, [worldId, after?.createdAt ?? null, after?.id ?? null, limit]);
    return rows.map(asRecord);
  }

  /** The ids of the world's endpoints. */
  async idsOf(worldId: string): Promise<string[]> {
    return (await this.db.query<{ id: string }>(sql.ENDPOINT_IDS, [worldId])).map((r) => r.id);
  }

  /** Creates an endpoint; with `quota`, under the world's lock, after the check let it. */
  async create(endpoint: NewEndpoint, quota?: QuotaCheck): Promise<EndpointRecord> {
    const write = (tx: SqlRunner) =>
      one(
        tx.query<EndpointRecord>(sql.INSERT_ENDPOINT, [
          randomUUID(),
          endpoint.worldId,
          endpoint.url,
          [...endpoint.subscriptions],
          endpoint.format,
          endpoint.apiVersion,
          endpoint.secretSealed,
          endpoint.rateLimitPerSecond ?? null,
          endpoint.headers?.sealed ?? null,
          [...(endpoint.headers?.names ?? [])],
        ]),
      );
    if (quota === undefined) return (await write(this.db)) as EndpointRecord;
    return (await this.withinQuota(endpoint.worldId, null, quota, write)) as EndpointRecord;
  }

  /** Edits an endpoint of the world; null when there is none. With `quota`, as {@link create}. */
  async update(key: EndpointKey, patch: EndpointPatch, quota?: QuotaCheck): Promise<EndpointRecord | null> {
    const set = <T>(value: T | undefined): [boolean, T | null] => [value !== undefined, value ?? null];
    const write = (tx: SqlRunner) =>
      one(
        tx.query<EndpointRecord>(sql.UPDATE_ENDPOINT, [
          key.id,
          key.worldId,
          ...set(patch.url),
          ...set(patch.subscriptions === undefined ? undefined : [...patch.subscriptions]),
          ...set(patch.rateLimitPerSecond),
          ...set(patch.format),
          ...set(patch.secretSealed),
          ...set(patch.headers?.sealed),
          patch.headers === undefined ? null : [...patch.headers.names],
        ]),
      );
    return quota === undefined ? write(this.db) : this.withinQuota(key.worldId, key.id, quota, write);
  }

  /** Deletes an endpoint of the world with everything hanging on it; false when there was none. */
  async remove(key: EndpointKey): Promise<boolean> {
    const [row] = await this.db.query<{ n: number }>(sql.DELETE_ENDPOINT, [key.id, key.worldId]);
    return (row?.n ?? 0) > 0;
  }

  /**
   * Disables an enabled endpoint (of the world, when `worldId` is given) and skips its pending
   * deliveries, in one transaction: events of the disabled period are never delivered, now or
   * after a re-enable, and a job of such a delivery still queued finds it skipped. Lock order: the
   * endpoint row (its update), then its deliveries, as every writer of both (endpoint-statements.ts).
   * Resolves with the time of the disable when this call made it, null when the endpoint was
   * already disabled (its first reason and time are kept) or is not there.
   */
  async disable(key: { id: string; worldId?: string }, reason: EndpointDisableReason): Promise<Date | null> {
    return this.db.transaction(async (tx) => {
      const [row] = await tx.query<{ disabledAt: Date }>(sql.DISABLE_ENDPOINT, [key.id, key.worldId ?? null, reason]);
      if (row === undefined) return null;
      await this.log.skipPendingOf(key.id, tx);
      return new Date(row.disabledAt);
    });
  }

  /** Re-enables a disabled endpoint of the world, clearing its reason and failure count; an enabled one is left as it is. */
  async enable(key: EndpointKey): Promise<void> {
    await this.db.query(sql.ENABLE_ENDPOINT, [key.id, key.worldId]);
  }

  /** Runs `write` in a transaction holding the world's row, once `check` accepted its counts. */
  private withinQuota<T>(worldId: string, replacing: string | null, check: QuotaCheck, write: (tx: SqlRunner) => Promise<T>): Promise<T> {
    return this.db.transaction(async (tx) => {
      const [world] = await tx.query<{ maxEndpoints: number | null; maxAuthEndpoints: number | null }>(sql.LOCK_WORLD, [worldId]);
      if (world === undefined) {
        check(null);
        throw new Error(`EndpointStore: world ${worldId} is gone and the quota check let the write go on`);
      }
      const [counts] = await tx.query<{ endpoints: number; authEndpoints: number; replacingHasAuth: boolean }>(sql.COUNT_ENDPOINTS, [worldId, replacing]);
      check({ ...world, endpoints: counts?.endpoints ?? 0, authEndpoints: counts?.authEndpoints ?? 0, replacingHasAuth: counts?.replacingHasAuth ?? false });
      return write(tx);
    });
  }
}

/** The only row of a statement's answer as a record (timestamps as Dates whichever runner read them), or null. */
async function one(rows: Promise<EndpointRecord[]>): Promise<EndpointRecord | null> {
  const row = (await rows)[0];
  return row === undefined ? null : asRecord(row);
}

/** A row as a record: timestamps as Dates whichever runner read them. */
function asRecord(row: EndpointRecord): EndpointRecord {
  const date = (d: Date | string | null) => (d === null ? null : new Date(d));
  return { ...row, disabledAt: date(row.disabledAt), secretRotatedAt: date(row.secretRotatedAt), createdAt: new Date(row.createdAt), updatedAt: new Date(row.updatedAt) };
}
