/**
 * Realistic sample payloads of every delivered type: the dashboard Test action sends them, and the
 * OpenAPI document shows them as examples. They are plausible values (UUIDs, https URLs, UTC
 * instants that agree with each other), never real people or tokens.
 */
import type { WebhookSubscription } from "../endpoints.schema.js";
import { CURRENT_API_VERSION } from "../endpoints.schema.js";
import type { AnalyticsEvent } from "./analytics.schema.js";
import type { WebhookDelivery, WebhookWorld } from "./envelope.schema.js";
import type { DeliveredEventType } from "./event-types.js";
import type { EventDataByType, LegacyAuthBody } from "./payloads.schema.js";

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const member of Object.values(value)) deepFreeze(member);
    Object.freeze(value);
  }
  return value;
}

/** The world the samples belong to. */
export const SAMPLE_WORLD: Readonly<WebhookWorld> = deepFreeze({ slug: "acme-hq", url: "https://play.vw.dev/@/acme/acme-hq" });

const ROOM_URL = "https://play.vw.dev/@/acme/acme-hq/floors/ground.wam";
const MEMBER_UUID = "5f0c7d2e-3b9a-4c61-8e47-2d1f9a6b0c35";

const analyticsEvents: AnalyticsEvent[] = [
  {
    id: "0e9b6a4c-71d2-4f38-9c5e-8a2b1d7f6e03",
    type: "area.dwell",
    timestamp: "2026-11-12T15:02:10Z",
    data: {
      eventName: "area.dwell",
      source: "pusher",
      eventTime: "2026-11-12T15:02:10Z",
      user: { uuid: MEMBER_UUID },
      room: { url: ROOM_URL },
      properties: {
        areaId: "a7c3e9f1-2b4d-4e6a-8c0b-9d1e3f5a7b2c",
        areaName: "Kitchen",
        startedAt: "2026-11-12T14:55:40Z",
        endedAt: "2026-11-12T15:02:10Z",
        durationSeconds: 390,
        endReason: "closed_by_client",
      },
    },
  },
  {
    id: "3c5d7e9f-1a2b-4c3d-8e4f-5a6b7c8d9e0f",
    type: "cowebsite.closed",
    timestamp: "2026-11-12T15:06:45Z",
    data: {
      eventName: "cowebsite.closed",
      source: "front",
      eventTime: "2026-11-12T15:06:45Z",
      user: { uuid: MEMBER_UUID },
      room: { url: ROOM_URL },
      properties: {
        url: "https://docs.acme.example",
        targetUrl: "https://docs.acme.example",
        mediaKind: "pdf",
        triggerProperty: "openWebsite",
        fileName: "q4-roadmap.pdf",
        fileExtension: "pdf",
        areaId: "b1d3f5a7-9c2e-4a6b-8d0f-1e3a5c7b9d2f",
        areaName: "Library",
        schemaVersion: 1,
        startedAt: "2026-11-12T15:03:12Z",
        endedAt: "2026-11-12T15:06:45Z",
        durationSeconds: 213,
        endReason: "closed_by_client",
      },
    },
  },
  {
    id: "7a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d",
    type: "chat.message_sent",
    timestamp: "2026-11-12T15:07:02Z",
    data: {
      eventName: "chat.message_sent",
      source: "front",
      eventTime: "2026-11-12T15:07:02Z",
      user: { uuid: MEMBER_UUID },
      room: { url: ROOM_URL },
      properties: { chatContext: "proximity" },
    },
  },
  {
    id: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a",
    type: "user.disconnected",
    timestamp: "2026-11-12T15:08:30Z",
    data: {
      eventName: "user.disconnected",
      source: "pusher",
      eventTime: "2026-11-12T15:08:30Z",
      user: { uuid: MEMBER_UUID },
      room: { url: ROOM_URL },
      properties: {
        connectedAt: "2026-11-12T14:31:07Z",
        disconnectedAt: "2026-11-12T15:08:30Z",
        durationSeconds: 2243,
        disconnectReason: "socket_closed",
      },
    },
  },
];

/**
 * One realistic `data` per delivered type (deeply frozen: copy before changing, or use
 * {@link sampleFor}). `recording.completed` ends at 14:47:35 UTC; its download link is valid 7 days
 * and the recording expires three months later.
 */
