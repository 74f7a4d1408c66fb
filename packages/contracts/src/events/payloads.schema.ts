/**
 * The `data` payload of every delivered type (spec: "Events"), as TypeScript types and JSON
 * Schemas, plus the flat legacy body of `member.connecting`.
 *
 * The domain payloads are closed (`additionalProperties: false`): the service produces them, and a
 * misspelt member at intake is a producer bug worth refusing. Their shape may change only with a
 * new `apiVersion`. Analytics, being experimental, stays open (see ./analytics.schema.ts).
 */
import { ANALYTICS_EVENT_SCHEMA_ID, type AnalyticsEvent } from "./analytics.schema.js";
import { SCHEMA_DIALECT, webhookSchemaId, type DeliveredEventType } from "./event-types.js";

/** How a visitor registered: the self-register form (after email verification) or single sign-on. */
export const VISITOR_REGISTRATION_METHODS = ["email", "sso"] as const;
export type VisitorRegistrationMethod = (typeof VISITOR_REGISTRATION_METHODS)[number];

/** Whose consent changed. */
export const CONSENT_SUBJECT_TYPES = ["member", "visitor"] as const;
export type ConsentSubjectType = (typeof CONSENT_SUBJECT_TYPES)[number];

/** The purposes needing consent, declared on the privacy and compliance page. */
export const CONSENT_PURPOSES = ["newsletter", "events", "feedback_survey", "third_party", "community", "custom"] as const;
export type ConsentPurpose = (typeof CONSENT_PURPOSES)[number];

/** Most inner events in one `analytics.batch` delivery. */
export const ANALYTICS_BATCH_MAX_EVENTS = 100;

/** `recording.completed`: a meeting recording is ready. */
export interface RecordingCompletedData {
  recordingId: string;
  room: { url: string };
  /** Member who started the recording; null for a visitor without a member account. */
  recorder: { uuid: string; name: string; email: string } | null;
  startedAt: string;
  endedAt: string;
  durationSeconds: number;
  sizeBytes: number;
  /** Valid 7 days, retries included; anyone holding it can fetch the file. */
  downloadUrl: string;
  /** When the recording is deleted: three months after creation. */
  expiresAt: string;
}

/** `visitor.registered`: a visitor account became usable. */
export interface VisitorRegisteredData {
  uuid: string;
  name: string;
  email: string;
  via: VisitorRegistrationMethod;
}

/** `consent.changed`: one recorded consent decision for one purpose. */
export interface ConsentChangedData {
  uuid: string;
  email: string;
  type: ConsentSubjectType;
  purpose: ConsentPurpose;
  /** true: given; false: refused or withdrawn; null: taken off the record (the person will be asked again). */
  granted: boolean | null;
}

/** An OAuth 2.0 access token of an identity provider the member signed in with. */
export interface ProviderAccessToken {
  /** Id of the identity provider configuration (the `{id}` of its `/oauth/{id}/callback` address). */
  provider: string;
  token: string;
}

/** `member.connecting`: sent synchronously while a member (or visitor) is authenticated. */
export interface MemberConnectingData {
  roomUrl: string;
  uuid: string;
  /** Empty for an anonymous member. */
  accessTokens: ProviderAccessToken[];
}

/** Flat body of `member.connecting` for legacy-format endpoints: no envelope. */
export interface LegacyAuthBody {
  roomUrl: string;
  uuid: string;
  /** The first of `accessTokens`, or null when there is none. */
  accessToken: string | null;
  action: "auth";
}

/** `analytics.batch` (experimental): up to {@link ANALYTICS_BATCH_MAX_EVENTS} inner events. */
export interface AnalyticsBatchData {
  events: AnalyticsEvent[];
  [member: string]: unknown;
}

/** `ping` (Test action): always `{}`. */
export type PingData = Record<string, never>;

/** The `data` type of each delivered type. */
export interface EventDataByType {
  "recording.completed": RecordingCompletedData;
  "visitor.registered": VisitorRegisteredData;
  "consent.changed": ConsentChangedData;
  "analytics.batch": AnalyticsBatchData;
  "member.connecting": MemberConnectingData;
  ping: PingData;
}

// ---- JSON Schemas -------------------------------------------------------------------------------

const dateTime = { type: "string", format: "date-time" } as const;
const nonEmpty = { type: "string", minLength: 1 } as const;
const url = { type: "string", format: "uri" } as const;
const email = { type: "string", format: "email" } as const;

