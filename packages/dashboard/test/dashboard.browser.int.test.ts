/**
 * The Developers dashboard in a real Chromium against the real admin-api, event-ingest and
 * delivery-worker (own processes), PostgreSQL, Redis and a receiver that verifies signatures
 * with `standardwebhooks`. Set-up acts as the platform (mints links, posts events); every
 * assertion about the dashboard goes through the page. Each page visited is scanned with
 * axe-core (no serious or critical violation) and screenshotted at 1280 and 360 px.
 */
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "@jest/globals";
import type { Page } from "playwright-core";
import { EVENT_SAMPLES } from "@vw/contracts";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { checkPage } from "./browser.js";
import { browserSuite } from "./browser-suite.js";

let alpha: { org: string; world: string; name: string };
let beta: { org: string; world: string; name: string };
let gamma: { org: string; world: string; name: string };
const receivers: WebhookReceiver[] = [];
// Every page of every test: nothing fetched from another host, no CSP violation or script error.
const suite = browserSuite(() => Promise.all(receivers.map((r) => r.close())));
const { signIn, visit } = suite;

beforeAll(async () => {
  [alpha, beta, gamma] = await Promise.all([suite.stack.createWorld("alpha"), suite.stack.createWorld("beta"), suite.stack.createWorld("gamma")]);
}, 60_000);

async function receiver(answer: number = 204): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver({ answer });
  receivers.push(r);
  return r;
}

const nav = (page: Page, name: string) => page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name }).click();

/** Waits until `count` elements match `selector` (the list refreshes itself). */
async function waitForCount(page: Page, selector: string, count: number, timeout = 30_000): Promise<void> {
  await page.waitForFunction(([s, n]) => document.querySelectorAll(s as string).length === n, [selector, count] as const, { timeout });
}

async function createEndpoint(page: Page, url: string, subscriptions: string[]): Promise<string> {
  await nav(page, "Endpoints");
  await page.getByRole("button", { name: "Add endpoint" }).click();
  await page.getByLabel("Endpoint URL").fill(url);
  for (const s of subscriptions) await page.getByRole("checkbox", { name: new RegExp(`^${s} `) }).check();
  await page.getByRole("button", { name: "Create endpoint" }).click();
  const secret = await page.getByTestId("secret-value").inputValue();
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  return secret;
}

describe("rooms", () => {
  it("the overview lists the world's rooms, each with its room URL", async () => {
    const key = await suite.stack.adminCall<{ token: string }>("POST", `/admin/v1/worlds/${beta.org}/${beta.world}/api-keys`, { name: "map upload" });
    const wam = (path: string, name: string) => JSON.stringify({ version: "2.1.0", mapUrl: `https://maps.example.test/${path.replace(/\.wam$/, ".tmj")}`, entities: {}, areas: [], metadata: { name } });
    for (const [path, name] of [["lobby.wam", "Lobby"], ["floors/first-floor-meeting-rooms-and-the-kitchen.wam", "First floor, meeting rooms and kitchen"]] as const) {
      const res = await fetch(`${suite.stack.mapStorage.url}/${beta.org}/${beta.world}/${path}`, { method: "PUT", headers: { authorization: `Bearer ${key.token}` }, body: wam(path, name) });
      expect(res.status).toBe(201);
    }
    const page = await signIn(await suite.stack.mintLink(beta.org, beta.world, { capabilities: ["view"] }), beta.name);
    await waitForCount(page, '[data-testid="room-row"]', 2);
    const urls = await page.getByTestId("room-url").allTextContents();
    expect(urls).toEqual([
      `https://play.example.test/@/${beta.org}/${beta.world}/floors/first-floor-meeting-rooms-and-the-kitchen.wam`,
      `https://play.example.test/@/${beta.org}/${beta.world}/lobby.wam`,
    ]);
    await page.getByRole("listitem").filter({ hasText: "Lobby" }).getByText("Map: https://maps.example.test/lobby.tmj").waitFor();
    // The bytes map-storage counted for the world's files, against its quota (the platform's).
    const bytes = Buffer.byteLength(wam("lobby.wam", "Lobby")) + Buffer.byteLength(wam("floors/first-floor-meeting-rooms-and-the-kitchen.wam", "First floor, meeting rooms and kitchen"));
    await page.getByTestId("storage-use").filter({ hasText: `${bytes} bytes of 10 GiB used` }).waitFor();
    await checkPage(page, "overview-rooms");

    // A world near its quota (set by the operator) is told so.
    await suite.stack.adminCall("PATCH", `/admin/v1/worlds/${beta.org}/${beta.world}`, { quotas: { maxStorageBytes: bytes + 20 } });
    await page.reload();
    await page.getByTestId("storage-use").filter({ hasText: `${bytes} bytes of ${bytes + 20} bytes used` }).waitFor();
    await page.getByRole("status").filter({ hasText: "Nearly full" }).waitFor();
    await checkPage(page, "overview-storage-nearly-full");
    await suite.stack.adminCall("PATCH", `/admin/v1/worlds/${beta.org}/${beta.world}`, { quotas: { maxStorageBytes: null } });
  }, 60_000);
});

