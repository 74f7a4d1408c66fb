import type { EndpointPatch, EndpointRecord, EndpointStore, QuotaCheck, SealedHeaders } from "@vw/db";
import { AppError, notFound } from "@vw/service-kit";
import {
  canonicalSubscriptions,
  headerNamesOf,
  type CreateEndpointRequest,
  type EndpointHeaders,
  type EndpointDisabledReason,
  type EndpointFormat,
  type EndpointResource,
  type EndpointWithSecretResource,
  type ImportLegacyEndpointRequest,
  type ListResource,
  type UpdateEndpointRequest,
  type WebhookSubscription,
} from "@vw/contracts";
import { generateSecret, sealEndpointHeaders, type SecretBox } from "@vw/webhook-core";
import { isUuid, newestPage, newestCursor, toPage, type PageRequest } from "./http-support.js";
import type { WorldsService, WorldWithOrganization } from "./worlds.service.js";

/** A stored endpoint: the EndpointStore's record, read and written alike. */
export type EndpointRow = EndpointRecord;

/** Platform defaults of the endpoint quotas; a world's own values win. */
export interface EndpointQuotas {
  /** MAX_ENDPOINTS_PER_WORLD */
  maxEndpoints: number;
  /** MAX_AUTH_ENDPOINTS_PER_WORLD */
  maxAuthEndpoints: number;
}

/** What endpoint management is built from besides the database and the worlds. */
export interface EndpointsServiceOptions {
  /** Seals secrets and custom headers at rest (SECRETS_ENCRYPTION_KEY). */
  secretBox: SecretBox;
  /** `apiVersion` given to endpoints created by this process; frozen on each endpoint. */
  currentApiVersion: string;
  /** MAX_ENDPOINTS_PER_WORLD and MAX_AUTH_ENDPOINTS_PER_WORLD. */
  quotas: EndpointQuotas;
}

/** What a write adds to a world's endpoint counts. */
interface QuotaUse {
  endpoints: number;
  authEndpoints: number;
}

/**
 * Webhook endpoints of a world: create (secret shown once, stored sealed), list, read, edit,
 * delete, disable/enable, rotate the secret, switch the body format, import the legacy endpoint.
 * URLs arrive already accepted by ENDPOINT_URL_POLICY and normalised (`endpoint-url.ts`, applied
 * with the body validation so one 400 lists every problem).
 *
 * Every write goes through the EndpointStore of @vw/db (the one owner of `webhook_endpoints`, which
 * the delivery worker disables through too); state changes there are single conditional UPDATEs,
 * so they compose with the worker's own writes without read-modify-write races. Reads go through
 * it too, and answer the same record type as its writes.
 *
 * Quotas (MAX_ENDPOINTS_PER_WORLD, MAX_AUTH_ENDPOINTS_PER_WORLD, or the world's own): a write that
 * adds an endpoint, or an `auth` subscription, is checked by {@link quotaCheck} in the store's
 * transaction that holds the world's row, so two concurrent creations cannot both take the last
 * place.
 */
export class EndpointsService {
  constructor(
    private readonly store: EndpointStore,
    private readonly worlds: WorldsService,
    private readonly options: EndpointsServiceOptions,
  ) {}

