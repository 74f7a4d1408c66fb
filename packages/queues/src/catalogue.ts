/**
 * The queue catalogue: every BullMQ queue and job name of the platform and the schema of each
 * job's payload, declared once. Job names carry a version (`deliver.v1`): a payload shape change
 * gets a new name, so workers of both versions can drain a queue during a rolling deploy.
 */
import { UnrecoverableError } from "bullmq";
import { compileValidator, type ValidationResult } from "@vw/contracts";

/** Queue names (BullMQ keys are `<prefix>:<queue>:...`). */
export const QUEUE_NAMES = {
  /** Webhook deliveries waiting for their next attempt (initial, retry, replay). */
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
  /** A run of a delivery: {@link DeliverJobData}. */
  deliver: "deliver.v2",
  /**
   * The previous shape ({@link LegacyDeliverJobData}): still processed, so jobs queued before an
   * upgrade are sent; nothing adds it any more.
   */
  deliverV1: "deliver.v1",
  endpointDisabledMail: "endpoint-disabled-mail.v1",
  retention: "retention.v1",
  analyticsFlush: "analytics-flush.v1",
  recover: "recover.v1",
} as const;

/** Why a delivery run was queued (`deliver.v1` only; a run's trigger is now read from its row). */
export type DeliveryTrigger = "initial" | "replay";

/**
 * Payload of `deliver.v2`: which run of which stored delivery to send. Everything else (where
 * the run stands in its retry schedule, when it is due, whether it is a replay) is read from the
 * delivery row, the schedule of record, so a job rebuilt from PostgreSQL after Redis lost its data
 * is the same job.
 */
export interface DeliverJobData {
  deliveryId: string;
  /** Redundant with the delivery row; lets the worker apply per-endpoint limits before any read. */
  endpointId: string;
  /** The delivery's run (0 first, +1 per Replay or recover): a job of an older run sends nothing. */
  run: number;
}

/** Payload of `deliver.v1`, queued by earlier versions: its run is whatever the row's is. */
export interface LegacyDeliverJobData {
  deliveryId: string;
  endpointId: string;
  trigger: DeliveryTrigger;
  attempt?: number;
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

/** `deliver.v2` payload validator. */
export const validateDeliverJob: (data: unknown) => ValidationResult<DeliverJobData> = compileValidator<DeliverJobData>({
  type: "object",
  required: ["deliveryId", "endpointId", "run"],
  additionalProperties: false,
  properties: {
    deliveryId: UUID,
    endpointId: UUID,
    run: { type: "integer", minimum: 0 },
  },
});

/** `deliver.v1` payload validator. */
export const validateLegacyDeliverJob: (data: unknown) => ValidationResult<LegacyDeliverJobData> = compileValidator<LegacyDeliverJobData>({
  type: "object",
  required: ["deliveryId", "endpointId", "trigger"],
  additionalProperties: false,
  properties: {
    deliveryId: UUID,
    endpointId: UUID,
    trigger: { enum: ["initial", "replay"] },
    attempt: { type: "integer", minimum: 0 },
  },
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
