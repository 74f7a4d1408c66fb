/**
 * Redis Cluster's key slots, computed the way Redis does: CRC16 (XMODEM) of the key's hash tag
 * (the text between the first `{` and the next `}`, when not empty) or of the whole key, modulo
 * 16384. Every key that one Lua script, one MULTI or one BullMQ queue touches must land in one
 * slot; the platform gets there by giving each such group one hash tag, and uses these functions
 * to pick tags that spread delivery shards evenly over a Cluster's primaries.
 */

/** Slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16384;

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** CRC16-XMODEM of a string's UTF-8 bytes (Redis Cluster's key hash). */
export function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, "utf8")) crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc;
}

/** The hash tag of a key as Redis Cluster reads it, or the whole key when it has none. */
export function hashTagOf(key: string): string {
  const open = key.indexOf("{");
  if (open < 0) return key;
  const close = key.indexOf("}", open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

/** The Cluster slot of a key. */
export function keySlot(key: string): number {
  return crc16(hashTagOf(key)) % CLUSTER_SLOTS;
}
