import type { EventEmitter } from "node:events";
import type { Logger } from "./logger.js";

/**
 * Up/down state of one backing service (Redis, PostgreSQL) as seen by one process, logged once per
 * change: the first failure logs `<name> unreachable` (error, with the error's code and message,
 * no stack: the client retries on its own, so each retry would otherwise add a multi-line trace),
 * failures while down are only counted, and the first success after that logs `<name> reachable
 * again` (info) with how long it was down and how many failures were absorbed.
 */
export class DependencyStatus {
  private downSince: number | null = null;
  private failures = 0;

  constructor(
    private readonly logger: Logger,
    /** `redis`, `postgresql`: the `dependency` field of the lines. */
    readonly dependency: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** True while the last report was a failure. */
  get isDown(): boolean {
    return this.downSince !== null;
  }

  /** A client error: logged if the dependency was up, counted otherwise. */
  down(err: unknown, context: Record<string, unknown> = {}): void {
    this.failures++;
    if (this.downSince !== null) return;
    this.downSince = this.now();
    this.logger.error({ dependency: this.dependency, error: describeError(err), ...context }, `${this.dependency} unreachable`);
  }

  /** A success (connection ready, query answered): logged if the dependency was down. */
  up(context: Record<string, unknown> = {}): void {
    if (this.downSince === null) return;
    const downForMs = this.now() - this.downSince;
    const failures = this.failures;
    this.downSince = null;
    this.failures = 0;
    this.logger.info({ dependency: this.dependency, downForMs, failures, ...context }, `${this.dependency} reachable again`);
  }
}

/** `{code, message}` of an error, first line only: enough to tell ECONNREFUSED from an auth failure. */
export function describeError(err: unknown): { code?: string; message: string } {
  const e = err as { code?: unknown; message?: unknown } | null;
  const message = typeof e?.message === "string" ? (e.message.split("\n")[0] ?? "") : String(err);
  return typeof e?.code === "string" ? { code: e.code, message } : { message };
}

const shared = new WeakMap<Logger, Map<string, DependencyStatus>>();

/**
 * The process-wide status of `dependency` for `logger`: every client of one dependency in a process
 * (several Redis connections, BullMQ workers' own connections) reports to the same one, so an
 * outage is one `unreachable` line and one `reachable again` line, not one per client and retry.
 */
export function dependencyStatus(logger: Logger, dependency: string): DependencyStatus {
  let byName = shared.get(logger);
  if (!byName) shared.set(logger, (byName = new Map()));
  let status = byName.get(dependency);
  if (!status) byName.set(dependency, (status = new DependencyStatus(logger, dependency)));
  return status;
}

/**
 * Reports an ioredis connection's `error` and `ready` events to the process's `redis` status.
 * Also the listener without which ioredis prints every retry's stack trace to stderr.
 */
export function watchRedisConnection(redis: EventEmitter, logger: Logger): void {
  const status = dependencyStatus(logger, "redis");
  redis.on("error", (err: unknown) => status.down(err));
  redis.on("ready", () => status.up());
}

/**
 * An `error` listener for a BullMQ worker or queue: connection failures go to the `redis` status
 * (one line per outage); the locks of jobs lost with an outage (BullMQ cannot renew or release
 * them once Redis restarted or lost its data: the jobs are handed out again, and the reconciler
 * queues what is gone) are counted and logged as one warning per {@link LOCK_LOSS_WINDOW_MS};
 * anything else is logged as an error with `msg`.
 */
export function redisClientErrorListener(logger: Logger, msg: string, now: () => number = Date.now): (err: unknown) => void {
  const status = dependencyStatus(logger, "redis");
  let lost = 0;
  let windowStart = 0;
  return (err) => {
    if (isDependencyUnavailable(err)) return status.down(err);
    if (isLostJobLock(err)) {
      lost += 1;
      if (now() - windowStart < LOCK_LOSS_WINDOW_MS) return;
      windowStart = now();
      logger.warn({ jobLocksLost: lost, example: describeError(err).message }, `${msg}: job locks lost with a Redis outage; those jobs are handed out again`);
      lost = 0;
      return;
    }
    logger.error({ err }, msg);
  };
}

/** How often lost job locks are reported (see {@link redisClientErrorListener}). */
export const LOCK_LOSS_WINDOW_MS = 10_000;

/** BullMQ's errors for a job whose lock or key went away (a Redis restart or data loss, a stalled job taken over). */
export function isLostJobLock(err: unknown): boolean {
  const message = err instanceof Error ? err.message : "";
  return /could not renew lock for job|Missing lock for job|Missing key for job|Lock mismatch for job/.test(message);
}

const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH"]);

/**
 * True for failures of a backing service (network errors, Redis offline, S3 5xx, database
 * unreachable): the request may succeed later, so they are answered 503, not 500.
 */
export function isDependencyUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown; message?: unknown; $metadata?: { httpStatusCode?: number } } | null;
  if (!e || typeof e !== "object") return false;
  // Network codes; Prisma's P1001/P1002/P1017 (unreachable, timed out, closed); PostgreSQL's
  // SQLSTATEs (via pg) of a lost connection (class 08), a shutdown or restart (57P01-57P03) and
  // too many connections (53300).
  if (typeof e.code === "string" && (NETWORK_CODES.has(e.code) || /^P10(0[1-2]|17)$|^08...$|^57P0[1-3]$|^53300$/.test(e.code))) return true;
  if (e.name === "MaxRetriesPerRequestError" || e.name === "TimeoutError") return true;
  // ioredis offline or closed; Prisma unreachable; pg's pool or client losing its connection (or
  // asked for a statement on a connection it lost before).
  if (
    typeof e.message === "string" &&
    /enableOfflineQueue|Connection is closed|Can't reach database server|Connection terminated|timeout exceeded when trying to connect|encountered a connection error and is not queryable/.test(e.message)
  )
    return true;
  const status = e.$metadata?.httpStatusCode;
  return typeof status === "number" && status >= 500;
}
