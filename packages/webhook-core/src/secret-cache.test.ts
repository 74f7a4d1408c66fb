import { describe, expect, it } from "@jest/globals";
import { createSecretBox, generateSecretBoxKey, SecretBoxError, type SecretBox } from "./secret-box.js";
import { sealEndpointHeaders } from "./endpoint-headers.js";
import { SecretCache } from "./secret-cache.js";

/** A real box that counts its opens. */
function countingBox(box: SecretBox = createSecretBox(generateSecretBoxKey())): { box: SecretBox; opens: () => number } {
  let opens = 0;
  return {
    box: { ...box, seal: (plain) => box.seal(plain), open: (sealed) => ((opens += 1), box.open(sealed)), needsReseal: (sealed) => box.needsReseal(sealed) },
    opens: () => opens,
  };
}

describe("SecretCache", () => {
  it("opens an endpoint's sealed secret once, then serves it from memory", () => {
    const { box, opens } = countingBox();
    const cache = new SecretCache(box);
    const sealed = box.seal("whsec_first");
    expect(cache.secretOf("ep-1", sealed)).toBe("whsec_first");
    expect(cache.secretOf("ep-1", sealed)).toBe("whsec_first");
    expect(opens()).toBe(1);
  });

  it("never serves the old secret after a rotation or a re-seal: the sealed value differs", () => {
    const { box, opens } = countingBox();
    const cache = new SecretCache(box);
    expect(cache.secretOf("ep-1", box.seal("whsec_old"))).toBe("whsec_old");
    expect(cache.secretOf("ep-1", box.seal("whsec_new"))).toBe("whsec_new");
    // Same plain text sealed again (a key rotation's re-seal): a new IV, so a new value, opened again.
    expect(cache.secretOf("ep-1", box.seal("whsec_new"))).toBe("whsec_new");
    expect(opens()).toBe(3);
  });

  it("answers null for an endpoint without a secret, without opening anything", () => {
    const { box, opens } = countingBox();
    expect(new SecretCache(box).secretOf("legacy", null)).toBeNull();
    expect(opens()).toBe(0);
  });

  it("throws what the box throws for a value it cannot open, and does not cache the failure", () => {
    const other = createSecretBox(generateSecretBoxKey());
    const { box, opens } = countingBox();
    const cache = new SecretCache(box);
    const foreign = other.seal("whsec_elsewhere");
    expect(() => cache.secretOf("ep-1", foreign)).toThrow(SecretBoxError);
    expect(() => cache.secretOf("ep-1", foreign)).toThrow(SecretBoxError);
    expect(opens()).toBe(2);
    expect(cache.size).toBe(0);
  });

  it("stays bounded: past its size it starts over", () => {
    const { box } = countingBox();
    const cache = new SecretCache(box, 3);
    const sealed = box.seal("whsec_x");
    for (let i = 0; i < 10; i += 1) cache.secretOf(`ep-${i}`, sealed);
    expect(cache.size).toBeLessThanOrEqual(3);
    expect(cache.secretOf("ep-9", sealed)).toBe("whsec_x");
  });

  it("opens an endpoint's custom headers once, and again only when the stored set changed", () => {
    const { box, opens } = countingBox();
    const cache = new SecretCache(box);
    const first = sealEndpointHeaders(box, { Authorization: "Bearer one" });
    expect(cache.headersOf("ep-1", first)).toEqual({ Authorization: "Bearer one" });
    expect(cache.headersOf("ep-1", first)).toEqual({ Authorization: "Bearer one" });
    expect(opens()).toBe(1);
    // A PATCH stores a new sealed set: the next attempt sends the new values.
    expect(cache.headersOf("ep-1", sealEndpointHeaders(box, { Authorization: "Bearer two" }))).toEqual({ Authorization: "Bearer two" });
    // The secret of the same endpoint is kept apart from its headers.
    expect(cache.secretOf("ep-1", box.seal("whsec_x"))).toBe("whsec_x");
    expect(cache.headersOf("ep-1", null)).toEqual({});
    expect(opens()).toBe(3);
  });

  it("refuses a sealed value that is not a header set (a secret stored in the wrong column)", () => {
    const { box } = countingBox();
    expect(() => new SecretCache(box).headersOf("ep-1", box.seal("whsec_not_headers"))).toThrow(SecretBoxError);
    expect(() => new SecretCache(box).headersOf("ep-1", box.seal('["a"]'))).toThrow(SecretBoxError);
  });
});
