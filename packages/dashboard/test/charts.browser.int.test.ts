/**
 * The 24 h figures and charts in a real Chromium against the real stack: a day of an endpoint's
 * history is written through the delivery log (as the worker would have), and the overview and
 * the endpoint's page must draw it hour by hour, offer the same numbers as a table to screen
 * readers, name each figure for what it counts, and show when pending deliveries are tried next.
 * Empty worlds and endpoints get the same cards with an empty chart. Every page is scanned with
 * axe, must fit 360 px, and is screenshotted (desktop and 360 px) for a person to look at.
 */
import { describe, expect, it } from "@jest/globals";
import type { Page } from "playwright-core";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { checkPage } from "./browser.js";
import { browserSuite } from "./browser-suite.js";

const receivers: WebhookReceiver[] = [];
// Nothing fetched from another host, no CSP violation or script error, on any page.
const suite = browserSuite(() => Promise.all(receivers.map((r) => r.close())));

async function signIn(org: string, world: string, name: string): Promise<Page> {
  return suite.signIn(await suite.stack.mintLink(org, world), name);
}

/** An endpoint of the world on a receiver that nothing in these tests makes it call. */
async function endpointOf(org: string, world: string): Promise<{ id: string; url: string }> {
  const r = await startWebhookReceiver({ answer: 204 });
  receivers.push(r);
  return suite.stack.adminCall("POST", `/admin/v1/worlds/${org}/${world}/endpoints`, { url: r.url, subscriptions: ["visitor"] });
}

const CHART_TITLE = "Attempts per hour, last 24 hours: delivered and failed";

/** The value of each 24 h figure, by its test id. */
async function figures(page: Page): Promise<Record<string, string>> {
  return page.locator("[data-testid^=figure-]").evaluateAll((nodes) =>
    Object.fromEntries(nodes.map((n) => [n.getAttribute("data-testid"), (n.querySelector(".stat-value")?.textContent ?? "").trim()])),
  );
}

/** The chart's table, as screen readers get it: [delivered, failed] per hour, oldest first. */
async function chartTable(page: Page): Promise<number[][]> {
  const table = page.getByRole("table", { name: CHART_TITLE });
  return table.locator("tbody tr").evaluateAll((rows) => rows.map((r) => Array.from(r.querySelectorAll("td")).map((td) => Number(td.textContent))));
}

// A day of one endpoint: attempts in seven hours (delivered, and failed for good with a 400),
// then 3 deliveries whose first attempt got a 503 just now, due again in a little over 2 hours.
const DAY = [
  { hoursAgo: 22, delivered: 4, failed: 0 },
  { hoursAgo: 18, delivered: 6, failed: 1 },
  { hoursAgo: 13, delivered: 3, failed: 0 },
  { hoursAgo: 9, delivered: 8, failed: 2 },
  { hoursAgo: 5, delivered: 5, failed: 6 },
  { hoursAgo: 2, delivered: 7, failed: 3 },
  { hoursAgo: 1, delivered: 2, failed: 0 },
];
const RETRYING = 3;
// 35 delivered, 12 failed for good, 3 retrying: 50 attempts, 35 of them answered 2xx.
const EXPECTED_FIGURES = { "figure-delivered": "35", "figure-failed": "12", "figure-retrying": "3", "figure-success-rate": "70.0 %" };
const EXPECTED_HOURS = [...DAY.map((h) => [h.delivered, h.failed]), [0, RETRYING]];

