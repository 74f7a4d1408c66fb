import { AppError } from "@vw/service-kit";

/** Slugs of organizations and worlds (the admin API enforces the same rule at creation). */
export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** S3's own limit on object keys, in UTF-8 bytes. */
export const MAX_OBJECT_KEY_BYTES = 1024;
/** Limit on the file path inside a world, in UTF-8 bytes. */
export const MAX_FILE_PATH_BYTES = 1024;

/** A file address after every safety rule has held. */
export interface FilePath {
  organization: string;
  world: string;
  /** Decoded path inside the world, segments joined by "/": `rooms/hall.wam`. */
  path: string;
  /** Object key in the bucket: `<organization>/<world>/<path>`. */
  objectKey: string;
  /** Lower-case extension without the dot ("wam", "png"), or "" when the name has none. */
  extension: string;
}

const invalid = (detail: string) => new AppError(400, "invalid-path", detail, { errors: [{ pointer: "", detail }] });

// Control characters (C0, DEL, C1) never belong in a file name.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Parses the raw request target (`req.originalUrl`, still percent-encoded) into a {@link FilePath},
 * or throws a 400 naming the broken rule. Checks run on the raw text AND on each decoded segment,
 * so an encoded separator or dot segment (`%2f`, `%2e%2e`, `%5c`) cannot slip through a decoder.
 * Nothing here touches storage.
 */
export function parseFilePath(rawTarget: string): FilePath {
  const q = rawTarget.indexOf("?");
  const raw = q === -1 ? rawTarget : rawTarget.slice(0, q);
  if (!raw.startsWith("/")) throw invalid("The path must start with '/'.");
  if (raw.includes("\\")) throw invalid("The path must not contain a backslash.");
  if (/%(?![0-9A-Fa-f]{2})/.test(raw)) throw invalid("The path contains a malformed percent-encoding.");

  const rawSegments = raw.slice(1).split("/");
  const segments: string[] = [];
  for (const seg of rawSegments) {
    if (seg === "") throw invalid("The path must not contain empty segments ('//' or a trailing '/').");
    let decoded: string;
    try {
      decoded = decodeURIComponent(seg);
    } catch {
      throw invalid("The path contains a percent-encoding that is not valid UTF-8.");
    }
    if (decoded === "." || decoded === "..") throw invalid("The path must not contain '.' or '..' segments, encoded or not.");
    if (decoded.includes("/")) throw invalid("The path must not contain an encoded '/' (%2F).");
    if (decoded.includes("\\")) throw invalid("The path must not contain an encoded backslash (%5C).");
    if (CONTROL.test(decoded)) throw invalid("The path must not contain control characters.");
    segments.push(decoded);
  }

  const [organization, world, ...rest] = segments;
  if (organization === undefined || world === undefined || rest.length === 0) {
    throw invalid("Expected /<organization>/<world>/<file path>.");
  }
  if (!SLUG_PATTERN.test(organization)) throw invalid(`'${organization}' is not a valid organization slug.`);
  if (!SLUG_PATTERN.test(world)) throw invalid(`'${world}' is not a valid world slug.`);

  const path = rest.join("/");
  if (Buffer.byteLength(path, "utf8") > MAX_FILE_PATH_BYTES) {
    throw invalid(`The file path exceeds ${MAX_FILE_PATH_BYTES} bytes.`);
  }
  const objectKey = `${organization}/${world}/${path}`;
  if (Buffer.byteLength(objectKey, "utf8") > MAX_OBJECT_KEY_BYTES) {
    throw invalid(`The full object key '<organization>/<world>/<path>' exceeds ${MAX_OBJECT_KEY_BYTES} bytes.`);
  }
  const name = rest[rest.length - 1] ?? "";
  const dot = name.lastIndexOf(".");
  const extension = dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
  return { organization, world, path, objectKey, extension };
}

/** Encodes a decoded file path back into URL form, segment by segment. */
export function encodeFilePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}
