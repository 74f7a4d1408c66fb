/**
 * PgBouncer killed (SIGKILL) and restarted while events keep coming: every event event-ingest
 * accepted (202) is delivered, signed; every process stays alive and reports ready again. Events
 * refused while PgBouncer was down are the producer's to retry; they are not counted. Nothing
 * here counts events inside a window of time: the test waits for each condition.
 */
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { eventually, startWebhookReceiver, type WebhookReceiver } from "@vw/testing";
import { SERVICE_NAMES, startPgBouncerStack, type PgBouncerStack } from "./pgbouncer-stack.js";

let s: PgBouncerStack;
let receiver: WebhookReceiver;
beforeAll(async () => {
  [s, receiver] = await Promise.all([startPgBouncerStack(), startWebhookReceiver({ answer: 200 })]);
}, 240_000);
afterAll(async () => {
  await s?.close();
  await receiver?.close();
});

/** The producer: posts batches of 5 events in a loop until stopped, recording what was accepted. */
function produce(org: string, world: string) {
  const state = { accepted: [] as string[], refused: 0, stop: false };
  const done = (async () => {
    while (!state.stop) {
      const batch = Array.from({ length: 5 }, () => s.visitorEvent(org, world));
      let accepted = false;
      try {
        accepted = (await s.postEvents(batch)).status === 202;
      } catch {
        // no answer: the outcome is unknown, so it is not counted as accepted
      }
      if (accepted) state.accepted.push(...batch.map((e) => e.data.uuid as string));
      else {
        state.refused += 1;
        // A refusal comes at once while PgBouncer is down; a pause keeps the loop from spinning.
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  })();
  return { state, done };
}

it("a PgBouncer kill -9 and restart under load: every accepted event delivered, every process alive and ready again", async () => {
  const { org, world } = await s.createWorld();
  const created = await s.call(s.services["admin-api"].url, "POST", `/admin/v1/worlds/${org}/${world}/endpoints`, {
    body: { url: receiver.url, subscriptions: ["visitor"] },
  });
  expect(created.status).toBe(201);
  receiver.setSecret(created.body.secret as string);

  const producer = produce(org, world);
  try {
    await eventually("50 events accepted before the kill", () => producer.state.accepted.length >= 50, { timeoutMs: 120_000 });
    await s.bouncer.kill9();
    const refusedBefore = producer.state.refused;
    await eventually("event-ingest refuses events while PgBouncer is down", () => producer.state.refused > refusedBefore, { timeoutMs: 60_000 });
    await s.bouncer.restart();
    const acceptedAtRestart = producer.state.accepted.length;
    await eventually("50 more events accepted after the restart", () => producer.state.accepted.length >= acceptedAtRestart + 50, { timeoutMs: 120_000 });
  } finally {
    producer.state.stop = true;
    await producer.done;
  }

  const accepted = new Set(producer.state.accepted);
  const delivered = () => new Set(receiver.received.map((r) => (JSON.parse(r.body.toString("utf8")) as { data: { uuid: string } }).data.uuid));
  await eventually(
    `all ${accepted.size} accepted events delivered`,
    () => {
      const got = delivered();
      return [...accepted].every((uuid) => got.has(uuid));
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  for (const request of receiver.received) expect(request.verifyError).toBeNull();

  for (const name of SERVICE_NAMES) {
    const service = s.services[name];
    expect({ name, exitCode: service.child.exitCode, signal: service.child.signalCode }).toEqual({ name, exitCode: null, signal: null });
    await eventually(`${name} is ready again`, async () => (await fetch(`${service.url}/readyz`)).status === 200, { timeoutMs: 60_000 });
  }
}, 600_000);
