import { describe, expect, it } from "@jest/globals";
import { SecretBoxError, createSecretBox, generateSecretBoxKey } from "./secret-box.js";

const keyA = generateSecretBoxKey();
const keyB = generateSecretBoxKey();
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

function errorOf(fn: () => unknown): SecretBoxError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SecretBoxError);
    return err as SecretBoxError;
  }
  throw new Error("expected a SecretBoxError");
}

/** Flips one bit of a base64url part of a sealed value. */
function flipBit(sealed: string, partIndex: number): string {
  const parts = sealed.split(":");
  const bytes = Buffer.from(parts[partIndex] ?? "", "base64url");
  bytes[0] = (bytes[0] ?? 0) ^ 1;
  parts[partIndex] = bytes.toString("base64url");
  return parts.join(":");
}

describe("createSecretBox", () => {
  it("round-trips and never leaves the plain text in the sealed value", () => {
    const box = createSecretBox(keyA);
    const sealed = box.seal(secret);
    expect(sealed).toMatch(/^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(secret.slice(6));
    expect(box.open(sealed)).toBe(secret);
    expect(box.open(box.seal(""))).toBe("");
    expect(box.open(box.seal("né ✓"))).toBe("né ✓");
  });

  it("uses a fresh IV per seal, so equal plain texts give different sealed values", () => {
    const box = createSecretBox(keyA);
    expect(box.seal(secret)).not.toBe(box.seal(secret));
  });

  it("detects tampering with the IV, the tag or the cipher text", () => {
    const box = createSecretBox(keyA);
    const sealed = box.seal(secret);
    for (const part of [2, 3, 4]) {
      expect(errorOf(() => box.open(flipBit(sealed, part))).code).toBe("tampered");
    }
  });

  it("refuses a value sealed with a key it does not hold", () => {
    const sealedByA = createSecretBox(keyA).seal(secret);
    expect(errorOf(() => createSecretBox(keyB).open(sealedByA)).code).toBe("unknown-key");
  });

  it("refuses a sealed value relabelled with another key's id (the header is authenticated)", () => {
    const boxB = createSecretBox(keyB);
    const parts = createSecretBox(keyA).seal(secret).split(":");
    parts[1] = boxB.keyIds[0] ?? "";
    expect(errorOf(() => boxB.open(parts.join(":"))).code).toBe("tampered");
  });

  it("rotates: the first key seals, every listed key opens, needsReseal spots old values", () => {
    const oldBox = createSecretBox(keyA);
    const sealedOld = oldBox.seal(secret);
    const rotated = createSecretBox(`${keyB}, ${keyA}`);
    expect(rotated.keyIds).toEqual([createSecretBox(keyB).keyIds[0], oldBox.keyIds[0]]);
    expect(rotated.open(sealedOld)).toBe(secret);
    expect(rotated.needsReseal(sealedOld)).toBe(true);

    const resealed = rotated.seal(rotated.open(sealedOld));
    expect(rotated.needsReseal(resealed)).toBe(false);
    expect(createSecretBox(keyB).open(resealed)).toBe(secret);
    expect(errorOf(() => oldBox.open(resealed)).code).toBe("unknown-key");
  });

  it("accepts the list as an array and base64url keys", () => {
    const url = Buffer.from(keyA, "base64").toString("base64url");
    const box = createSecretBox([url]);
    expect(box.keyIds).toEqual(createSecretBox(keyA).keyIds);
    expect(createSecretBox(keyA).open(box.seal(secret))).toBe(secret);
  });

  it.each([
    ["empty", ""],
    ["not base64", "***"],
    ["16-byte key", Buffer.alloc(16, 1).toString("base64")],
    ["bad second key", `${keyA},${Buffer.alloc(31, 1).toString("base64")}`],
    ["duplicate key", `${keyA},${keyA}`],
    ["all-zero key", Buffer.alloc(32, 0).toString("base64")],
    ["one byte repeated", `${keyA},${Buffer.alloc(32, 7).toString("base64")}`],
  ])("refuses a bad key list (%s) without echoing the key", (_label, keys) => {
    const err = errorOf(() => createSecretBox(keys));
    expect(err.code).toBe("invalid-key");
    for (const k of keys.split(",").filter((k) => k.length > 4)) expect(err.message).not.toContain(k);
  });

  it("says an all-zero key is all zeros, naming its position", () => {
    expect(errorOf(() => createSecretBox(Buffer.alloc(32, 0).toString("base64"))).message).toBe("encryption key #1 is one byte repeated (all zeros); it protects nothing");
  });

  it("names the position of the bad key", () => {
    const err = errorOf(() => createSecretBox(`${keyA},${Buffer.alloc(31, 1).toString("base64")}`));
    expect(err.message).toContain("#2");
  });

  it.each(["", "v1:abc", "v2:a:b:c:d", "plain text", "v1:kid:!!:tag:ct"])("refuses malformed sealed value %j", (sealed) => {
    expect(errorOf(() => createSecretBox(keyA).open(sealed)).code).toBe("malformed");
  });
});
