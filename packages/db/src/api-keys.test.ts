import { createHash } from "node:crypto";
import { describe, expect, it } from "@jest/globals";
import { generateApiKey, hashApiKey } from "./api-keys.js";

describe("generateApiKey", () => {
  it("makes vwk_ + base64url of 32 random bytes, with its hash and 12-character prefix", () => {
    const { token, tokenHash, tokenPrefix } = generateApiKey();
    expect(token).toMatch(/^vwk_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token.slice(4), "base64url")).toHaveLength(32);
    expect(tokenHash).toBe(createHash("sha256").update(token).digest("hex"));
    expect(tokenPrefix).toBe(token.slice(0, 12));
  });

  it("never repeats a token", () => {
    const tokens = new Set(Array.from({ length: 1000 }, () => generateApiKey().token));
    expect(tokens.size).toBe(1000);
  });
});

describe("hashApiKey", () => {
  it("is the lower-case hex SHA-256 of the token", () => {
    expect(hashApiKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(hashApiKey("vwk_x")).toMatch(/^[0-9a-f]{64}$/);
  });
});
