/**
 * Processes killed with SIGKILL under load: delivery-worker (its drains' claims come back to the
 * next drain when their lease ends; what it had sent and not yet logged is sent again, at most
 * DELIVERY_CONCURRENCY copies), and event-ingest in the middle of intakes (a delivery committed
 * whose wake never came is woken by the reconciler's sweep). Restarted, and every accepted event
 * reaches its receivers, every stored delivery is delivered.
 */
import { afterAll, beforeAll, it } from "@jest/globals";
import { FAULT_TEST_TIMEOUT_MS, report, startFaultStack, type FaultStack } from "./fault-stack.js";

let stack: FaultStack;
beforeAll(async () => {
  stack = await startFaultStack({ receivers: [200, 200] });
}, 120_000);
afterAll(async () => {
  await stack?.close();
}, FAULT_TEST_TIMEOUT_MS);

it("delivery-worker killed with SIGKILL under load, then started again: nothing lost", async () => {
  const producer = stack.produce();
  await stack.flowing(producer);
  await stack.worker.kill9();
  await stack.restart("worker");
  await stack.flowing(producer);
  const run = await producer.stop();
  // verify: the copies are at most what the one worker had in flight (DELIVERY_CONCURRENCY).
  const extra = await stack.verify(run);
  await stack.allDelivered();
  report("kill -9 of delivery-worker", run, extra);
}, FAULT_TEST_TIMEOUT_MS);

it("event-ingest killed with SIGKILL in the middle of intakes, then started again: nothing accepted is lost", async () => {
  // Many small requests at once, so the kill lands inside some of them.
  const producer = stack.produce({ perRequest: 2, everyMs: 10 });
  await stack.flowing(producer);
  await stack.ingest.kill9();
  await stack.restart("ingest");
  await stack.flowing(producer);
  const run = await producer.stop();
  const extra = await stack.verify(run);
  // What a killed intake stored without queueing (its producer saw no answer) is sent too.
  await stack.allDelivered();
  report("kill -9 of event-ingest mid-intake", run, extra);
}, FAULT_TEST_TIMEOUT_MS);