  /** Creates a `current` endpoint with a new secret; the answer is the only place it is shown. */
  async create(organizationSlug: string, worldSlug: string, request: CreateEndpointRequest): Promise<EndpointWithSecretResource> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const secret = generateSecret();
    const subscriptions = canonicalSubscriptions(request.subscriptions);
    const row = await this.store.create(
      {
        worldId: world.id,
        url: request.url,
        subscriptions,
        format: "current",
        apiVersion: this.options.currentApiVersion,
        secretSealed: this.options.secretBox.seal(secret),
        rateLimitPerSecond: request.rateLimitPerSecond ?? null,
        ...(request.headers === undefined ? {} : { headers: this.sealed(request.headers) }),
      },
      this.quotaCheck(world, { endpoints: 1, authEndpoints: subscriptions.includes("auth") ? 1 : 0 }),
    );
    return { ...toEndpointResource(row), secret };
  }

  /**
   * Carries the former single-URL setting over: a `legacy` endpoint subscribed to `auth`, with no
   * secret (its deliveries are unsigned until a secret is generated with rotate-secret).
   */
  async importLegacy(organizationSlug: string, worldSlug: string, request: ImportLegacyEndpointRequest): Promise<EndpointResource> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const row = await this.store.create(
      { worldId: world.id, url: request.url, subscriptions: ["auth"], format: "legacy", apiVersion: this.options.currentApiVersion, secretSealed: null },
      this.quotaCheck(world, { endpoints: 1, authEndpoints: 1 }),
    );
    return toEndpointResource(row);
  }

  /** Endpoints of a world, newest first. */
  async list(organizationSlug: string, worldSlug: string, page: PageRequest): Promise<ListResource<EndpointResource>> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const { take, where } = newestPage(page);
    const after = where.OR ? { createdAt: where.OR[0].createdAt.lt, id: where.OR[1].id.lt } : undefined;
    const rows = await this.store.list(world.id, take, after);
    return toPage(rows, page, newestCursor, toEndpointResource);
  }

  /** The ids of every endpoint of the world (for its figures); 404 for an unknown world. */
  async idsOf(organizationSlug: string, worldSlug: string): Promise<string[]> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    return this.store.idsOf(world.id);
  }

  /** One endpoint of the world; 404 for an unknown id or an endpoint of another world. */
  async get(organizationSlug: string, worldSlug: string, id: string): Promise<EndpointResource> {
    return toEndpointResource(await this.find(organizationSlug, worldSlug, id));
  }

  /**
   * Replaces url, subscriptions, the throttle (null removes it) and/or the whole set of custom
   * headers (`{}` removes them); `{}` changes nothing. Nothing else is editable here.
   */
  async update(organizationSlug: string, worldSlug: string, id: string, patch: UpdateEndpointRequest): Promise<EndpointResource> {
    const data: EndpointPatch = {};
    if (patch.url !== undefined) data.url = patch.url;
    if (patch.subscriptions !== undefined) data.subscriptions = canonicalSubscriptions(patch.subscriptions);
    // Workers pick a change up at the endpoint's next attempt (they read the row for each).
    if (patch.rateLimitPerSecond !== undefined) data.rateLimitPerSecond = patch.rateLimitPerSecond;
    if (patch.headers !== undefined) data.headers = this.sealed(patch.headers);
    const where = await this.whereOf(organizationSlug, worldSlug, id);
    if (Object.keys(data).length === 0) return this.get(organizationSlug, worldSlug, id);
    if (patch.subscriptions?.includes("auth")) {
      // Subscribing to `auth` takes a place of the world's auth quota, unless the endpoint has one already.
      const world = await this.worlds.find(organizationSlug, worldSlug);
      return toEndpointResource(await this.updating(organizationSlug, worldSlug, id, () => this.store.update(where, data, this.quotaCheck(world, { endpoints: 0, authEndpoints: 1 }))));
    }
    return toEndpointResource(await this.updating(organizationSlug, worldSlug, id, () => this.store.update(where, data)));
  }

  /** Deletes the endpoint (and, through the foreign keys, what hangs on it); 404 when unknown. */
  async remove(organizationSlug: string, worldSlug: string, id: string): Promise<void> {
    const where = await this.whereOf(organizationSlug, worldSlug, id);
    if (!(await this.store.remove(where))) throw this.notFound(organizationSlug, worldSlug, id);
  }

  /**
   * Disables the endpoint (reason `manual`). Idempotent: an endpoint already disabled, for any
   * reason, is left as it is (its first reason and time are kept).
   *
   * In the same transaction its `pending` deliveries (queued, or waiting for a retry) become
   * `skipped` (`EndpointStore.disable`, the worker's automatic disables' path too): events of the
   * disabled period are never delivered, so nothing waiting may go out later, and re-enabling
   * brings no catch-up. A job of such a delivery still in the queue finds it skipped and sends
   * nothing. An id of another world's endpoint changes nothing.
   */
  async disable(organizationSlug: string, worldSlug: string, id: string): Promise<EndpointResource> {
    const where = await this.whereOf(organizationSlug, worldSlug, id);
    const reason: EndpointDisabledReason = "manual";
    await this.store.disable(where, reason);
    return this.get(organizationSlug, worldSlug, id);
  }

  /**
   * Re-enables the endpoint: clears the reason and the failure count. Idempotent: an enabled
   * endpoint is left as it is. Events of the disabled period are never delivered (no catch-up).
   */
  async enable(organizationSlug: string, worldSlug: string, id: string): Promise<EndpointResource> {
    const where = await this.whereOf(organizationSlug, worldSlug, id);
    await this.store.enable(where);
    return this.get(organizationSlug, worldSlug, id);
  }

  /**
   * Replaces the secret (or gives a legacy endpoint its first one). The old secret is invalid at
   * once: nothing keeps it, and `secretVersion` goes up so a worker caching secrets can tell.
   */
  async rotateSecret(organizationSlug: string, worldSlug: string, id: string): Promise<EndpointWithSecretResource> {
    const where = await this.whereOf(organizationSlug, worldSlug, id);
    const secret = generateSecret();
    const row = await this.updating(organizationSlug, worldSlug, id, () => this.store.update(where, { secretSealed: this.options.secretBox.seal(secret) }));
    return { ...toEndpointResource(row), secret };
  }

  /**
   * Switches the body format; secret, state and history are kept. An endpoint without a secret
   * cannot use the current format (every current delivery is signed): 409 until a secret is
   * generated. Setting the format it already has changes nothing.
   */
  async setFormat(organizationSlug: string, worldSlug: string, id: string, format: EndpointFormat): Promise<EndpointResource> {
    const current = await this.find(organizationSlug, worldSlug, id);
    if (current.format === format) return toEndpointResource(current);
    // A secret is never removed, so a row that had one when read still has one when written.
    if (format === "current" && current.secretSealed === null) {
      throw new AppError(409, "endpoint-secret-required", "This endpoint has no secret, and deliveries in the current format are always signed. Generate one with POST .../rotate-secret, then switch.", {
        errors: [{ pointer: "/format", detail: "needs an endpoint with a secret" }],
      });
    }
    const where = { id: current.id, worldId: current.worldId };
    return toEndpointResource(await this.updating(organizationSlug, worldSlug, id, () => this.store.update(where, { format })));
  }

  /** Custom headers as stored: the set sealed (values are write-only), the names in the order reads show. */
  private sealed(headers: EndpointHeaders): SealedHeaders {
    return { sealed: sealEndpointHeaders(this.options.secretBox, headers), names: headerNamesOf(headers) };
  }

  /** The stored endpoint (sealed secret included); 404 for an unknown id or an endpoint of another world. */
  async find(organizationSlug: string, worldSlug: string, id: string): Promise<EndpointRow> {
    return (await this.findWithWorld(organizationSlug, worldSlug, id)).endpoint;
  }

  /** The stored endpoint and its world (with the organization), for routes that need both. */
  async findWithWorld(organizationSlug: string, worldSlug: string, id: string): Promise<{ world: WorldWithOrganization; endpoint: EndpointRow }> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    if (!isUuid(id)) throw this.notFound(organizationSlug, worldSlug, id);
    const endpoint = await this.store.find({ id, worldId: world.id });
    if (!endpoint) throw this.notFound(organizationSlug, worldSlug, id);
    return { world, endpoint };
  }

  /**
   * The check of a write that adds `use` to the world's endpoints, run by the store under the
   * world's lock: 409 `quota-exceeded` naming the quota reached. An update of an endpoint that is
   * subscribed to `auth` already takes no new place (even over a limit lowered since).
   */
  private quotaCheck(world: WorldWithOrganization, use: QuotaUse): QuotaCheck {
    return (counts) => {
      if (counts === null) throw notFound(`There is no world "${world.organization.slug}/${world.slug}".`);
      if (counts.replacingHasAuth) return;
      const reference = `${world.organization.slug}/${world.slug}`;
      const maxEndpoints = counts.maxEndpoints ?? this.options.quotas.maxEndpoints;
      if (use.endpoints > 0 && counts.endpoints + use.endpoints > maxEndpoints) {
        throw quotaExceeded("maxEndpoints", maxEndpoints, `World "${reference}" already has ${counts.endpoints} webhook endpoints, its limit (maxEndpoints). Delete one, or ask the platform operator to raise the limit.`);
      }
      const maxAuth = counts.maxAuthEndpoints ?? this.options.quotas.maxAuthEndpoints;
      if (use.authEndpoints > 0 && counts.authEndpoints + use.authEndpoints > maxAuth) {
        throw quotaExceeded("maxAuthEndpoints", maxAuth, `World "${reference}" already has ${counts.authEndpoints} endpoints subscribed to auth, its limit (maxAuthEndpoints): each one is called while a member connects. Unsubscribe one, or ask the platform operator to raise the limit.`, "/subscriptions");
      }
    };
  }

  /** `{id, worldId}` of an endpoint of the world; 404 for an unknown world or a malformed id. */
  private async whereOf(organizationSlug: string, worldSlug: string, id: string): Promise<{ id: string; worldId: string }> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    if (!isUuid(id)) throw this.notFound(organizationSlug, worldSlug, id);
    return { id, worldId: world.id };
  }

  /** Runs an update of one row, turning "no such row" (deleted meanwhile, other world) into 404. */
  private async updating(organizationSlug: string, worldSlug: string, id: string, write: () => Promise<EndpointRow | null>): Promise<EndpointRow> {
    const row = await write();
    if (row === null) throw this.notFound(organizationSlug, worldSlug, id);
    return row;
  }

  private notFound(organizationSlug: string, worldSlug: string, id: string): AppError {
    return notFound(`World "${organizationSlug}/${worldSlug}" has no webhook endpoint "${id}".`);
  }
}

/** 409 `quota-exceeded`: `quota` names the world's quota, `limit` its value. */
function quotaExceeded(quota: "maxEndpoints" | "maxAuthEndpoints", limit: number, detail: string, pointer?: string): AppError {
  return new AppError(409, "quota-exceeded", detail, { quota, limit, ...(pointer === undefined ? {} : { errors: [{ pointer, detail: `would exceed the world's ${quota} (${limit})` }] }) });
}

/** An endpoint as the API shows it: never the secret nor a header value, sealed or not. */
export function toEndpointResource(row: EndpointRow): EndpointResource {
  return {
    id: row.id,
    url: row.url,
    subscriptions: row.subscriptions as WebhookSubscription[],
    enabled: row.enabled,
    format: row.format as EndpointFormat,
    apiVersion: row.apiVersion,
    hasSecret: row.secretSealed !== null,
    disabledReason: (row.disabledReason as EndpointDisabledReason | null) ?? null,
    disabledAt: row.disabledAt?.toISOString() ?? null,
    rateLimitPerSecond: row.rateLimitPerSecond,
    headerNames: row.headerNames,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
