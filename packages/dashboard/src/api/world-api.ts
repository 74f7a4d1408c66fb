/**
 * The admin routes a session calls for its own world: the same `/admin/v1/worlds/{org}/{world}`
 * API the operator uses, authenticated by the session cookie instead of the bearer token.
 * Types come from `@vw/contracts`.
 */
import type {
  ApiKeyResource,
  CreatedApiKeyResource,
  CreateEndpointRequest,
  DeliveryResource,
  DeliverySummaryResource,
  EndpointFormat,
  EndpointResource,
  EndpointStatsResource,
  EndpointWithSecretResource,
  ListResource,
  RecoverPreviewResource,
  RecoveryResource,
  RoomListPage,
  TestDeliveryResource,
  UpdateEndpointRequest,
  UpdateWorldRequest,
  WorldResource,
  WorldStatsResource,
} from "@vw/contracts";
import { apiRequest } from "./client.js";

/** Filters of the delivery list, as query parameters. */
export interface DeliveryFilters {
  status?: string;
  type?: string;
  since?: string;
  until?: string;
  /** The producer's event id (the `id` posted to event-ingest). */
  eventId?: string;
  cursor?: string;
}

/** Answer of a recover dry run. */
export type RecoverPreview = RecoverPreviewResource;

/** A recover job (`POST .../recover` and `GET .../recoveries/{id}`). */
export type Recovery = RecoveryResource;

const enc = encodeURIComponent;

function query(params: object): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (typeof v === "string" && v !== "") q.set(k, v);
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

/** Every call of the dashboard for one world. */
export function worldApi(organization: string, world: string) {
  const base = `/admin/v1/worlds/${enc(organization)}/${enc(world)}`;
  const ep = (id: string) => `${base}/endpoints/${enc(id)}`;
  return {
    world: () => apiRequest<WorldResource>("GET", base),
    worldStats: () => apiRequest<WorldStatsResource>("GET", `${base}/stats`),
    updateWorld: (patch: UpdateWorldRequest) => apiRequest<WorldResource>("PATCH", base, patch),

    rooms: (cursor?: string) => apiRequest<RoomListPage>("GET", `${base}/rooms${query({ limit: "50", cursor })}`),

    apiKeys: (cursor?: string) => apiRequest<ListResource<ApiKeyResource>>("GET", `${base}/api-keys${query({ limit: "100", cursor })}`),
    createApiKey: (name: string | null) => apiRequest<CreatedApiKeyResource>("POST", `${base}/api-keys`, { name }),
    revokeApiKey: (id: string) => apiRequest<void>("DELETE", `${base}/api-keys/${enc(id)}`),

    endpoints: () => apiRequest<ListResource<EndpointResource>>("GET", `${base}/endpoints?limit=100`),
    endpoint: (id: string) => apiRequest<EndpointResource>("GET", ep(id)),
    createEndpoint: (body: CreateEndpointRequest) => apiRequest<EndpointWithSecretResource>("POST", `${base}/endpoints`, body),
    updateEndpoint: (id: string, patch: UpdateEndpointRequest) => apiRequest<EndpointResource>("PATCH", ep(id), patch),
    deleteEndpoint: (id: string) => apiRequest<void>("DELETE", ep(id)),
    disableEndpoint: (id: string) => apiRequest<EndpointResource>("POST", `${ep(id)}/disable`),
    enableEndpoint: (id: string) => apiRequest<EndpointResource>("POST", `${ep(id)}/enable`),
    rotateSecret: (id: string) => apiRequest<EndpointWithSecretResource>("POST", `${ep(id)}/rotate-secret`),
    setFormat: (id: string, format: EndpointFormat) => apiRequest<EndpointResource>("PUT", `${ep(id)}/format`, { format }),
    test: (id: string, subscription: string | null) =>
      apiRequest<TestDeliveryResource>("POST", `${ep(id)}/test`, subscription === null ? {} : { subscription }),

    stats: (id: string) => apiRequest<EndpointStatsResource>("GET", `${ep(id)}/stats`),
    deliveries: (id: string, filters: DeliveryFilters) =>
      apiRequest<ListResource<DeliverySummaryResource>>("GET", `${ep(id)}/deliveries${query({ limit: "20", ...filters })}`),
    delivery: (id: string, deliveryId: string) => apiRequest<DeliveryResource>("GET", `${ep(id)}/deliveries/${enc(deliveryId)}`),
    replay: (id: string, deliveryId: string) => apiRequest<DeliverySummaryResource>("POST", `${ep(id)}/deliveries/${enc(deliveryId)}/replay`),

    recoverPreview: (id: string, since: string, until?: string) =>
      apiRequest<RecoverPreview>("POST", `${ep(id)}/recover`, { since, ...(until ? { until } : {}), dryRun: true }),
    recover: (id: string, since: string, until?: string) => apiRequest<Recovery>("POST", `${ep(id)}/recover`, { since, ...(until ? { until } : {}) }),
    recovery: (id: string, recoveryId: string) => apiRequest<Recovery>("GET", `${ep(id)}/recoveries/${enc(recoveryId)}`),
  };
}

/** The bound API of the signed-in world. */
export type WorldApi = ReturnType<typeof worldApi>;