describe("session links", () => {
  it("a link opens its world once and leaves no code in the address bar; a reused or unknown link and no session get clear pages", async () => {
    const link = await suite.stack.mintLink(alpha.org, alpha.world);
    expect(link).toMatch(new RegExp(`^${suite.stack.admin.url}/dashboard/#code=.+`));
    const page = await signIn(link, alpha.name);
    expect(page.url()).toBe(`${suite.stack.admin.url}/dashboard/`);
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    await page.getByTestId("map-storage-url").filter({ hasText: `https://maps.example.test/${alpha.org}/${alpha.world}` }).waitFor();
    await page.getByText(`https://play.example.test/@/${alpha.org}/${alpha.world}/`).waitFor();
    await page.getByText("No rooms yet.").waitFor();
    await checkPage(page, "overview");

    // A reload keeps the session (cookie), the code is not needed again.
    await page.reload();
    await page.getByTestId("world-name").filter({ hasText: alpha.name }).waitFor();

    const reused = await visit(link);
    await reused.getByRole("heading", { name: "This dashboard link was already used" }).waitFor();
    expect(reused.url()).not.toContain("code=");
    expect(await reused.getByTestId("world-name").count()).toBe(0);
    await checkPage(reused, "link-refused");

    const unknown = await visit(`${suite.stack.admin.url}/dashboard/#code=${randomUUID()}`);
    await unknown.getByRole("heading", { name: "This dashboard link is not valid" }).waitFor();
    expect(await unknown.getByTestId("world-name").count()).toBe(0);

    // A link opened after its 10 minutes.
    const late = await suite.stack.mintLink(gamma.org, gamma.world);
    await suite.stack.expireUnopenedLinks(gamma.org, gamma.world);
    const expired = await visit(late);
    await expired.getByRole("heading", { name: "This dashboard link has expired" }).waitFor();
    expect(expired.url()).not.toContain("code=");
    expect(await expired.getByTestId("world-name").count()).toBe(0);

    const none = await visit(`${suite.stack.admin.url}/dashboard/endpoints`);
    await none.getByRole("heading", { name: "You are not signed in" }).waitFor();
    await checkPage(none, "no-session");
  }, 120_000);

  it("signing out ends the session", async () => {
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world), alpha.name);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "You are signed out" }).waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "You are not signed in" }).waitFor();
  }, 60_000);
});

describe("API keys", () => {
  it("creates a key whose token is shown once with the base address, lists it, revokes it after confirmation", async () => {
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world), alpha.name);
    await nav(page, "API keys");
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await page.getByText("No API keys yet.").waitFor();
    await checkPage(page, "api-keys-empty");
    await page.getByLabel("Name (optional)").fill("CI upload");
    await page.getByRole("button", { name: "Create key" }).click();
    const token = await page.getByTestId("secret-value").inputValue();
    expect(token.length).toBeGreaterThan(20);
    await page.getByTestId("created-key-base").filter({ hasText: `https://maps.example.test/${alpha.org}/${alpha.world}` }).waitFor();
    await checkPage(page, "api-keys-token-once");

    await page.getByRole("button", { name: "I have stored it" }).click();
    await waitForCount(page, "[data-testid=api-key-row]", 1);
    const row = page.getByTestId("api-key-row");
    await row.getByText("CI upload", { exact: true }).waitFor();
    expect(await page.content()).not.toContain(token);
    // Once dismissed, never again: a fresh load shows only the prefix.
    await page.reload();
    await page.getByTestId("api-key-row").waitFor();
    expect(await page.content()).not.toContain(token);
    const prefix = (await row.locator(".mono").innerText()).replace("…", "");
    expect(token.startsWith(prefix)).toBe(true);
    await checkPage(page, "api-keys-list");

    await row.getByRole("button", { name: "Revoke CI upload" }).click();
    await row.getByRole("button", { name: "Revoke key" }).click();
    await row.getByText("revoked", { exact: true }).waitFor();
  }, 90_000);
});

