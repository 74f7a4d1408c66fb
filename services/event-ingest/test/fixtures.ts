/** Valid `data` of each intake type and an event builder for the integration tests. */
import type { TestWorld } from "./harness.js";

export const VISITOR_DATA = { uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b", name: "Grâce Hopper 🚀", email: "grace@example.org", via: "email" };

export const CONSENT_DATA = {
  uuid: "c2e4a6b8-0d1f-4e3a-9b5c-7d9f1a3c5e7b",
  email: "grace@example.org",
  type: "visitor",
  purpose: "newsletter",
  granted: false,
};

export const RECORDING_DATA = {
  recordingId: "rec_01",
  room: { url: "https://play.example.test/@/acme/hq/lobby.wam" },
  recorder: null,
  startedAt: "2026-11-12T14:00:05Z",
  endedAt: "2026-11-12T14:47:35Z",
  durationSeconds: 2850,
  sizeBytes: 418_904_312,
  downloadUrl: "https://recordings.example.test/rec_01.mp4?sig=abc",
  expiresAt: "2027-02-12T14:47:35Z",
};

const DATA_OF_TYPE = {
  "visitor.registered": VISITOR_DATA,
  "consent.changed": CONSENT_DATA,
  "recording.completed": RECORDING_DATA,
} as const;

export type IntakeType = keyof typeof DATA_OF_TYPE;

let counter = 0;

/** A valid event of `type` in `world` with a fresh id, unless overridden. */
export function makeEvent(world: TestWorld, type: IntakeType = "visitor.registered", overrides: Record<string, unknown> = {}) {
  counter += 1;
  return {
    id: `evt-${Date.now().toString(36)}-${counter}`,
    world: world.ref,
    type,
    timestamp: "2026-11-22T10:15:30.250+01:00",
    data: DATA_OF_TYPE[type],
    ...overrides,
  };
}
