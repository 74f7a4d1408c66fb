/**
 * Time-ordered ids (RFC 9562 UUIDv7) for deliveries: the first 48 bits are the creation time in
 * Unix milliseconds, so an id alone says which daily partition holds its delivery and a lookup by
 * id probes one partition's index instead of every one. Ids written before this scheme (random
 * v4) carry no time: {@link uuidV7Time} answers null for them and lookups fall back to every
 * partition (see DeliveryLog).
 */
import { randomFillSync } from "node:crypto";

let lastMs = 0;
let sequence = 0;

/**
 * Random bytes drawn from the CSPRNG a few kilobytes at a time (as `crypto.randomUUID` does):
 * asking it for 16 bytes per id, one call each, cost more than the rest of an intake's work per
 * delivery in profiles of ingest.
 */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
/** The id being written (copied out as text before the next call). */
const scratch = Buffer.alloc(16);

/** The offset of `n` unused random bytes in `pool`. */
function takeRandom(n: number): number {
  if (poolAt + n > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += n;
  return at;
}

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
    sequence = pool.readUInt16BE(takeRandom(2)) & 0x7ff; // half the range, room to count up
  }
  const at = takeRandom(8);
  scratch.writeUIntBE(now, 0, 6);
  scratch[6] = 0x70 | (sequence >> 8);
  scratch[7] = sequence & 0xff;
  pool.copy(scratch, 8, at, at + 8);
  scratch[8] = 0x80 | (scratch[8]! & 0x3f);
  const hex = scratch.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** The creation time a UUIDv7 carries, or null for any other id (a v4 id of older history). */
export function uuidV7Time(id: string): Date | null {
  if (!V7.test(id)) return null;
  return new Date(parseInt(id.slice(0, 8) + id.slice(9, 13), 16));
}