describe("endpoints", () => {
  it("refuses a private address on the URL field under the default policy (public-https)", async () => {
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world, {}, suite.stack.strictAdmin.url), alpha.name);
    await nav(page, "Endpoints");
    await page.getByText("No endpoints yet.").waitFor();
    await checkPage(page, "endpoints-empty");
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const url = page.getByLabel("Endpoint URL");
    await url.fill("https://10.0.0.1/webhooks");
    await page.getByRole("checkbox", { name: /^visitor / }).check();
    await page.getByRole("button", { name: "Create endpoint" }).click();
    await page.locator("input[aria-invalid=true]").waitFor();
    expect(await url.getAttribute("aria-invalid")).toBe("true");
    const describedBy = (await url.getAttribute("aria-describedby"))!.split(" ");
    const fieldError = page.locator(`[id="${describedBy[1]}"]`);
    expect((await fieldError.innerText()).toLowerCase()).toMatch(/private|public|address/);
    await checkPage(page, "endpoint-add-refused");
    // Nothing was created.
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.getByText("No endpoints yet.").waitFor();
  }, 90_000);

  it("create (secret once), Test, an ingested event in the list, attempt detail, Replay, rotate, disable, re-enable, format switch, delete", async () => {
    const r = await receiver(204);
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world), alpha.name);
    const secret = await createEndpoint(page, r.url, ["visitor", "consent"]);
    r.setSecret(secret);
    await page.getByText("Verify each delivery with any Standard Webhooks library").waitFor();
    await checkPage(page, "endpoint-created-secret-once");
    await page.getByRole("button", { name: "I have stored it" }).click();
    expect(await page.content()).not.toContain(secret);
    await page.getByTestId("endpoint-row").waitFor();
    await checkPage(page, "endpoints-list");

    // Detail and Test (ping): status and latency shown, the receiver verified the signature.
    await page.getByRole("link", { name: r.url }).click();
    await page.getByTestId("endpoint-title").filter({ hasText: r.url }).waitFor();
    await page.getByRole("button", { name: "Send test" }).click();
    const result = page.getByTestId("test-result");
    await result.getByText("HTTP 204").waitFor();
    expect(await page.getByTestId("test-latency").innerText()).toMatch(/^\d+ ms$/);
    expect(r.received).toHaveLength(1);
    expect(r.received[0]!.verifyError).toBeNull();
    await checkPage(page, "endpoint-detail");

    // An event posted to event-ingest shows up in the list, delivered.
    const eventId = await suite.stack.postEvent(alpha.org, alpha.world, "visitor.registered", EVENT_SAMPLES["visitor.registered"]);
    await r.waitFor(2);
    expect(r.received[1]!.verifyError).toBeNull();
    const deliveredRow = page.getByTestId("delivery-row").filter({ hasText: "visitor.registered" });
    await deliveredRow.filter({ hasText: "delivered" }).waitFor({ timeout: 30_000 });
    await waitForCount(page, "[data-testid=delivery-row]", 2);

    // Filters: by type, by a time range that excludes everything, and find by the producer's event id.
    await page.getByLabel("Type").selectOption("ping");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await waitForCount(page, "[data-testid=delivery-row]", 1);
    await page.getByTestId("delivery-row").filter({ hasText: "ping" }).waitFor();
    await page.getByLabel("Type").selectOption("");
    await page.getByLabel("From").fill("2030-01-01T00:00");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await page.getByText("No delivery matches these filters.").waitFor();
    await page.getByLabel("From").fill("");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await waitForCount(page, "[data-testid=delivery-row]", 2);
    await page.getByLabel("Find by delivery id or event id").fill(eventId);
    await page.getByRole("button", { name: "Find", exact: true }).click();
    await page.getByTestId("event-filter").waitFor();
    await waitForCount(page, "[data-testid=delivery-row]", 1);
    await deliveredRow.waitFor();
    await page.getByRole("button", { name: "Show all" }).click();
    await waitForCount(page, "[data-testid=delivery-row]", 2);

    // Attempt detail.
    await deliveredRow.getByRole("link", { name: "visitor.registered" }).click();
    await page.getByRole("heading", { name: "Delivery", exact: true }).waitFor();
    const deliveryId = await page.getByTestId("delivery-id").innerText();
    expect(r.received[1]!.headers["webhook-id"]).toBe(deliveryId);
    await page.getByTestId("attempt").first().getByText("HTTP 204").waitFor();
    await page.getByTestId("attempt").first().getByText("Request headers").click();
    await page.getByText("webhook-signature:").first().waitFor();
    expect(await page.getByTestId("delivery-body").innerText()).toContain('"type": "visitor.registered"');
    await checkPage(page, "delivery-detail");

    // Replay: same deliveryId and bytes, a second attempt with trigger replay.
    await page.getByRole("button", { name: "Replay" }).click();
    await page.getByTestId("replay-queued").waitFor();
    await r.waitFor(3);
    expect(r.received[2]!.headers["webhook-id"]).toBe(deliveryId);
    expect(r.received[2]!.body.equals(r.received[1]!.body)).toBe(true);
    expect(r.received[2]!.verifyError).toBeNull();
    await waitForCount(page, "[data-testid=attempt]", 2);
    await page.getByTestId("attempt").nth(1).getByText("(replay)").waitFor();

    // Rotate: the new secret is shown once and signs from now on.
    await page.getByRole("link", { name: "← Endpoint" }).click();
    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByRole("button", { name: "Rotate secret" }).last().click();
    const rotated = await page.getByTestId("secret-value").inputValue();
    expect(rotated).not.toBe(secret);
    await page.getByText("The previous secret stopped working at once").waitFor();
    await checkPage(page, "endpoint-rotated-secret-once");
    r.setSecret(rotated);
    await page.getByRole("button", { name: "Send test" }).click();
    await r.waitFor(4);
    expect(r.received[3]!.verifyError).toBeNull();
    await page.getByRole("button", { name: "I have stored it" }).click();

    // Disable (says missed events are never caught up), then re-enable.
    await page.getByText("Events that happen meanwhile are never caught up").waitFor();
    await page.getByRole("button", { name: "Disable endpoint" }).click();
    await page.getByRole("button", { name: "Disable", exact: true }).click();
    await page.getByText("disabled by a person").waitFor();
    await page.getByText("Events missed while it was disabled are never caught up").waitFor();
    await checkPage(page, "endpoint-disabled");
    await page.getByRole("button", { name: "Re-enable endpoint" }).click();
    await page.getByRole("button", { name: "Disable endpoint" }).waitFor();

    // Format: to legacy (explained) and back.
    await page.getByRole("button", { name: "Switch to legacy" }).click();
    await page.getByTestId("endpoint-format").filter({ hasText: "legacy" }).waitFor();
    await page.getByText("Legacy: the flat body of the former single-URL webhook").waitFor();
    await page.getByRole("button", { name: "Switch to current" }).click();
    await page.getByTestId("endpoint-format").filter({ hasText: "current" }).waitFor();

    // Rate limit: out of range refused on the field, then set, then removed.
    const rate = page.getByLabel("Deliveries per second");
    await rate.fill("0");
    await page.getByRole("button", { name: "Save limit" }).click();
    await page.locator("input[aria-invalid=true]").waitFor();
    expect(await rate.getAttribute("aria-invalid")).toBe("true");
    await rate.fill("5");
    await page.getByRole("button", { name: "Save limit" }).click();
    await page.getByText("Limited to 5 per second.").waitFor();
    await page.getByText("Rate limit: 5/s").waitFor();

    // Delete, after confirmation: back on the list, the endpoint is gone.
    await page.getByRole("button", { name: "Delete endpoint" }).click();
    await page.getByRole("button", { name: "Delete for good" }).click();
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    await page.getByText("No endpoints yet.").waitFor();
  }, 180_000);

  it("recover after a receiver outage: the preview counts the failed deliveries, all arrive again with their ids and bytes", async () => {
    const r = await receiver(503);
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world), alpha.name);
    const secret = await createEndpoint(page, r.url, ["consent"]);
    r.setSecret(secret);
    await page.getByRole("link", { name: "Open the endpoint" }).click();
    await page.getByTestId("endpoint-title").waitFor();

    const events = 3;
    for (let i = 0; i < events; i++) await suite.stack.postEvent(alpha.org, alpha.world, "consent.changed", EVENT_SAMPLES["consent.changed"]);
    // The first attempt of each and its one retry (RETRY_DELAYS=100ms) are refused.
    await r.waitFor(events * 2, 30_000);
    const failedIds = new Set(r.received.map((d) => d.headers["webhook-id"]));
    expect(failedIds.size).toBe(events);
    await page.getByLabel("Status").selectOption("failed");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await waitForCount(page, "[data-testid=delivery-row]", events);
    await checkPage(page, "endpoint-deliveries-failed");

    r.answerWith(204);
    await page.getByRole("button", { name: "Preview" }).click();
    await page.getByTestId("recover-count").filter({ hasText: `${events} failed deliveries will be sent again.` }).waitFor();
    await page.getByRole("button", { name: `Recover ${events} deliveries` }).click();
    await page.getByTestId("recover-progress").getByText(/Recovery done/).waitFor({ timeout: 30_000 });
    await checkPage(page, "endpoint-recovered");
    const all = await r.waitFor(events * 3, 30_000);
    const resent = all.slice(events * 2);
    expect(new Set(resent.map((d) => d.headers["webhook-id"]))).toEqual(failedIds);
    for (const d of resent) {
      expect(d.verifyError).toBeNull();
      const first = all.find((x) => x.headers["webhook-id"] === d.headers["webhook-id"])!;
      expect(d.body.equals(first.body)).toBe(true);
    }

    // The endpoints list and the overview show the last 24 h from the history's stats.
    await nav(page, "Endpoints");
    const row = page.getByTestId("endpoint-row").filter({ hasText: r.url });
    await row.getByTestId("success-rate").filter({ hasText: /24 h success: \d+(\.\d)? % of \d+ attempts/ }).waitFor();
    await row.getByTestId("last-attempt").filter({ hasText: /HTTP (204|503)/ }).waitFor();
    // The overview: the world's figures (this endpoint's, the first test's endpoint being deleted):
    // every delivery delivered in the end, after two refused attempts each.
    await nav(page, "Overview");
    const figures = page.getByRole("region", { name: "Deliveries, last 24 hours" });
    await figures.getByText(`${events} of ${events * 3} attempts answered 2xx`).waitFor({ timeout: 45_000 });
    expect(await figures.getByTestId("figure-delivered").locator(".stat-value").innerText()).toBe(String(events));
    expect(await figures.getByTestId("figure-failed").locator(".stat-value").innerText()).toBe("0");
    expect(await figures.getByTestId("figure-retrying").locator(".stat-value").innerText()).toBe("0");
    await figures.getByRole("table", { name: /Attempts per hour/ }).waitFor();
    await checkPage(page, "overview-with-figures");
  }, 180_000);
});

