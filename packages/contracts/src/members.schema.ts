/**
 * Member directory contracts: the member record the Inbound API answers
 * (`GET /api/v1/worlds/{worldSlug}/members/{uuid}` on admin-api) and the body of the platform's
 * member intake (`PUT /v1/worlds/{org}/{world}/members/{uuid}` on event-ingest), as JSON Schemas,
 * types and a validator.
 */
import { CONSENT_PURPOSES, CONSENT_SUBJECT_TYPES, type ConsentPurpose, type ConsentSubjectType } from "./events/payloads.schema.js";
import { compileValidator, type ValidationResult } from "./validation.js";

/** Longest accepted name and email of the member intake, in characters. */
export const MEMBER_NAME_MAX_LENGTH = 1000;
export const MEMBER_EMAIL_MAX_LENGTH = 320;

/** `PUT .../members/{uuid}`: the whole profile of a member or visitor. */
export interface MemberProfileRequest {
  name: string;
  email: string;
  type: ConsentSubjectType;
}

/** A consent answer: `granted` null means taken off the record; `decidedAt` is the deciding event's `timestamp`. */
export interface MemberConsentResource {
  granted: boolean | null;
  decidedAt: string;
}

/** The member record of the Inbound API. `consents` holds the purposes decided at least once. */
export interface MemberResource {
  uuid: string;
  name: string | null;
  email: string;
  type: ConsentSubjectType;
  consents: Partial<Record<ConsentPurpose, MemberConsentResource>>;
}

// PostgreSQL text cannot hold U+0000.
const NO_NUL = "^[^\\u0000]*$";

export const MEMBER_PROFILE_REQUEST_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["name", "email", "type"],
  properties: {
    name: { type: "string", minLength: 1, maxLength: MEMBER_NAME_MAX_LENGTH, pattern: NO_NUL, description: "Personal data." },
    email: { type: "string", format: "email", maxLength: MEMBER_EMAIL_MAX_LENGTH, description: "Personal data." },
    type: { enum: [...CONSENT_SUBJECT_TYPES], description: "`member` (invited or added by an administrator) or `visitor`." },
  },
} as const;

const CONSENT_ANSWER_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["granted", "decidedAt"],
  properties: {
    granted: { type: ["boolean", "null"], description: "true: given; false: refused or withdrawn; null: taken off the record (ask again)." },
    decidedAt: { type: "string", format: "date-time", description: "`timestamp` of the `consent.changed` event that recorded the decision." },
  },
} as const;

export const MEMBER_RESOURCE_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["uuid", "name", "email", "type", "consents"],
  properties: {
    uuid: { type: "string", description: "The person's identifier, as in webhook payloads." },
    name: { type: ["string", "null"], description: "Personal data. Null while only consent decisions are known (they carry no name)." },
    email: { type: "string", description: "Personal data." },
    type: { enum: [...CONSENT_SUBJECT_TYPES] },
    consents: {
      type: "object",
      description: "The latest decision per purpose; a purpose never decided is absent. On false or null, stop using the data for that purpose.",
      additionalProperties: false,
      properties: Object.fromEntries(CONSENT_PURPOSES.map((purpose) => [purpose, CONSENT_ANSWER_SCHEMA])),
    },
  },
} as const;

/** Validates the member intake body; errors name each invalid member with a JSON pointer. */
export const validateMemberProfileRequest: (data: unknown) => ValidationResult<MemberProfileRequest> =
  compileValidator<MemberProfileRequest>(MEMBER_PROFILE_REQUEST_SCHEMA);
