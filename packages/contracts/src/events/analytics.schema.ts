/**
 * The inner analytics event carried by `analytics.batch` (spec: "analytics.batch", "Analytics
 * properties"): its TypeScript types and its JSON Schema.
 *
 * Analytics is experimental and follows the product: every object accepts extra members, every
 * property is optional, and a name the schema does not know is accepted with any properties. Only
 * the properties the spec tabulates are typed, so a known name with a wrongly typed tabulated
 * property is refused.
 */
import {
  LISTED_ANALYTICS_EVENT_NAMES,
  MEDIA_SERVER_SWITCH_REQUESTED_PATTERN,
  type ListedAnalyticsEventName,
} from "./analytics-names.js";
import { SCHEMA_DIALECT, webhookSchemaId } from "./event-types.js";

/** Who produced an analytics event: the browser, the server (authoritative for durations and sessions) or the media layer. */
export const ANALYTICS_SOURCES = ["front", "pusher", "media"] as const;
export type AnalyticsSource = (typeof ANALYTICS_SOURCES)[number];

/** Why an interval (`area.dwell`, `cowebsite.closed`) ended. */
export const ANALYTICS_END_REASONS = [
  "closed_by_client",
  "socket_closed",
  "join_failed",
  "pusher_shutdown",
  "pusher_crashed",
] as const;
export type AnalyticsEndReason = (typeof ANALYTICS_END_REASONS)[number];

/** `cowebsite.closed` `mediaKind`, inferred in the browser from the full URL. */
export const COWEBSITE_MEDIA_KINDS = [
  "pdf",
  "image",
  "video",
  "audio",
  "document",
  "presentation",
  "spreadsheet",
  "website",
  "other",
] as const;
export type CowebsiteMediaKind = (typeof COWEBSITE_MEDIA_KINDS)[number];

/** `cowebsite.closed` `triggerProperty`: what caused the opening. */
export const COWEBSITE_TRIGGER_PROPERTIES = ["openLink", "openWebsite", "other"] as const;
export type CowebsiteTriggerProperty = (typeof COWEBSITE_TRIGGER_PROPERTIES)[number];

/** Properties of an event whose properties the spec does not tabulate: anything. */
export type OpenAnalyticsProperties = Record<string, unknown>;

/** Interval fields shared by `area.dwell` and `cowebsite.closed`. */
export interface AnalyticsIntervalProperties {
  startedAt?: string;
  endedAt?: string;
  /** Minimum 0. */
  durationSeconds?: number;
  endReason?: AnalyticsEndReason;
  [member: string]: unknown;
}

/** `area.dwell`: one per visit, emitted by the server when the interval closes. */
export interface AreaDwellProperties extends AnalyticsIntervalProperties {
  areaId?: string;
  /** Name authored on the map. */
  areaName?: string;
}

/** `asset.error`: a tileset (`tile`) or another asset failed. */
export interface AssetErrorProperties {
  kind?: "tile" | "asset";
  reason?: string;
  [member: string]: unknown;
}

/** `auth.user_identified` */
export interface AuthUserIdentifiedProperties {
  /** Room of identification when known. */
  roomId?: string | null;
  [member: string]: unknown;
}

/** `chat.message_sent` (message content is never collected). */
export interface ChatMessageSentProperties {
  /** `proximity`: nearby group; `room`: whole room. */
  chatContext?: "proximity" | "room";
  [member: string]: unknown;
}

/** `cowebsite.opened`: origins only (query, hash and path removed). */
export interface CowebsiteOpenedProperties {
  url?: string;
  targetUrl?: string;
  [member: string]: unknown;
}

/** `cowebsite.closed`: one per cowebsite when it closes. */
export interface CowebsiteClosedProperties extends AnalyticsIntervalProperties {
  url?: string;
  targetUrl?: string;
  mediaKind?: CowebsiteMediaKind;
  triggerProperty?: CowebsiteTriggerProperty;
  /** Stripped for worlds that opted out of user-level activity. */
  fileName?: string | null;
  fileExtension?: string | null;
  areaId?: string;
  areaName?: string;
  schemaVersion?: number;
}