export const RECORDING_COMPLETED_DATA_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("recording.completed"),
  title: "recording.completed data",
  description: "A meeting recording is ready. Failed recordings produce no event.",
  type: "object",
  additionalProperties: false,
  required: ["recordingId", "room", "recorder", "startedAt", "endedAt", "durationSeconds", "sizeBytes", "downloadUrl", "expiresAt"],
  properties: {
    recordingId: { ...nonEmpty, description: "Recording identifier." },
    room: { type: "object", additionalProperties: false, required: ["url"], properties: { url } },
    recorder: {
      type: ["object", "null"],
      description: "Member who started the recording; null when the recorder was a visitor without a member account.",
      additionalProperties: false,
      required: ["uuid", "name", "email"],
      properties: {
        uuid: { ...nonEmpty, description: "Member identifier, as in the Inbound API." },
        name: { type: "string" },
        email,
      },
    },
    startedAt: dateTime,
    endedAt: dateTime,
    durationSeconds: { type: "integer", minimum: 0 },
    sizeBytes: { type: "integer", minimum: 0 },
    downloadUrl: { ...url, description: "Valid 7 days, retries and replays included; anyone holding it can fetch the file." },
    expiresAt: { ...dateTime, description: "When the service deletes the recording (three months after creation)." },
  },
} as const;

export const VISITOR_REGISTERED_DATA_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("visitor.registered"),
  title: "visitor.registered data",
  description: "A visitor account became usable: at once after single sign-on, after email verification otherwise.",
  type: "object",
  additionalProperties: false,
  required: ["uuid", "name", "email", "via"],
  properties: {
    uuid: { ...nonEmpty, description: "Visitor identifier, as in the Inbound API." },
    name: { type: "string", description: "Personal data." },
    email: { ...email, description: "Personal data." },
    via: { enum: [...VISITOR_REGISTRATION_METHODS], description: "`email` (self-register form) or `sso` (OpenID Connect or social login)." },
  },
} as const;

export const CONSENT_CHANGED_DATA_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("consent.changed"),
  title: "consent.changed data",
  description: "One recorded consent decision for one purpose. When order matters, keep the delivery with the latest timestamp.",
  type: "object",
  additionalProperties: false,
  required: ["uuid", "email", "type", "purpose", "granted"],
  properties: {
    uuid: { ...nonEmpty, description: "Person identifier." },
    email: { ...email, description: "Personal data." },
    type: { enum: [...CONSENT_SUBJECT_TYPES] },
    purpose: { enum: [...CONSENT_PURPOSES] },
    granted: {
      type: ["boolean", "null"],
      description:
        "true: given; false: refused or withdrawn; null: an administrator took the decision off the record. " +
        "On false or null, stop using the data for that purpose.",
    },
  },
} as const;

export const MEMBER_CONNECTING_DATA_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("member.connecting"),
  title: "member.connecting data",
  description: "Sent synchronously while a member or visitor is authenticated, on every connection; upsert on uuid.",
  type: "object",
  additionalProperties: false,
  required: ["roomUrl", "uuid", "accessTokens"],
  properties: {
    roomUrl: { ...url, description: "Room being entered." },
    uuid: { ...nonEmpty, description: "Member identifier." },
    accessTokens: {
      type: "array",
      description: "One per configured provider the member signed in with that exposes its token; empty for an anonymous member.",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["provider", "token"],
        properties: {
          provider: { ...nonEmpty, description: "Id of the identity provider configuration (`/oauth/{id}/callback`)." },
          token: { ...nonEmpty, description: "OAuth 2.0 access token." },
        },
      },
    },
  },
} as const;

export const LEGACY_AUTH_BODY_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("member.connecting.legacy"),
  title: "member.connecting legacy body",
  description: "Whole body sent to legacy-format endpoints instead of the envelope; the webhook-id header is still sent.",
  type: "object",
  additionalProperties: false,
  required: ["roomUrl", "uuid", "accessToken", "action"],
  properties: {
    roomUrl: { ...url, description: "Room being entered." },
    uuid: { ...nonEmpty, description: "Member identifier." },
    accessToken: { type: ["string", "null"], description: "The first of the member's access tokens, or null." },
    action: { const: "auth" },
  },
} as const;

export const ANALYTICS_BATCH_DATA_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("analytics.batch"),
  title: "analytics.batch data (experimental)",
  description: "Inner events gathered since the previous batch; the envelope timestamp is when the batch was assembled.",
  type: "object",
  required: ["events"],
  properties: {
    events: { type: "array", maxItems: ANALYTICS_BATCH_MAX_EVENTS, items: { $ref: ANALYTICS_EVENT_SCHEMA_ID } },
  },
} as const;

export const PING_DATA_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: webhookSchemaId("ping"),
  title: "ping data",
  description: "Sent only by the dashboard Test action; always an empty object.",
  type: "object",
  additionalProperties: false,
} as const;

/** The `data` schema of each delivered type. */
export const EVENT_DATA_SCHEMAS = {
  "recording.completed": RECORDING_COMPLETED_DATA_SCHEMA,
  "visitor.registered": VISITOR_REGISTERED_DATA_SCHEMA,
  "consent.changed": CONSENT_CHANGED_DATA_SCHEMA,
  "analytics.batch": ANALYTICS_BATCH_DATA_SCHEMA,
  "member.connecting": MEMBER_CONNECTING_DATA_SCHEMA,
  ping: PING_DATA_SCHEMA,
} as const satisfies Record<DeliveredEventType, { $id: string }>;
