import { newDeliveryId, type DeliveryLog } from "@vw/db";
import { badRequest, traceAttempt, withSpan, type Logger } from "@vw/service-kit";
import {
  EVENT_SAMPLES,
  sampleFor,
  type TestDeliveryRequest,
  type TestDeliveryResource,
  type WebhookSubscription,
} from "@vw/contracts";
import {
  buildEnvelope,
  buildLegacyAuthBody,
  openEndpointHeaders,
  sendAttempt,
  worldReference,
  type DeliveryAgents,
  type SecretBox,
} from "@vw/webhook-core";
import type { EndpointRow, EndpointsService } from "./endpoints.service.js";
import type { WorldWithOrganization } from "./worlds.service.js";

/** What the Test action is built from besides the database and the endpoints. */
export interface EndpointTestOptions {
  /** PLAY_URL, for the envelope's `world.url`. */
  playUrl: string;
  /** Opens the endpoint's sealed secret. */
  secretBox: SecretBox;
  /** The same connect-time URL policy as the worker's deliveries. */
  agents: DeliveryAgents;
  /** Budget of the one attempt (DELIVERY_TIMEOUT_MS). */
  timeoutMs: number;
  /** Clock of the envelope's `timestamp` and of the attempt; the system clock by default. */
  now?: () => Date;
  /** Where what a policy refusal was about is logged (never answered). */
  logger: Logger;
}

/**
 * The dashboard's Test action: one realistic sample (or a `ping`) sent at once, signed like any
 * delivery, answered with what the receiver did.
 *
 * It is an action of the owner, not an event: it works on a disabled endpoint, and never changes
 * the endpoint's state (no disabling on 410, no failure counting). The delivery and its one
 * attempt are written together after the attempt, with their final status: a test delivery is
 * never `pending`, so no worker and no disable ever acts on it.
 */
export class EndpointTestService {
  constructor(
    private readonly log: DeliveryLog,
    private readonly endpoints: EndpointsService,
    private readonly options: EndpointTestOptions,
  ) {}

  /**
   * Sends the sample of `request.subscription` (400 pointing at `/subscription` when the endpoint
   * does not have it), or a `ping` with `data: {}` when none is named.
   */
  send(organizationSlug: string, worldSlug: string, endpointId: string, request: TestDeliveryRequest): Promise<TestDeliveryResource> {
    return withSpan("endpoint test", { "webhook.endpoint_id": endpointId }, () => this.sendUntraced(organizationSlug, worldSlug, endpointId, request));
  }

  private async sendUntraced(organizationSlug: string, worldSlug: string, endpointId: string, request: TestDeliveryRequest): Promise<TestDeliveryResource> {
    const { world, endpoint } = await this.endpoints.findWithWorld(organizationSlug, worldSlug, endpointId);
    const subscriptions = endpoint.subscriptions as WebhookSubscription[];
    if (request.subscription !== undefined && !subscriptions.includes(request.subscription)) {
      throw badRequest("invalid-request", "The endpoint can only be tested with one of its subscriptions, or with a ping (no subscription).", [
        { pointer: "/subscription", detail: `is not one of this endpoint's subscriptions (${subscriptions.join(", ")})` },
      ]);
    }

    const now = this.options.now ?? (() => new Date());
    const deliveryId = newDeliveryId();
    const { type, body } = this.sampleBody(endpoint, world, deliveryId, request.subscription, now());
    const secret = endpoint.secretSealed === null ? null : this.options.secretBox.open(endpoint.secretSealed);
    // A Test carries the endpoint's custom headers as its deliveries do (a gateway in front of the receiver needs them).
    const headers = openEndpointHeaders(this.options.secretBox, endpoint.headersSealed);
    const attempt = await traceAttempt(endpoint.url, { deliveryId, endpointId: endpoint.id, trigger: "test" }, () =>
      sendAttempt({ url: endpoint.url, deliveryId, attemptNumber: 1, trigger: "test", body, secret, headers, agents: this.options.agents, timeoutMs: this.options.timeoutMs, now }),
    );
    // What a policy refusal was about, what the resolver said of a host without an address, or what
    // the delivery proxy said, stays on the server: the answer and the history say only "not a
    // public address" or "could not connect".
    if (attempt.errorDetail !== undefined) {
      this.options.logger.warn(
        { endpointId: endpoint.id, deliveryId, detail: attempt.errorDetail },
        attempt.errorKind === "refused-by-policy" ? "Test refused by ENDPOINT_URL_POLICY" : "Test could not connect: see detail",
      );
    }

    await this.log.recordFinished([
      { delivery: { id: deliveryId, endpointId: endpoint.id, worldId: world.id, type, body }, test: true, attempt, finishedAt: new Date() },
    ]);

    return {
      deliveryId,
      type,
      status: attempt.responseStatus,
      durationMs: attempt.durationMs,
      responseBody: attempt.responseBody,
      verdict: attempt.verdict,
      error: attempt.error,
    };
  }

  /**
   * The bytes of the sample: an envelope with `test: true`, except `member.connecting` to a
   * legacy-format endpoint, whose flat body has no room for the marker (spec: it "looks like a
   * real hook with a sample member").
   */
  private sampleBody(endpoint: EndpointRow, world: WorldWithOrganization, deliveryId: string, subscription: WebhookSubscription | undefined, at: Date): { type: string; body: Buffer } {
    if (subscription === "auth" && endpoint.format === "legacy") {
      const hook = sampleFor("auth");
      return { type: hook.type, body: buildLegacyAuthBody(hook.data) };
    }
    const sample: { type: string; data: unknown } = subscription === undefined ? { type: "ping", data: structuredClone(EVENT_SAMPLES.ping) } : sampleFor(subscription);
    const body = buildEnvelope({
      deliveryId,
      apiVersion: endpoint.apiVersion,
      type: sample.type,
      timestamp: at.toISOString(),
      world: worldReference(this.options.playUrl, world.organization.slug, world.slug, world.customDomain),
      data: sample.data,
      test: true,
    });
    return { type: sample.type, body };
  }
}
