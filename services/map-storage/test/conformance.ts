/**
 * OpenAPI conformance of map-storage's integration tests: every server a test file starts is attached
 * to this file's recorder, and after the file's tests every answer they received is checked against
 * map-storage's document (route, status, media type, body schema; request body of a success). A
 * mismatch fails the test file, naming route, status and schema error.
 */
import { afterAll } from "@jest/globals";
import { buildMapStorageDocument } from "@vw/contracts";
import { OpenApiConformance } from "@vw/testing";

export const conformance = new OpenApiConformance(buildMapStorageDocument(), "map-storage");

afterAll(() => {
  conformance.assertConforms();
});
