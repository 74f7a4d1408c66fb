/**
 * The queue catalogue: every BullMQ queue and job name of the platform and the schema of each
 * job's payload, declared once. Job names carry a version (`drain.v1`): a payload shape change
 * gets a new name, so workers of both versions can drain a queue during a rolling deploy.
 */
import { UnrecoverableError } from "bullmq";
import { compileValidator, type ValidationResult } from "@vw/contracts";

/** Queue names (BullMQ keys are `<prefix>:<queue>:...`). */
export const QUEUE_NAMES = {
  /** Endpoint drains: which endpoints have deliveries due (drain-signals.ts); the deliveries themselves are in PostgreSQL. */
  deliveries: "webhook-deliveries",
  /** E-mails to world administrators (endpoint disabled). */
  notifications: "notifications",
  /** Scheduled housekeeping (delivery-history retention). */
  maintenance: "maintenance",
  /** The analytics flush schedule: buffered inner events become `analytics.batch` deliveries. */
  analytics: "analytics",
  /** Recover jobs: every failed delivery of an endpoint in a time window, queued again. */
  recoveries: "delivery-recoveries",
} as const;

/** Job names, versioned. */
export const JOB_NAMES = {
  /** An endpoint's drain, or a timer that wakes one: {@link DrainJobData}. */
  drain: "drain.v1",
  endpointDisabledMail: "endpoint-disabled-mail.v1",
  retention: "retention.v1",
  analyticsFlush: "analytics-flush.v1",
  recover: "recover.v1",
} as const;

/**
 * Payload of `drain.v1`: the endpoint whose due deliveries a worker sends (job `d-<endpointId>`),
 * or wakes at a retry's due time (job `t-<endpointId>-<second>`). Which deliveries, and where each
 * stands, is read from PostgreSQL when the drain claims them.
 */
export interface DrainJobData {
  endpointId: string;
}

/** Why an endpoint was disabled automatically (a manual disable sends no mail). */
export type AutomaticDisableReason = "gone" | "failures";

/** Payload of `endpoint-disabled-mail.v1`. */
export interface EndpointDisabledMailData {
  endpointId: string;
  reason: AutomaticDisableReason;
  /** ISO 8601 instant of the disable. */
  disabledAt: string;
  /** The attempt that caused it: its delivery, HTTP status (if any) and error (if any). */
  deliveryId: string;
  status: number | null;
  error: string | null;
  /** Consecutive failures at that moment. */
  consecutiveFailures: number;
}

/** Payload of `retention.v1`: nothing; the worker's configuration says how old is too old. */
export type RetentionJobData = Record<string, never>;

/** Payload of `analytics-flush.v1`: nothing; the flush reads the buffers of every pending endpoint. */
export type AnalyticsFlushJobData = Record<string, never>;

const UUID = { type: "string", pattern: "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$" };

/** Payload of `recover.v1`: the recovery row to run (its endpoint, window and progress are stored there). */
export interface RecoverJobData {
  recoveryId: string;
}

/** `drain.v1` payload validator. */
export const validateDrainJob: (data: unknown) => ValidationResult<DrainJobData> = compileValidator<DrainJobData>({
  type: "object",
  required: ["endpointId"],
  additionalProperties: false,
  properties: { endpointId: UUID },
});

/** `endpoint-disabled-mail.v1` payload validator. */
export const validateEndpointDisabledMail: (data: unknown) => ValidationResult<EndpointDisabledMailData> =
  compileValidator<EndpointDisabledMailData>({
    type: "object",
    required: ["endpointId", "reason", "disabledAt", "deliveryId", "status", "error", "consecutiveFailures"],
    additionalProperties: false,
    properties: {
      endpointId: UUID,
      reason: { enum: ["gone", "failures"] },
      disabledAt: { type: "string", format: "date-time" },
      deliveryId: UUID,
      status: { type: ["integer", "null"] },
      error: { type: ["string", "null"] },
      consecutiveFailures: { type: "integer", minimum: 0 },
    },
  });

/** `retention.v1` payload validator. */
export const validateRetentionJob: (data: unknown) => ValidationResult<RetentionJobData> = compileValidator<RetentionJobData>({
  type: "object",
  additionalProperties: false,
});

/** `analytics-flush.v1` payload validator. */
export const validateAnalyticsFlushJob: (data: unknown) => ValidationResult<AnalyticsFlushJobData> = compileValidator<AnalyticsFlushJobData>({
  type: "object",
  additionalProperties: false,
});

/** `recover.v1` payload validator. */
export const validateRecoverJob: (data: unknown) => ValidationResult<RecoverJobData> = compileValidator<RecoverJobData>({
  type: "object",
  required: ["recoveryId"],
  additionalProperties: false,
  properties: { recoveryId: UUID },
});

/** Thrown when a job payload does not match its schema (on add, or on process: unrecoverable). */
export class JobPayloadError extends Error {
  constructor(
    readonly jobName: string,
    readonly problems: string,
  ) {
    super(`invalid ${jobName} payload: ${problems}`);
    this.name = "JobPayloadError";
  }
}

/** Returns the payload typed, or throws {@link JobPayloadError} naming every bad field. */
export function assertPayload<T>(jobName: string, validate: (data: unknown) => ValidationResult<T>, data: unknown): T {
  const result = validate(data);
  if (result.ok) return result.value;
  throw new JobPayloadError(jobName, result.errors.map((e) => `${e.pointer || "/"} ${e.detail}`).join("; "));
}

/**
 * A job's payload as its worker reads it: {@link assertPayload}, except that an invalid payload is
 * an `UnrecoverableError` (no run of that job can succeed, so BullMQ fails it at once).
 */
export function jobPayload<T>(jobName: string, validate: (data: unknown) => ValidationResult<T>, data: unknown): T {
  try {
    return assertPayload(jobName, validate, data);
  } catch (err) {
    if (err instanceof JobPayloadError) throw new UnrecoverableError(err.message);
    throw err;
  }
}