/** `user.disconnected` (source `pusher`). */
export interface UserDisconnectedProperties {
  connectedAt?: string;
  disconnectedAt?: string;
  durationSeconds?: number;
  /** `socket_closed` among others; the full value set is not published. */
  disconnectReason?: string;
  [member: string]: unknown;
}

/** The events whose properties the spec tabulates, with their property types. */
export interface TypedAnalyticsProperties {
  "area.dwell": AreaDwellProperties;
  "asset.error": AssetErrorProperties;
  "auth.user_identified": AuthUserIdentifiedProperties;
  "chat.message_sent": ChatMessageSentProperties;
  "cowebsite.closed": CowebsiteClosedProperties;
  "cowebsite.opened": CowebsiteOpenedProperties;
  "user.disconnected": UserDisconnectedProperties;
}

/** Properties type of an event name: the tabulated shape, or an open object for any other name. */
export type AnalyticsPropertiesOf<N extends string> = N extends keyof TypedAnalyticsProperties
  ? TypedAnalyticsProperties[N]
  : OpenAnalyticsProperties;

/** `data` of an inner analytics event. */
export interface AnalyticsEventData<N extends string = string> {
  eventName: N;
  source: AnalyticsSource;
  eventTime: string;
  /** Pseudonymous for worlds that opted out of user-level activity. */
  user: { uuid: string; [member: string]: unknown };
  room: { url: string; [member: string]: unknown };
  properties: AnalyticsPropertiesOf<N>;
  [member: string]: unknown;
}

/** One inner event of `analytics.batch`. `type` repeats the event name. */
export interface AnalyticsEvent<N extends string = string> {
  id: string;
  type: string;
  timestamp: string;
  data: AnalyticsEventData<N>;
  [member: string]: unknown;
}

// ---- JSON Schema --------------------------------------------------------------------------------

export const ANALYTICS_EVENT_SCHEMA_ID = webhookSchemaId("analytics-event");

const dateTime = { type: "string", format: "date-time" } as const;
const openObject = { type: "object" } as const;

const intervalProperties = {
  startedAt: { ...dateTime, description: "Start of the interval." },
  endedAt: { ...dateTime, description: "End of the interval." },
  durationSeconds: { type: "number", minimum: 0, description: "Length in seconds." },
  endReason: {
    enum: [...ANALYTICS_END_REASONS],
    description:
      "For cowebsite, `socket_closed` and the `pusher_*` values mean the tab went away with the cowebsite still open.",
  },
} as const;

const origins = {
  url: { type: "string", description: "Origin only; query, hash and path are removed." },
  targetUrl: { type: "string", description: "Origin of the opened target, reduced the same way." },
} as const;

/**
 * The typed properties schemas, by event name. None has `required` or `additionalProperties`: every
 * property may be missing and new ones may appear.
 */
export const ANALYTICS_PROPERTIES_SCHEMAS = {
  "area.dwell": {
    type: "object",
    description: "One per visit, emitted by the server when the interval closes and timestamped at its end.",
    properties: {
      areaId: { type: "string" },
      areaName: { type: "string", description: "Name authored on the map." },
      ...intervalProperties,
    },
  },
  "asset.error": {
    type: "object",
    description: "Counts as an experience issue.",
    properties: {
      kind: { enum: ["tile", "asset"], description: "A tileset (`tile`) or another asset failed." },
      reason: { type: "string", description: "What failed." },
    },
  },
  "auth.user_identified": {
    type: "object",
    properties: { roomId: { type: ["string", "null"], description: "Room of identification when known." } },
  },
  "chat.message_sent": {
    type: "object",
    description: "Message content is never collected.",
    properties: {
      chatContext: { enum: ["proximity", "room"], description: "`proximity`: nearby group; `room`: whole room." },
    },
  },
  "cowebsite.closed": {
    type: "object",
    description: "One per cowebsite when it closes.",
    properties: {
      ...origins,
      mediaKind: { enum: [...COWEBSITE_MEDIA_KINDS], description: "Inferred in the browser from the full URL." },
      triggerProperty: { enum: [...COWEBSITE_TRIGGER_PROPERTIES], description: "What caused the opening." },
      fileName: {
        type: ["string", "null"],
        description: "Document name; stripped for worlds that opted out of user-level activity.",
      },
      fileExtension: { type: ["string", "null"], description: "Extension derived in the browser." },
      areaId: { type: "string", description: "Area it was opened from." },
      areaName: { type: "string" },
      schemaVersion: { type: "number", description: "Payload version of the cowebsite family." },
      ...intervalProperties,
    },
  },
  "cowebsite.opened": { type: "object", properties: { ...origins } },
  "user.disconnected": {
    type: "object",
    description: "Measured by the server (source `pusher`).",
    properties: {
      connectedAt: dateTime,
      disconnectedAt: dateTime,
      durationSeconds: { type: "integer" },
      disconnectReason: { type: "string", description: "For instance `socket_closed`; the full value set is not published." },
    },
  },
} as const satisfies { [N in ListedAnalyticsEventName]?: object };

