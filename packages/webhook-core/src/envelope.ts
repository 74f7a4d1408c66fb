/**
 * The exact bytes a delivery carries (spec: Delivery envelope; member.connecting legacy body).
 * Bodies are serialised once, when the delivery is created, and stored: every attempt, retry and
 * replay sends those bytes, so the signature of a replay covers a byte-identical body.
 */

/** The `world` member of the envelope. */
export interface WorldReference {
  slug: string;
  url: string;
}

/** What an envelope is made of. */
export interface EnvelopeInput {
  deliveryId: string;
  apiVersion: string;
  type: string;
  /** ISO 8601 UTC instant of the event (of the batch assembly for `analytics.batch`). */
  timestamp: string;
  world: WorldReference;
  data: unknown;
  /** Only deliveries of the Test action carry `test: true`; others have no `test` member. */
  test?: boolean;
}

/** Serialises an envelope with a fixed member order: `deliveryId, apiVersion, type, timestamp, world, data[, test]`. */
export function buildEnvelope(input: EnvelopeInput): Buffer {
  const envelope: Record<string, unknown> = {
    deliveryId: input.deliveryId,
    apiVersion: input.apiVersion,
    type: input.type,
    timestamp: input.timestamp,
    world: { slug: input.world.slug, url: input.world.url },
    data: input.data ?? {},
  };
  if (input.test === true) envelope["test"] = true;
  return Buffer.from(JSON.stringify(envelope), "utf8");
}

/** The flat body of `member.connecting` for a legacy-format endpoint (no envelope). */
export interface LegacyAuthBodyInput {
  roomUrl: string;
  uuid: string;
  accessTokens: readonly { provider: string; token: string }[];
}

/** Serialises the legacy auth body: `{roomUrl, uuid, accessToken: first token or null, action: "auth"}`. */
export function buildLegacyAuthBody(input: LegacyAuthBodyInput): Buffer {
  return Buffer.from(
    JSON.stringify({ roomUrl: input.roomUrl, uuid: input.uuid, accessToken: input.accessTokens[0]?.token ?? null, action: "auth" }),
    "utf8",
  );
}

/**
 * The world as receivers see it: its slug and its public address, `https://<customDomain>/` when
 * it has a custom domain, else `{PLAY_URL}/@/<organization>/<world>`. The one rule for a world's
 * address: the admin API's `playUrl` is this `url` too.
 */
export function worldReference(playUrl: string, organizationSlug: string, worldSlug: string, customDomain: string | null): WorldReference {
  const url = customDomain ? `https://${customDomain}/` : `${playUrl.replace(/\/+$/, "")}/@/${organizationSlug}/${worldSlug}`;
  return { slug: worldSlug, url };
}

/**
 * The envelopes of one event for several endpoints, built once: everything after `apiVersion` is
 * serialised here, and each delivery adds its own `deliveryId` and the endpoint's `apiVersion` in
 * front. The bytes are those {@link buildEnvelope} makes for the same input.
 */
export function envelopeTemplate(input: Omit<EnvelopeInput, "deliveryId" | "apiVersion">): (deliveryId: string, apiVersion: string) => Buffer {
  const tail = `,"type":${JSON.stringify(input.type)},"timestamp":${JSON.stringify(input.timestamp)},"world":${JSON.stringify({ slug: input.world.slug, url: input.world.url })},"data":${JSON.stringify(input.data ?? {})}${input.test === true ? ',"test":true' : ""}}`;
  return (deliveryId, apiVersion) => Buffer.from(`{"deliveryId":${JSON.stringify(deliveryId)},"apiVersion":${JSON.stringify(apiVersion)}${tail}`, "utf8");
}
