/**
 * @vw/contracts — the shapes every service agrees on: JSON Schemas, TypeScript types and ajv
 * validators, nothing else.
 *
 * This is a leaf package: it must not import database, queue or HTTP code (no Prisma, BullMQ,
 * ioredis, express, S3 clients…), only ajv and ajv-formats, so any service, worker or script can
 * depend on it without pulling in infrastructure.
 */
export {
  compileValidator,
  createAjv,
  DATE_TIME_DETAIL,
  escapePointerToken,
  toFieldErrors,
  type Ajv2020,
  type ErrorObject,
  type FieldError,
  type ValidationResult,
} from "./validation.js";
export { JsonDepthScanner, MAX_JSON_DEPTH, checkJsonValue, jsonTextDepth, unsafeTextReason } from "./json-safety.js";
export {
  SUPPORTED_WAM_VERSIONS,
  WAM_2_1_0_SCHEMA,
  WAM_2_1_0_SCHEMA_ID,
  validateWam,
  wamSchemaDocument,
  type UnsupportedWamVersion,
  type WamEntityCollection,
  type WamFile,
  type WamMetadata,
} from "./wam/index.js";
export * from "./admin.schema.js";
export * from "./world-quotas.schema.js";
export * from "./endpoints.schema.js";
export * from "./endpoint-headers.schema.js";
export * from "./events/index.js";
export * from "./deliveries.schema.js";
export * from "./members.schema.js";
export * from "./ingest.schema.js";
export * from "./problems.js";
export * from "./service.schema.js";
export * from "./map-storage.schema.js";
export * from "./openapi/index.js";
export * from "./dashboard.schema.js";
