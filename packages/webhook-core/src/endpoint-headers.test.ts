import { describe, expect, it } from "@jest/globals";
import { REDACTED_HEADER_VALUE, openEndpointHeaders, redactedHeaders, sealEndpointHeaders, sendableHeaders } from "./endpoint-headers.js";
import { createSecretBox, generateSecretBoxKey } from "./secret-box.js";

const box = createSecretBox(generateSecretBoxKey());

describe("endpoint headers at rest", () => {
  it("seals the set so the stored text holds no name or value, and opens it back as it was", () => {
    const headers = { Authorization: "Bearer gateway-token-123", "X-Tenant": "acme" };
    const sealed = sealEndpointHeaders(box, headers);
    expect(sealed).not.toBeNull();
    for (const part of ["Authorization", "gateway-token-123", "X-Tenant", "acme"]) expect(sealed).not.toContain(part);
    expect(openEndpointHeaders(box, sealed)).toEqual(headers);
  });

  it("stores nothing for an empty set, and opens nothing into an empty one", () => {
    expect(sealEndpointHeaders(box, {})).toBeNull();
    expect(openEndpointHeaders(box, null)).toEqual({});
  });

  it("cannot be opened under another key", () => {
    const sealed = sealEndpointHeaders(box, { Authorization: "x" });
    expect(() => openEndpointHeaders(createSecretBox(generateSecretBoxKey()), sealed)).toThrow(/which is not configured/);
  });
});

describe("endpoint headers on the wire and in the log", () => {
  it("never lets a reserved name through, whatever its case", () => {
    expect(sendableHeaders({ Authorization: "a", "Content-Type": "text/plain", "WEBHOOK-SIGNATURE": "v1,forged", "Proxy-Authorization": "b", Host: "evil", "X-Ok": "1" })).toEqual({
      Authorization: "a",
      "X-Ok": "1",
    });
    expect(sendableHeaders(undefined)).toEqual({});
  });

  it("keeps the names and replaces every value", () => {
    expect(redactedHeaders({ Authorization: "Bearer secret", "X-Tenant": "acme" })).toEqual({ Authorization: REDACTED_HEADER_VALUE, "X-Tenant": REDACTED_HEADER_VALUE });
  });
});
