import { describe, expect, it } from "@jest/globals";
import { AppError } from "@vw/service-kit";
import { parseFilePath } from "./file-path.js";

function refused(target: string): AppError {
  try {
    parseFilePath(target);
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).status).toBe(400);
    return err as AppError;
  }
  throw new Error(`${target} was accepted`);
}

describe("parseFilePath", () => {
  it("splits organization, world and path and derives the object key", () => {
    const p = parseFilePath("/acme/lobby/rooms/hall.wam?x=1");
    expect(p).toEqual({ organization: "acme", world: "lobby", path: "rooms/hall.wam", objectKey: "acme/lobby/rooms/hall.wam", extension: "wam" });
  });

  it("decodes percent-encoded names", () => {
    expect(parseFilePath("/acme/lobby/caf%C3%A9%20room.wam").path).toBe("café room.wam");
  });

  it.each([
    ["/acme/lobby/../x.wam", "dot-dot"],
    ["/acme/lobby/%2e%2e/x.wam", "encoded dot-dot"],
    ["/acme/lobby/%2E%2E/x.wam", "upper-case encoded dot-dot"],
    ["/acme/lobby/.%2e/x.wam", "mixed dot-dot"],
    ["/acme/lobby/./x.wam", "dot"],
    ["/acme/lobby/a%2fb.wam", "encoded slash"],
    ["/acme/lobby/a%2Fb.wam", "encoded slash upper"],
    ["/acme/lobby/a\\b.wam", "backslash"],
    ["/acme/lobby/a%5cb.wam", "encoded backslash"],
    ["/acme/lobby//x.wam", "empty segment"],
    ["/acme/lobby/x/", "trailing slash"],
    ["/acme/lobby/", "no file"],
    ["/acme/lobby", "no file at all"],
    ["/acme/lobby/%zz.wam", "bad percent"],
    ["/acme/lobby/%c3%28.wam", "bad utf-8"],
    ["/acme/lobby/a%00b.wam", "nul"],
    ["/acme/lobby/a%0ab.wam", "newline"],
    ["/ACME/lobby/x.wam", "bad org slug"],
    ["/acme/lob_by/x.wam", "bad world slug"],
    ["relative/x.wam", "relative"],
  ])("refuses %s (%s)", (target) => {
    const err = refused(target);
    expect(err.code).toBe("invalid-path");
  });

  it("refuses a file path over 1024 bytes", () => {
    refused(`/acme/lobby/${"a".repeat(1021)}.wam`);
  });

  it("accepts a file path at the byte limit of the object key", () => {
    const prefix = "acme/lobby/";
    const name = "a".repeat(1024 - prefix.length - 4) + ".wam";
    expect(parseFilePath(`/${prefix}${name}`).objectKey).toHaveLength(1024);
  });

  it("gives no extension to dot-files and extension-less names", () => {
    expect(parseFilePath("/acme/lobby/.hidden").extension).toBe("");
    expect(parseFilePath("/acme/lobby/README").extension).toBe("");
    expect(parseFilePath("/acme/lobby/Tiles.PNG").extension).toBe("png");
  });
});
