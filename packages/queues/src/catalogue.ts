/**
 * The queue catalogue: every BullMQ queue and job name of the platform and the schema of each
 * job's payload, declared once. Job names carry a version (`deliver.v1`): a payload shape change
 * gets a new name, so workers of both versions can drain a queue during a rolling deploy.
 */
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
  deliver: "deliver.v1",
  endpointDisabledMail: "endpoint-disabled-mail.v1",
  retention: "retention.v1",
  analyticsFlush: "analytics-flush.v1",
  recover: "recover.v1",
} as const;

/** Why a delivery run was queued. Retries continue the run of their job. */
export type DeliveryTrigger = "initial" | "replay";

/** Payload of `deliver.v1`: which stored delivery to send, and where this run stands. */
export interface DeliverJobData {
  deliveryId: string;
  /** Redundant with the delivery row; lets the worker apply per-endpoint limits before any read. */
  endpointId: string;
  trigger: DeliveryTrigger;
  /** Attempts already made by this run (absent = 0); written by the worker before each retry. */
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

/** `deliver.v1` payload validator. */
export const validateDeliverJob: (data: unknown) => ValidationResult<DeliverJobData> = compileValidator<DeliverJobData>({
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
