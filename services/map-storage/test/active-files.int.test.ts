/**
 * Files a browser could run (HTML, SVG, XML, PDF) are served sandboxed: `Content-Security-Policy:
 * sandbox…` and `nosniff`, on GET and HEAD, while other files are served as before. Checked on the
 * headers, and in a real Chromium: the script of an uploaded page does not run, or (with
 * ACTIVE_FILE_SANDBOX=allow-scripts) runs in an opaque origin, never as map-storage's.
 */
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { PrismaClient } from "@vw/db";
import { chromium, type Browser } from "playwright-core";
import { ACTIVE_FILE_CSP } from "../src/files/active-content.js";
import { createTestWorld, rand, startMapStorage, testPrisma, type RunningMapStorage, type TestWorld } from "./harness.js";

const CHROMIUM = "/usr/bin/chromium";
const PAGE = `<!doctype html><html><head><title>before</title></head><body>
<script>document.title = "ran as " + self.origin; try { localStorage.setItem("k", "v"); document.title += " with storage"; } catch (e) {}</script>
</body></html>`;
const SVG = `<svg xmlns="http://www.w3.org/2000/svg"><script>document.title = "svg ran"</script></svg>`;

let prisma: PrismaClient;
let strict: RunningMapStorage;
let scripts: RunningMapStorage;
let w: TestWorld;
let browser: Browser;

beforeAll(async () => {
  prisma = testPrisma();
  w = await createTestWorld(prisma);
  strict = await startMapStorage();
  scripts = await startMapStorage({ ACTIVE_FILE_SANDBOX: "allow-scripts" });
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: npm test installs Debian's Chromium`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"] });
});
afterAll(async () => {
  await browser?.close();
  await strict.close();
  await scripts.close();
  await prisma.$disconnect();
});

async function upload(ms: RunningMapStorage, name: string, body: string): Promise<string> {
  const url = `${ms.baseUrl}/${w.org}/${w.world}/active/${rand()}-${name}`;
  const res = await fetch(url, { method: "PUT", headers: { authorization: `Bearer ${w.token}` }, body });
  expect([200, 201]).toContain(res.status);
  return url;
}

describe("response headers", () => {
  it.each([
    ["page.html", "text/html"],
    ["page.htm", "text/html"],
    ["drawing.svg", "image/svg+xml"],
    ["data.xml", "application/xml"],
    ["map.tmx", "application/xml"],
    ["tiles.tsx", "application/xml"],
    ["manual.pdf", "application/pdf"],
  ])("%s (%s) is sandboxed and never sniffed, on GET and HEAD", async (name, type) => {
    const url = await upload(strict, name, name.endsWith(".svg") ? SVG : PAGE);
    for (const method of ["GET", "HEAD"]) {
      const res = await fetch(url, { method });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(new RegExp(`^${type.replace("+", "\\+")}`));
      expect(res.headers.get("content-security-policy")).toBe(ACTIVE_FILE_CSP.strict);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      // Public bytes stay readable cross-origin (no credentials are ever involved).
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
    }
  });

  it.each(["tiles.png", "data.json", "notes.txt", "script.js", "blob.bin"])("%s is served without a sandbox, with nosniff", async (name) => {
    const res = await fetch(await upload(strict, name, name.endsWith(".json") ? "{}" : "plain bytes"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toBeNull();
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("sends the allow-scripts sandbox when ACTIVE_FILE_SANDBOX=allow-scripts", async () => {
    const res = await fetch(await upload(scripts, "page.html", PAGE));
    expect(res.headers.get("content-security-policy")).toBe(ACTIVE_FILE_CSP["allow-scripts"]);
  });
});

describe("in Chromium", () => {
  it("does not run the script of an uploaded HTML page or SVG opened directly", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(await upload(strict, "page.html", PAGE));
      expect(await page.title()).toBe("before");
      await page.goto(await upload(strict, "drawing.svg", SVG));
      expect(await page.title()).not.toBe("svg ran");
    } finally {
      await page.close();
    }
  });

  it("with allow-scripts, runs the page's script in an opaque origin without map-storage's storage", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(await upload(scripts, "page.html", PAGE));
      await page.waitForFunction("document.title !== \"before\"");
      expect(await page.title()).toBe("ran as null");
    } finally {
      await page.close();
    }
  });
});