describe("a receiver asking to slow down", () => {
  it("429 with Retry-After: the delivery says why its next attempt waits, the endpoint's figures say sending is slowed down", async () => {
    const world = await suite.stack.createWorld("zeta");
    const r = await receiver(204);
    r.answerWith((_req, res) => {
      res.statusCode = 429;
      res.setHeader("retry-after", "600");
      res.end("slow down");
    });
    const endpoint = await suite.stack.adminCall<{ id: string; secret: string }>("POST", `/admin/v1/worlds/${world.org}/${world.world}/endpoints`, { url: r.url, subscriptions: ["visitor"] });
    r.setSecret(endpoint.secret);
    await suite.stack.postEvent(world.org, world.world, "visitor.registered", EVENT_SAMPLES["visitor.registered"]);
    const [first] = await r.waitFor(1, 30_000);
    expect(first!.verifyError).toBeNull();

    const page = await signIn(await suite.stack.mintLink(world.org, world.world, { capabilities: ["view"] }), world.name);
    await page.goto(`${suite.stack.admin.url}/dashboard/endpoints/${endpoint.id}`);
    await page.getByTestId("endpoint-title").filter({ hasText: r.url }).waitFor();
    // The figures: the window the drain left after the 429, halved from its largest (10), and why.
    const stats = page.getByRole("region", { name: "Last 24 hours" });
    const slowed = stats.getByTestId("sending-window");
    await slowed.filter({ hasText: "Slowed down" }).waitFor({ timeout: 30_000 });
    expect(await slowed.getAttribute("role")).toBe("status");
    expect(await slowed.innerText()).toMatch(/^Slowed down: sending 5 deliveries at once instead of 10, because the receiver answered 429 or 503, asking for fewer requests at once \(since .+\)\. It grows back as the receiver answers\.$/);
    await stats.getByTestId("figure-retrying").filter({ hasText: "1" }).waitFor({ timeout: 30_000 });
    // The list: the delivery is pending, next tried when the receiver asked, and says so.
    const row = page.getByTestId("delivery-row").filter({ hasText: "visitor.registered" });
    await row.getByTestId("next-attempt").filter({ hasText: "the receiver asked to wait 10 minutes" }).waitFor({ timeout: 30_000 });
    await checkPage(page, "endpoint-slowed-down");

    // The delivery's page: pending, its next attempt and why it is later than the retry schedule.
    await row.getByRole("link", { name: "visitor.registered" }).click();
    await page.getByRole("heading", { name: "Delivery", exact: true }).waitFor();
    expect(await page.getByTestId("delivery-id").innerText()).toBe(first!.headers["webhook-id"]);
    await page.getByTestId("delivery-status").getByText("pending").waitFor();
    expect(await page.getByTestId("next-attempt-reason").innerText()).toBe(", later than the retry schedule: the receiver asked to wait 10 minutes");
    await page.getByTestId("attempt").first().getByText("HTTP 429").waitFor();
    await checkPage(page, "delivery-retry-after");
    expect(r.received).toHaveLength(1);
  }, 120_000);
});

