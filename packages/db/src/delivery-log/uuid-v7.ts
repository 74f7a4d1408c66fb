/**
 * Time-ordered ids (RFC 9562 UUIDv7) for deliveries: the first 48 bits are the creation time in
 * Unix milliseconds, so an id alone says which daily partition holds its delivery and a lookup by
 * id probes one partition's index instead of every one. Ids written before this scheme (random
 * v4) carry no time: {@link uuidV7Time} answers null for them and lookups fall back to every
 * partition (see DeliveryLog).
 */
import { randomBytes } from "node:crypto";

let lastMs = 0;
let sequence = 0;

/**
 * A new UUIDv7 for `now` (milliseconds). Ids made by one process within the same millisecond get
 * an increasing 12-bit counter in `rand_a` (RFC 9562 method 1), so they still sort in creation
 * order; the remaining 62 bits are random.
 */
export function uuidV7(now: number = Date.now()): string {
  if (now === lastMs) {
    sequence = (sequence + 1) & 0xfff;
  } else {
    lastMs = now;
    sequence = randomBytes(2).readUInt16BE(0) & 0x7ff; // half the range, room to count up
  }
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** The creation time a UUIDv7 carries, or null for any other id (a v4 id of older history). */
export function uuidV7Time(id: string): Date | null {
  if (!V7.test(id)) return null;
  return new Date(parseInt(id.slice(0, 8) + id.slice(9, 13), 16));
}
