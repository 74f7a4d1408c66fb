/**
 * How every check of the platform reports a problem in a document: the validators
 * (`validation.ts`) and the JSON safety rules (`json-safety.ts`) alike, so neither depends on the other for it.
 */

/** One invalid member of a validated document: a JSON pointer (RFC 6901) into it and what is wrong there. */
export interface FieldError {
  pointer: string;
  detail: string;
}