describe("capabilities and isolation", () => {
  it("a view-only session sees every action disabled with its reason, and the API refuses it", async () => {
    const r = await receiver(204);
    const endpoint = await suite.stack.adminCall<{ id: string }>("POST", `/admin/v1/worlds/${alpha.org}/${alpha.world}/endpoints`, { url: r.url, subscriptions: ["visitor"] });
    await suite.stack.adminCall("POST", `/admin/v1/worlds/${alpha.org}/${alpha.world}/endpoints/${endpoint.id}/test`, {});
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world, { capabilities: ["view"] }), alpha.name);

    await nav(page, "Endpoints");
    const add = page.getByRole("button", { name: "Add endpoint" });
    expect(await add.isDisabled()).toBe(true);
    await page.getByText("lacks the manage-endpoints capability").first().waitFor();
    await page.getByTestId("capability-note").filter({ hasText: "View-only access" }).waitFor();
    await checkPage(page, "view-only-endpoints");

    await page.getByRole("link", { name: r.url }).click();
    await page.getByTestId("endpoint-title").waitFor();
    for (const name of ["Send test", "Preview", "Edit", "Disable endpoint", "Rotate secret", "Switch to legacy", "Delete endpoint"]) {
      expect(await page.getByRole("button", { name, exact: true }).isDisabled()).toBe(true);
    }
    await checkPage(page, "view-only-endpoint-detail");
    await page.getByTestId("delivery-row").first().getByRole("link").click();
    expect(await page.getByRole("button", { name: "Replay" }).isDisabled()).toBe(true);

    await nav(page, "API keys");
    expect(await page.getByRole("button", { name: "Create key" }).isDisabled()).toBe(true);
    expect(await page.getByLabel("Name (optional)").isDisabled()).toBe(true);
    await nav(page, "Settings");
    expect(await page.getByRole("button", { name: "Save settings" }).isDisabled()).toBe(true);

    // The server agrees: the same calls the buttons would make are refused (403).
    const statuses = await page.evaluate(async ([org, world, id]) => {
      const base = `/admin/v1/worlds/${org}/${world}`;
      const post = (path: string, body?: unknown) =>
        fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body ?? {}) }).then((x) => x.status);
      return [
        await post(`${base}/endpoints`, { url: "http://127.0.0.1:9/x", subscriptions: ["visitor"] }),
        await post(`${base}/endpoints/${id}/disable`),
        await post(`${base}/endpoints/${id}/test`),
        await post(`${base}/api-keys`, {}),
      ];
    }, [alpha.org, alpha.world, endpoint.id] as const);
    expect(statuses).toEqual([403, 403, 403, 403]);
    await suite.stack.adminCall("DELETE", `/admin/v1/worlds/${alpha.org}/${alpha.world}/endpoints/${endpoint.id}`);
  }, 120_000);

  it("a session of world A cannot read world B, whatever path or id it uses", async () => {
    const r = await receiver(204);
    const bEndpoint = await suite.stack.adminCall<{ id: string; url: string }>("POST", `/admin/v1/worlds/${beta.org}/${beta.world}/endpoints`, {
      url: `${r.url}?world=beta`,
      subscriptions: ["visitor"],
    });
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world), alpha.name);
    const answers = await page.evaluate(async ([aOrg, aWorld, bOrg, bWorld, bId]) => {
      const get = async (path: string) => {
        const res = await fetch(path);
        return { path, status: res.status, body: await res.text() };
      };
      return [
        await get(`/admin/v1/worlds/${bOrg}/${bWorld}`),
        await get(`/admin/v1/worlds/${bOrg}/${bWorld}/endpoints`),
        await get(`/admin/v1/worlds/${bOrg}/${bWorld}/endpoints/${bId}`),
        await get(`/admin/v1/worlds/${aOrg}/${aWorld}/endpoints/${bId}`),
        await get(`/admin/v1/worlds/${aOrg}/${aWorld}/endpoints/${bId}/deliveries`),
        await get(`/admin/v1/organizations/${bOrg}`),
      ];
    }, [alpha.org, alpha.world, beta.org, beta.world, bEndpoint.id] as const);
    for (const a of answers) {
      expect([a.path, [403, 404].includes(a.status)]).toEqual([a.path, true]);
      expect(a.body).not.toContain("world=beta");
    }
    // Through the UI: world B's endpoint id under A's dashboard is simply not found.
    await page.goto(`${suite.stack.admin.url}/dashboard/endpoints/${bEndpoint.id}`);
    await page.getByText("Could not load the endpoint").waitFor();
    expect(await page.content()).not.toContain("world=beta");
  }, 90_000);
});