// The typed property interfaces and the schemas must name the same events.
type SameKeys<A, B> = [keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : never) : never;
const typedKeysMatch: SameKeys<TypedAnalyticsProperties, typeof ANALYTICS_PROPERTIES_SCHEMAS> = true;
void typedKeysMatch;

const typedNames: ReadonlySet<string> = new Set(Object.keys(ANALYTICS_PROPERTIES_SCHEMAS));

function propertiesSchemaOf(name: ListedAnalyticsEventName): object {
  return typedNames.has(name)
    ? ANALYTICS_PROPERTIES_SCHEMAS[name as keyof typeof ANALYTICS_PROPERTIES_SCHEMAS]
    : openObject;
}

// One if/then per listed name, keyed on `eventName`. if/then (rather than oneOf) keeps an
// unknown name valid by construction: no `if` matches it, so no `then` applies.
const listedBranches = LISTED_ANALYTICS_EVENT_NAMES.map((name) => ({
  if: { properties: { eventName: { const: name } }, required: ["eventName"] },
  then: { properties: { properties: propertiesSchemaOf(name) } },
}));

const mediaSwitchBranch = {
  if: {
    properties: { eventName: { type: "string", pattern: MEDIA_SERVER_SWITCH_REQUESTED_PATTERN } },
    required: ["eventName"],
  },
  then: { properties: { properties: openObject } },
};

// Explicit, so readers of the schema see that other names are welcome (spec: Versioning).
const unknownNameBranch = {
  if: {
    properties: {
      eventName: {
        not: { anyOf: [{ enum: [...LISTED_ANALYTICS_EVENT_NAMES] }, { type: "string", pattern: MEDIA_SERVER_SWITCH_REQUESTED_PATTERN }] },
      },
    },
    required: ["eventName"],
  },
  then: { properties: { properties: openObject } },
};

/**
 * The inner analytics event (draft 2020-12). `data.properties` is checked by one branch per listed
 * name, one for the media `<media_server>_switch.requested` names, and a last one accepting any
 * other name with any properties.
 */
export const ANALYTICS_EVENT_SCHEMA = {
  $schema: SCHEMA_DIALECT,
  $id: ANALYTICS_EVENT_SCHEMA_ID,
  title: "Analytics event (experimental)",
  description:
    "One usage event of a world. Names and properties may change without a new apiVersion; unknown names are accepted, " +
    "every property may be missing and every object accepts extra members.",
  type: "object",
  required: ["id", "type", "timestamp", "data"],
  properties: {
    id: { type: "string", description: "Inner event identifier." },
    type: { type: "string", description: "The analytics event name." },
    timestamp: { ...dateTime, description: "When the inner event happened." },
    data: {
      type: "object",
      required: ["eventName", "source", "eventTime", "user", "room", "properties"],
      properties: {
        eventName: { type: "string", minLength: 1, description: "The event name: `<family>.<suffix>`." },
        source: {
          enum: [...ANALYTICS_SOURCES],
          description: "`front` (browser), `pusher` (server, authoritative for durations and sessions) or `media`.",
        },
        eventTime: { ...dateTime, description: "Event time." },
        user: {
          type: "object",
          required: ["uuid"],
          properties: { uuid: { type: "string", description: "Pseudonymous for worlds that opted out of user-level activity." } },
        },
        room: { type: "object", required: ["url"], properties: { url: { type: "string" } } },
        properties: { type: "object", description: "Per event name; any property may be missing, extras are allowed." },
      },
      allOf: [...listedBranches, mediaSwitchBranch, unknownNameBranch],
    },
  },
} as const;