describe("24 h figures and charts", () => {
  it("the overview and the endpoint's page chart a day of attempts hour by hour, with the table alternative and figures that say what they count", async () => {
    const world = await suite.stack.createWorld("delta");
    const endpoint = await endpointOf(world.org, world.world);
    await suite.stack.seedHistory(endpoint.id, DAY, { count: RETRYING, nextAttemptAt: new Date(Date.now() + 2 * 3600_000 + 60_000) });

    const page = await signIn(world.org, world.world, world.name);
    const card = page.getByRole("region", { name: "Deliveries, last 24 hours" });
    await card.getByRole("table", { name: CHART_TITLE }).waitFor();
    expect(await figures(page)).toEqual(EXPECTED_FIGURES);
    await card.getByText("35 of 50 attempts answered 2xx").waitFor();
    await card.getByText("deliveries failed for good").waitFor();
    await card.getByText("deliveries still retrying").waitFor();
    // The table holds every hour of the window; the hours with attempts are the ones written.
    const rows = await chartTable(page);
    expect(rows).toHaveLength(25);
    expect(rows.filter(([ok, bad]) => ok! + bad! > 0)).toEqual(EXPECTED_HOURS);
    // The drawing: one green bar per hour with a delivered attempt, one red per hour with a failed one.
    expect(await card.locator("svg rect.bar-ok").count()).toBe(EXPECTED_HOURS.filter(([ok]) => ok! > 0).length);
    expect(await card.locator("svg rect.bar-bad").count()).toBe(EXPECTED_HOURS.filter(([, bad]) => bad! > 0).length);
    expect(await card.locator("svg").getAttribute("aria-hidden")).toBe("true");
    await checkPage(page, "overview-chart");

    // The endpoint's page: the same figures (it is the world's only endpoint), its latency, and
    // the pending deliveries' next attempt in the list.
    await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Endpoints" }).click();
    await page.getByRole("link", { name: endpoint.url }).click();
    const stats = page.getByRole("region", { name: "Last 24 hours" });
    await stats.getByRole("table", { name: CHART_TITLE }).waitFor();
    expect(await figures(page)).toEqual({ ...EXPECTED_FIGURES, "figure-latency": expect.stringMatching(/^\d+ ms$/) });
    expect((await chartTable(page)).filter(([ok, bad]) => ok! + bad! > 0)).toEqual(EXPECTED_HOURS);
    // Finished deliveries have no next attempt; pending ones say when, and how far off it is.
    const finished = page.getByTestId("delivery-row").filter({ hasText: /delivered|failed/ });
    await finished.first().waitFor();
    expect(await finished.first().innerText()).not.toContain("next attempt");
    await checkPage(page, "endpoint-chart");
    await page.getByLabel("Status").selectOption("pending");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await page.waitForFunction((n) => document.querySelectorAll("[data-testid=delivery-row]").length === n, RETRYING);
    const nextAttempts = await page.getByTestId("delivery-row").getByTestId("next-attempt").allInnerTexts();
    expect(nextAttempts).toHaveLength(RETRYING);
    for (const text of nextAttempts) expect(text).toMatch(/\(in 2 hours\)$/);
    await checkPage(page, "endpoint-deliveries-pending");
  }, 120_000);

  it("a world and an endpoint without deliveries show zeros and an empty chart, not a table of zeros", async () => {
    const world = await suite.stack.createWorld("epsilon");
    const page = await signIn(world.org, world.world, world.name);
    const card = page.getByRole("region", { name: "Deliveries, last 24 hours" });
    await card.getByText("No attempts in the last 24 hours").first().waitFor();
    expect(await figures(page)).toEqual({ "figure-delivered": "0", "figure-failed": "0", "figure-retrying": "0", "figure-success-rate": "—" });
    await card.getByText("no attempt yet").waitFor();
    expect(await card.getByRole("table").count()).toBe(0);
    await checkPage(page, "overview-empty");

    const endpoint = await endpointOf(world.org, world.world);
    await page.goto(`${suite.stack.admin.url}/dashboard/endpoints/${endpoint.id}`);
    const stats = page.getByRole("region", { name: "Last 24 hours" });
    await stats.getByText("No attempts in the last 24 hours").first().waitFor();
    expect(await figures(page)).toEqual({ "figure-delivered": "0", "figure-failed": "0", "figure-retrying": "0", "figure-success-rate": "—", "figure-latency": "—" });
    await checkPage(page, "endpoint-empty");
  }, 120_000);
});