describe("catalogue and settings", () => {
  it("lists every delivered type with description, sample and schema; settings save analytics and token exposure", async () => {
    const page = await signIn(await suite.stack.mintLink(alpha.org, alpha.world), alpha.name);
    await nav(page, "Event catalogue");
    await waitForCount(page, "[data-testid=event-type]", 7);
    for (const type of ["recording.completed", "visitor.registered", "consent.changed", "analytics.batch", "member.connecting", "ping"]) {
      await page.getByRole("heading", { name: type, exact: true }).waitFor();
    }
    await page.getByTestId("event-type").first().getByText("JSON Schema").click();
    await page.getByText('"$schema"').or(page.getByText('"properties"')).first().waitFor();
    await checkPage(page, "event-catalogue");

    await nav(page, "Settings");
    await page.getByRole("checkbox", { name: /User-level activity/ }).uncheck();
    await page.getByRole("checkbox", { name: /corp-sso/ }).check();
    expect(await page.getByRole("checkbox", { name: /google/ }).isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByText("Settings saved.").waitFor();
    await checkPage(page, "settings");
    await page.reload();
    await page.getByRole("checkbox", { name: /corp-sso/ }).waitFor();
    expect(await page.getByRole("checkbox", { name: /User-level activity/ }).isChecked()).toBe(false);
    expect(await page.getByRole("checkbox", { name: /corp-sso/ }).isChecked()).toBe(true);
  }, 90_000);
});
