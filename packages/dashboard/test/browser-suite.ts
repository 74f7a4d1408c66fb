/**
 * What every browser test file does around its tests: the stack and Chromium started together
 * (and both closed even when one of them failed to start), each page opened in a fresh watched
 * context, and after each test every page closed and checked: nothing fetched from another host,
 * no CSP violation or script error.
 */
import { afterAll, afterEach, beforeAll, expect } from "@jest/globals";
import type { Browser, Page } from "playwright-core";
import { launchBrowser, openPage, type WatchedPage } from "./browser.js";
import { startStack, type Stack } from "./stack.js";

export interface BrowserSuite {
  readonly stack: Stack;
  readonly browser: Browser;
  /** Opens a minted link in a fresh context and waits for the signed-in shell of `worldName`. */
  signIn(link: string, worldName: string): Promise<Page>;
  /** Opens a page in a fresh context without signing in (refused links, no session). */
  visit(url: string): Promise<Page>;
}

/**
 * Registers the suite's hooks (call it at the top of a test file). `close` runs after the
 * browser is closed and before the stack is (the file's receivers, say).
 */
export function browserSuite(close?: () => Promise<unknown>): BrowserSuite {
  let stack: Stack | undefined;
  let browser: Browser | undefined;
  const pages: WatchedPage[] = [];

  beforeAll(async () => {
    const [stackStarted, browserStarted] = await Promise.allSettled([startStack(), launchBrowser()]);
    if (stackStarted.status === "fulfilled") stack = stackStarted.value;
    if (browserStarted.status === "fulfilled") browser = browserStarted.value;
    if (stackStarted.status === "rejected") throw stackStarted.reason;
    if (browserStarted.status === "rejected") throw browserStarted.reason;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await close?.();
    await stack?.close();
  }, 60_000);

  afterEach(async () => {
    for (const w of pages.splice(0)) {
      await w.context.close();
      expect(w.foreignRequests).toEqual([]);
      expect(w.errors).toEqual([]);
    }
  });

  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the ${what} is not started (use it inside a test or a beforeAll after browserSuite's)`);
    return value;
  };
  const visit = async (url: string): Promise<Page> => {
    const w = await openPage(started(browser, "browser"), new URL(url).origin);
    pages.push(w);
    await w.page.goto(url);
    return w.page;
  };
  return {
    get stack() {
      return started(stack, "stack");
    },
    get browser() {
      return started(browser, "browser");
    },
    visit,
    async signIn(link, worldName) {
      const page = await visit(link);
      await page.getByTestId("world-name").filter({ hasText: worldName }).waitFor();
      return page;
    },
  };
}
