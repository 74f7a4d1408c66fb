/**
 * Chromium for the browser tests: Debian's /usr/bin/chromium driven by playwright-core (no
 * browser download). Each page records every request to another origin and every console
 * error (a Content-Security-Policy violation shows up there), runs axe-core inside the page,
 * and saves screenshots under artifacts/screenshots/ (git-ignored) for a person to look at.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
export const SCREENSHOT_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "artifacts", "screenshots");

export const CHROMIUM_PATH = "/usr/bin/chromium";

/** Launches headless Chromium with the flags a container without a sandbox or GPU needs. */
export function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`${CHROMIUM_PATH} is missing: install Debian's Chromium first (apt-get install -y --no-install-recommends chromium; .ci/run does it)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
}

export interface WatchedPage {
  context: BrowserContext;
  page: Page;
  /** Requests whose origin is not the dashboard's. */
  foreignRequests: string[];
  /** console.error lines and page errors (CSP violations, uncaught exceptions). */
  errors: string[];
}

/** A fresh context (its own cookie jar) and page, watched for foreign requests and errors. */
export async function openPage(browser: Browser, origin: string, viewport = { width: 1280, height: 900 }): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport, permissions: [] });
  const page = await context.newPage();
  const watched: WatchedPage = { context, page, foreignRequests: [], errors: [] };
  page.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith("data:") && new URL(url).origin !== origin) watched.foreignRequests.push(url);
  });
  page.on("console", (msg) => {
    // Expected refusals (a 4xx the page shows as a problem) are logged by Chromium as failed resources.
    if (msg.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(msg.text())) watched.errors.push(msg.text());
  });
  page.on("pageerror", (err) => watched.errors.push(`pageerror: ${err.message}`));
  return watched;
}

/** One axe-core violation, trimmed for a readable assertion message. */
export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core in the page (evaluated through the DevTools protocol, so the page's CSP stays in
 * force) and returns the serious and critical violations.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  const loaded = await page.evaluate(() => typeof (window as unknown as { axe?: unknown }).axe !== "undefined");
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: any[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n: any) => String(n.target)) }));
  });
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/** Saves `<name>-desktop.png` and `<name>-360.png` (full page), restoring the viewport after. */
export async function screenshots(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const viewport = page.viewportSize() ?? { width: 1280, height: 900 };
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}-desktop.png`), fullPage: true });
  await page.setViewportSize({ width: 360, height: 740 });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}-360.png`), fullPage: true });
  await page.setViewportSize(viewport);
}

/** Width of the page's content at 360 px: wider means the reader must scroll sideways. */
async function widthAt360(page: Page): Promise<number> {
  const viewport = page.viewportSize() ?? { width: 1280, height: 900 };
  await page.setViewportSize({ width: 360, height: 740 });
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  await page.setViewportSize(viewport);
  return width;
}

/**
 * The per-page check every test runs on each page it visits: axe-core finds no serious or
 * critical violation, the page fits 360 px without sideways scrolling (wide tables scroll in
 * their own box), and screenshots are saved.
 */
export async function checkPage(page: Page, name: string): Promise<void> {
  const violations = await seriousViolations(page);
  const width = await widthAt360(page);
  await screenshots(page, name);
  if (violations.length > 0) throw new Error(`axe found serious/critical violations on ${name}:\n${JSON.stringify(violations, null, 2)}`);
  if (width > 360) throw new Error(`${name} is ${width} px wide at a 360 px viewport`);
}
