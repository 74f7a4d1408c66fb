import { describe, expect, it } from "@jest/globals";
import { buildEnvelope, buildLegacyAuthBody, envelopeTemplate, worldReference } from "./envelope.js";

const base = {
  deliveryId: "6f1c1f0e-2b7a-4f0e-9a43-1c8a4a7d2f10",
  apiVersion: "2026-11-01",
  type: "visitor.registered",
  timestamp: "2026-11-22T03:00:00.000Z",
  world: { slug: "lobby", url: "https://play.example.com/@/acme/lobby" },
  data: { uuid: "u1", name: "Ada", email: "ada@example.com", via: "sso" },
};

describe("buildEnvelope", () => {
  it("serialises the members in the documented order, without `test` on ordinary deliveries", () => {
    const text = buildEnvelope(base).toString("utf8");
    expect(Object.keys(JSON.parse(text))).toEqual(["deliveryId", "apiVersion", "type", "timestamp", "world", "data"]);
    expect(text).not.toContain('"test"');
  });

  it("adds `test: true` last on Test deliveries", () => {
    const parsed = JSON.parse(buildEnvelope({ ...base, test: true }).toString("utf8"));
    expect(Object.keys(parsed).at(-1)).toBe("test");
    expect(parsed.test).toBe(true);
  });

  it("is deterministic, so a stored body can be compared byte for byte", () => {
    expect(buildEnvelope(base).equals(buildEnvelope({ ...base }))).toBe(true);
  });
});

describe("envelopeTemplate", () => {
  it.each([
    ["an ordinary delivery", base],
    ["a Test", { ...base, test: true }],
    ["no data", { ...base, data: undefined }],
    ["text that JSON escapes", { ...base, type: 'x"\\u2028', world: { slug: "é", url: "https://x/\n" }, data: { s: "\u0000😀" } }],
  ])("makes the bytes buildEnvelope makes (%s)", (_name, input) => {
    const { deliveryId, apiVersion, ...rest } = input;
    expect(envelopeTemplate(rest)(deliveryId, apiVersion).equals(buildEnvelope(input))).toBe(true);
  });
});

describe("buildLegacyAuthBody", () => {
  it("is the exact flat body with the first token", () => {
    const body = buildLegacyAuthBody({
      roomUrl: "https://play.example.com/@/acme/lobby/hall.wam",
      uuid: "m-1",
      accessTokens: [
        { provider: "corp", token: "t1" },
        { provider: "other", token: "t2" },
      ],
    });
    expect(body.toString("utf8")).toBe('{"roomUrl":"https://play.example.com/@/acme/lobby/hall.wam","uuid":"m-1","accessToken":"t1","action":"auth"}');
  });

  it("has a null token for an anonymous member", () => {
    expect(JSON.parse(buildLegacyAuthBody({ roomUrl: "r", uuid: "u", accessTokens: [] }).toString("utf8")).accessToken).toBeNull();
  });
});

describe("worldReference", () => {
  it("uses the play URL, or the custom domain when there is one", () => {
    expect(worldReference("https://play.example.com/", "acme", "lobby", null)).toEqual({ slug: "lobby", url: "https://play.example.com/@/acme/lobby" });
    expect(worldReference("https://play.example.com", "acme", "lobby", "world.acme.com")).toEqual({ slug: "lobby", url: "https://world.acme.com/" });
  });
});
