/**
 * @vw/webhook-core — the webhook rules shared by admin-api, event-ingest and delivery-worker:
 * Standard Webhooks signing, endpoint secrets and custom headers encrypted at rest, the endpoint
 * URL policy (SSRF defence at creation and at connect time), egress through a forward proxy, one
 * HTTP delivery attempt, the verdict on its outcome, and the retry schedule.
 *
 * Pure logic plus small I/O helpers (DNS lookups, one node:http POST). It must not import database,
 * queue or web-framework code (no Prisma, BullMQ, ioredis, express), so every process can use it
 * without pulling in infrastructure. Nothing here reads `process.env`: callers pass config values.
 */
export {
  DEFAULT_SECRET_BYTES,
  MAX_SECRET_BYTES,
  MIN_SECRET_BYTES,
  SECRET_PREFIX,
  WebhookSecretError,
  generateSecret,
  parseSecret,
  sign,
  signatureHeaders,
  type SignInput,
  type SignatureHeadersInput,
} from "./signing.js";
export {
  SecretBoxError,
  createSecretBox,
  generateSecretBoxKey,
  secretBoxKeyProblem,
  type SecretBox,
  type SecretBoxErrorCode,
} from "./secret-box.js";
export { SECRET_CACHE_MAX, SecretCache } from "./secret-cache.js";
export {
  SPECIAL_RANGES,
  classifyAddress,
  describeAddress,
  isPublicAddress,
  type AddressVerdict,
  type SpecialRangeName,
} from "./ip-ranges.js";
export {
  DEFAULT_ENDPOINT_URL_POLICY,
  checkEndpointUrl,
  parseEndpointUrlPolicy,
  systemResolver,
  notPublicReason,
  type EndpointUrlPolicy,
  type HostResolver,
  type ResolvedAddress,
  type UrlCheckResult,
} from "./url-policy.js";
export {
  ADDRESS_REFUSED_CODE,
  AddressRefusedError,
  HOST_UNRESOLVED_CODE,
  UnresolvedHostError,
  createDeliveryAgents,
  describePolicyRefusal,
  describeUnresolvedHost,
  destroyDeliveryAgents,
  isPolicyRefusal,
  type DeliveryAgentOptions,
  type DeliveryAgents,
  type ProxyRoute,
} from "./delivery-agents.js";
export {
  DELIVERY_PROXY_ERROR_CODE,
  DeliveryProxyError,
  DeliveryProxyUrlError,
  describeProxyFailure,
  parseDeliveryProxyUrl,
  readDeliveryProxyUrl,
  type DeliveryProxy,
} from "./delivery-proxy.js";
export { REDACTED_HEADER_VALUE, openEndpointHeaders, redactedHeaders, sealEndpointHeaders, sendableHeaders } from "./endpoint-headers.js";
export { DEFAULT_MAX_RESPONSE_BYTES, postDelivery, type PostDeliveryInput } from "./delivery-http.js";
export { classify, type AttemptErrorKind, type AttemptOutcome, type AttemptVerdict } from "./outcome.js";
export {
  DEFAULT_RETRY_DELAYS,
  DEFAULT_RETRY_DELAYS_TEXT,
  RETRY_JITTER_FRACTION,
  RetryScheduleError,
  nextDelay,
  parseRetryDelays,
} from "./retry-schedule.js";
export { buildEnvelope, buildLegacyAuthBody, envelopeTemplate, worldReference, type EnvelopeInput, type LegacyAuthBodyInput, type WorldReference } from "./envelope.js";
export {
  DEFAULT_USER_AGENT,
  sendAttempt,
  type AttemptRecord,
  type AttemptTrigger,
  type SendAttemptInput,
} from "./attempt.js";
export {
  decideFate,
  disabledForFailures,
  humanDuration,
  retryAfterMs,
  waitReasonText,
  windowSignal,
  type AttemptFacts,
  type DeliveryKind,
  type DeliveryPosition,
  type Fate,
  type FatePolicy,
  type WindowSignal,
} from "./fate.js";
