import { describe, expect, it } from "@jest/globals";
import { endpointHeadersErrors, headerNamesOf, isReservedHeaderName } from "./endpoint-headers.schema.js";
import { validateCreateEndpointRequest, validateUpdateEndpointRequest } from "./endpoints.schema.js";

const base = { url: "https://hooks.example.com/", subscriptions: ["recording"] };

describe("endpoint headers: the schema", () => {
  it("accepts tokens with visible-ASCII values, Authorization included, on create and PATCH", () => {
    const headers = { Authorization: "Bearer a b", "X-Api_Key.v2": "!#$%&'*+-.^_`|~ 09az", "X-Empty": "" };
    expect(validateCreateEndpointRequest({ ...base, headers }).ok).toBe(true);
    expect(validateUpdateEndpointRequest({ headers }).ok).toBe(true);
    expect(validateUpdateEndpointRequest({ headers: {} }).ok).toBe(true);
  });

  it("points at the offending name with one error, not a vague one beside it", () => {
    expect(validateUpdateEndpointRequest({ headers: { "X(Bad)": "v" } })).toEqual({
      ok: false,
      errors: [{ pointer: "/headers/X(Bad)", detail: expect.stringMatching(/^name must match the pattern/) }],
    });
    expect(validateUpdateEndpointRequest({ headers: { "a/b": "v" } })).toEqual({ ok: false, errors: [{ pointer: "/headers/a~1b", detail: expect.any(String) }] });
  });

  it("refuses CR, LF and other controls in a value, and values past 1,024 characters", () => {
    for (const value of ["a\rb", "a\nb", "a\u0000b", "a\u007fb", "é"]) {
      expect(validateUpdateEndpointRequest({ headers: { "X-V": value } })).toEqual({ ok: false, errors: [{ pointer: "/headers/X-V", detail: expect.stringMatching(/pattern|NUL/) }] });
    }
    expect(validateUpdateEndpointRequest({ headers: { "X-V": "a".repeat(1024) } }).ok).toBe(true);
    expect(validateUpdateEndpointRequest({ headers: { "X-V": "a".repeat(1025) } }).ok).toBe(false);
  });
});

describe("endpoint headers: the rules beyond the schema", () => {
  it("reserves the platform's names and every Proxy-* name, whatever the case, and allows Authorization", () => {
    for (const name of ["Host", "content-type", "CONTENT-LENGTH", "Transfer-Encoding", "Connection", "TE", "Upgrade", "User-Agent", "Webhook-Id", "webhook-timestamp", "webhook-signature", "Proxy-Authorization", "proxy-x"]) {
      expect(isReservedHeaderName(name)).toBe(true);
    }
    for (const name of ["Authorization", "X-Tenant", "Webhook-Other", "Proxied"]) expect(isReservedHeaderName(name)).toBe(false);
  });

  it("names each reserved or repeated header at its own pointer", () => {
    expect(endpointHeadersErrors({ Authorization: "a", host: "x", "X-A": "1", "x-a": "2" })).toEqual([
      { pointer: "/headers/host", detail: expect.stringMatching(/^"host" is reserved/) },
      { pointer: "/headers/x-a", detail: '"x-a" repeats "X-A": header names are case-insensitive, give each once' },
    ]);
  });

  it("lists names sorted case-insensitively", () => {
    expect(headerNamesOf({ "x-b": "1", Authorization: "2", "X-A": "3" })).toEqual(["Authorization", "X-A", "x-b"]);
  });
});
