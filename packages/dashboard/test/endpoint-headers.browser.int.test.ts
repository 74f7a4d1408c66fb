/**
 * An endpoint's custom headers in the dashboard, in a real Chromium against the real stack:
 * added with the endpoint (a reserved name refused on its row), shown by name only, carried by
 * the Test action to a receiver that verifies the signature with `standardwebhooks`, redacted in
 * the attempt's request headers, edited (values typed again) and removed. Each state is scanned
 * with axe-core and screenshotted at 1280 and 360 px.
 */
import { beforeAll, describe, expect, it } from "@jest/globals";
import type { Page } from "playwright-core";
import { startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { checkPage } from "./browser.js";
import { browserSuite } from "./browser-suite.js";

const FIRST_VALUE = "Bearer dash-first-4d1c";
const SECOND_VALUE = "Bearer dash-second-9e2a";

let world: { org: string; world: string; name: string };
let receiver: WebhookReceiver;
// Unset when the suite failed to start.
const suite = browserSuite(async () => (receiver as WebhookReceiver | undefined)?.close());

beforeAll(async () => {
  [world, receiver] = await Promise.all([suite.stack.createWorld("headers"), startWebhookReceiver({ answer: 204 })]);
}, 60_000);

async function signIn(capabilities?: string[]): Promise<Page> {
  return suite.signIn(await suite.stack.mintLink(world.org, world.world, capabilities ? { capabilities } : {}), world.name);
}

const card = (page: Page) => page.locator("section.card").filter({ has: page.getByRole("heading", { name: "Custom headers", exact: true }) });

describe("custom headers", () => {
  it("added with the endpoint, shown by name, carried by Test, redacted in the history, edited and removed", async () => {
    const page = await signIn();
    await page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name: "Endpoints" }).click();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await page.getByLabel("Endpoint URL").fill(receiver.url);
    await page.getByRole("checkbox", { name: /^visitor / }).check();
    await page.getByRole("button", { name: "Add header" }).click();
    await page.getByLabel("Name 1").fill("Authorization");
    await page.getByLabel("Value 1").fill(FIRST_VALUE);
    await page.getByRole("button", { name: "Add header" }).click();
    await page.getByLabel("Name 2").fill("Host");
    await page.getByLabel("Value 2").fill("evil.example");
    await page.getByRole("button", { name: "Create endpoint" }).click();

    // The server's refusal lands on the row it is about.
    await page.getByText('"Host" is reserved').waitFor();
    expect(await page.getByLabel("Name 2").getAttribute("aria-invalid")).toBe("true");
    expect(await page.getByLabel("Name 1").getAttribute("aria-invalid")).toBeNull();
    await checkPage(page, "endpoint-add-headers-refused");
    await page.getByRole("button", { name: "Remove header 2 (Host)" }).click();
    await page.getByRole("button", { name: "Create endpoint" }).click();
    const secret = await page.getByTestId("secret-value").inputValue();
    receiver.setSecret(secret);
    await page.getByRole("button", { name: "I have stored it" }).click();

    // The endpoint page names the header, never its value.
    await page.getByRole("link", { name: receiver.url }).click();
    await page.getByTestId("endpoint-title").waitFor();
    await card(page).getByTestId("header-names").getByText("Authorization").waitFor();
    expect(await page.content()).not.toContain(FIRST_VALUE);
    await checkPage(page, "endpoint-custom-headers");

    // Test carries it; the signature still verifies.
    await page.getByRole("button", { name: "Send test" }).click();
    await page.getByTestId("test-result").getByText("HTTP 204").waitFor();
    expect(receiver.received.at(-1)?.headers.authorization).toBe(FIRST_VALUE);
    expect(receiver.received.at(-1)?.verifyError).toBeNull();

    // The attempt's request headers show the name with [redacted].
    await page.getByTestId("delivery-row").filter({ hasText: "ping" }).getByRole("link", { name: "ping" }).click();
    await page.getByRole("heading", { name: "Delivery", exact: true }).waitFor();
    await page.getByTestId("attempt").first().getByText("Request headers").click();
    await page.getByTestId("attempt").first().getByText("[redacted]").waitFor();
    expect(await page.content()).not.toContain(FIRST_VALUE);
    await checkPage(page, "delivery-detail-redacted-header");
    await page.getByRole("link", { name: "← Endpoint" }).click();

    // Editing starts from the names; a value left empty is asked for, not saved as empty.
    await card(page).getByRole("button", { name: "Edit headers" }).click();
    expect(await page.getByLabel("Name 1").inputValue()).toBe("Authorization");
    expect(await page.getByLabel("Value 1").inputValue()).toBe("");
    await card(page).getByRole("button", { name: "Save headers" }).click();
    await card(page).getByText("Type the value of Authorization").waitFor();
    expect(await page.getByLabel("Value 1").getAttribute("aria-invalid")).toBe("true");
    expect(await page.getByLabel("Name 1").getAttribute("aria-invalid")).toBeNull();
    await checkPage(page, "endpoint-headers-edit");
    await page.getByLabel("Value 1").fill(SECOND_VALUE);
    await card(page).getByRole("button", { name: "Add header" }).click();
    await page.getByLabel("Name 2").fill("X-Tenant");
    await page.getByLabel("Value 2").fill("acme");
    await card(page).getByRole("button", { name: "Save headers" }).click();
    await card(page).getByText("Saved 2 custom headers.").waitFor();
    expect(await card(page).getByTestId("header-names").locator("li .mono").allInnerTexts()).toEqual(["Authorization", "X-Tenant"]);
    await page.getByRole("button", { name: "Send test" }).click();
    await receiver.waitFor(2);
    expect(receiver.received.at(-1)?.headers).toMatchObject({ authorization: SECOND_VALUE, "x-tenant": "acme" });
    expect(receiver.received.at(-1)?.verifyError).toBeNull();

    // Remove all, after confirmation.
    await card(page).getByRole("button", { name: "Remove all headers" }).click();
    await card(page).getByRole("button", { name: "Remove headers" }).click();
    await card(page).getByTestId("header-names-empty").waitFor();
    await page.getByRole("button", { name: "Send test" }).click();
    await receiver.waitFor(3);
    expect(receiver.received.at(-1)?.headers.authorization).toBeUndefined();
    await checkPage(page, "endpoint-custom-headers-none");
  }, 180_000);

  it("a session without manage-endpoints sees the names and why it cannot edit them", async () => {
    const [endpoint] = (await suite.stack.adminCall<{ items: { id: string }[] }>("GET", `/admin/v1/worlds/${world.org}/${world.world}/endpoints`)).items;
    await suite.stack.adminCall("PATCH", `/admin/v1/worlds/${world.org}/${world.world}/endpoints/${endpoint!.id}`, { headers: { "X-Tenant": "acme" } });
    const page = await signIn(["view"]);
    await page.goto(`${suite.stack.admin.url}/dashboard/endpoints/${endpoint!.id}`);
    await card(page).getByTestId("header-names").getByText("X-Tenant").waitFor();
    const edit = card(page).getByRole("button", { name: "Edit headers" });
    expect(await edit.isDisabled()).toBe(true);
    await checkPage(page, "endpoint-custom-headers-view-only");
  }, 90_000);
});