export const EVENT_SAMPLES: Readonly<EventDataByType> = deepFreeze<EventDataByType>({
  "recording.completed": {
    recordingId: "rec_01JCKX4T7V9M2Q8R5S3W6Y0Z1A",
    room: { url: ROOM_URL },
    recorder: { uuid: MEMBER_UUID, name: "Ada Lovelace", email: "ada.lovelace@acme.example" },
    startedAt: "2026-11-12T14:00:05Z",
    endedAt: "2026-11-12T14:47:35Z",
    durationSeconds: 2850,
    sizeBytes: 418_904_312,
    downloadUrl:
      "https://recordings.vw.dev/acme/acme-hq/rec_01JCKX4T7V9M2Q8R5S3W6Y0Z1A.mp4?expires=1795099655&signature=Zm9vYmFyYmF6cXV4cXV1eA",
    expiresAt: "2027-02-12T14:47:35Z",
  },
  "visitor.registered": {
    uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b",
    name: "Grace Hopper",
    email: "grace.hopper@example.org",
    via: "sso",
  },
  "consent.changed": {
    uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b",
    email: "grace.hopper@example.org",
    type: "visitor",
    purpose: "newsletter",
    granted: true,
  },
  "analytics.batch": { events: analyticsEvents },
  "member.connecting": {
    roomUrl: ROOM_URL,
    uuid: MEMBER_UUID,
    accessTokens: [{ provider: "acme-okta", token: "eyJraWQiOiJzYW1wbGUiLCJhbGciOiJSUzI1NiJ9.c2FtcGxl.c2lnbmF0dXJl" }],
  },
  ping: {},
});

/** The legacy flat body matching the `member.connecting` sample (its first access token). */
export const LEGACY_AUTH_SAMPLE: Readonly<LegacyAuthBody> = deepFreeze<LegacyAuthBody>({
  roomUrl: EVENT_SAMPLES["member.connecting"].roomUrl,
  uuid: EVENT_SAMPLES["member.connecting"].uuid,
  accessToken: EVENT_SAMPLES["member.connecting"].accessTokens[0]?.token ?? null,
  action: "auth",
});

// Fixed, so documentation and snapshots do not change from one build to the next.
const SAMPLE_DELIVERY_IDS: Readonly<Record<DeliveredEventType, string>> = {
  "recording.completed": "1f7a3c5e-9b2d-4f6a-8c1e-3a5b7d9f0e2c",
  "visitor.registered": "2a8b4c6d-0e1f-4a3b-9c5d-7e9f1a2b3c4d",
  "consent.changed": "3b9c5d7e-1f2a-4b4c-8d6e-8f0a2b3c4d5e",
  "analytics.batch": "4cad6e8f-2a3b-4c5d-9e7f-9a1b3c4d5e6f",
  "member.connecting": "5dbe7f9a-3b4c-4d6e-8f8a-0b2c4d5e6f7a",
  ping: "6ecf8a0b-4c5d-4e7f-9a9b-1c3d5e6f7a8b",
};

// When each sample event happened: the batch is assembled after its last inner event.
const SAMPLE_TIMESTAMPS: Readonly<Record<DeliveredEventType, string>> = {
  "recording.completed": "2026-11-12T14:48:02Z",
  "visitor.registered": "2026-11-12T09:15:27Z",
  "consent.changed": "2026-11-12T09:15:27Z",
  "analytics.batch": "2026-11-12T15:09:00Z",
  "member.connecting": "2026-11-12T14:31:05Z",
  ping: "2026-11-12T16:20:00Z",
};

/**
 * A complete sample delivery of `type` (a fresh copy): the sample `data` in an envelope of
 * {@link SAMPLE_WORLD} at the current `apiVersion`. `ping` carries `test: true`, since only the
 * Test action sends it.
 */
export function sampleDelivery<T extends DeliveredEventType>(type: T): WebhookDelivery<T> {
  const delivery = {
    deliveryId: SAMPLE_DELIVERY_IDS[type],
    apiVersion: CURRENT_API_VERSION,
    type,
    timestamp: SAMPLE_TIMESTAMPS[type],
    world: { ...SAMPLE_WORLD },
    data: structuredClone(EVENT_SAMPLES[type]),
    ...(type === "ping" ? { test: true as const } : {}),
  };
  return delivery as WebhookDelivery<T>;
}

/** The type the Test action sends for each subscription. */
export const SAMPLE_TYPE_OF_SUBSCRIPTION = Object.freeze({
  recording: "recording.completed",
  visitor: "visitor.registered",
  consent: "consent.changed",
  auth: "member.connecting",
  analytics: "analytics.batch",
} as const satisfies Record<WebhookSubscription, DeliveredEventType>);

type SampleTypeOf<S extends WebhookSubscription> = (typeof SAMPLE_TYPE_OF_SUBSCRIPTION)[S];

/** A sample event for one subscription (what the Test action sends), as a fresh copy the caller may change. */
export function sampleFor<S extends WebhookSubscription>(
  subscription: S,
): { type: SampleTypeOf<S>; data: EventDataByType[SampleTypeOf<S>] } {
  const type: SampleTypeOf<S> = SAMPLE_TYPE_OF_SUBSCRIPTION[subscription];
  return { type, data: structuredClone(EVENT_SAMPLES[type]) };
}
