/**
 * Path rules of map authors' tools: the `directory` of an upload or a download, and each zip
 * entry's place in the world. Everything here is checked before storage is touched.
 */
import { AppError } from "@vw/service-kit";
import { encodeFilePath, parseFilePath, type FilePath } from "../files/file-path.js";

/**
 * Names at a world's root that are routes of map authors' tools, not files: `{base}/ping`,
 * `{base}/upload`, `{base}/download` (WorkAdventure's map-storage answers the same) and
 * `{base}/rooms` (this service's room listing).
 */
export const RESERVED_ROOT_NAMES: readonly string[] = ["ping", "upload", "download", "rooms"];

/** True when `path` (a decoded file path inside a world) is one of {@link RESERVED_ROOT_NAMES}. */
export function isReservedPath(path: string): boolean {
  return RESERVED_ROOT_NAMES.includes(path);
}

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** `C:`: an absolute Windows path, which zip readers and writers refuse as an entry name. */
const DRIVE_LETTER = /^[A-Za-z]:/;

function badDirectory(detail: string): AppError {
  return new AppError(400, "invalid-path", detail, { errors: [{ pointer: "/directory", detail }] });
}

/**
 * The `directory` field (upload) or query parameter (download), as a path inside the world with
 * no leading or trailing `/`; `""` is the world's root. Absent, empty, `/`, `.` and `./` all mean
 * the root (the upload tool sends `/` for it). A leading `/` is the world's root, never the
 * server's. Refused (400): `..` or `.` segments, backslashes, empty segments, control characters,
 * segments starting with `.` (an upload skips such paths), a segment starting with a drive letter
 * (`C:`), more than 512 bytes: whatever a zip entry's name may not hold, since a directory's files
 * are named relative to any directory above them in a download's zip.
 */
export function parseDirectory(raw: string | undefined): string {
  const value = (raw ?? "").trim();
  if (value === "" || value === "/" || value === "." || value === "./") return "";
  if (value.includes("\\")) throw badDirectory("The directory must not contain a backslash.");
  if (CONTROL.test(value)) throw badDirectory("The directory must not contain control characters.");
  if (Buffer.byteLength(value, "utf8") > 512) throw badDirectory("The directory must be at most 512 bytes.");
  const trimmed = value.replace(/^\/+/, "").replace(/\/+$/, "");
  const segments = trimmed.split("/");
  for (const segment of segments) {
    if (segment === "") throw badDirectory("The directory must not contain empty segments ('//').");
    if (segment === ".." || segment === ".") throw badDirectory("The directory must not contain '.' or '..' segments: it is a path inside the world.");
    if (segment.startsWith(".")) throw badDirectory(`The directory must not have a segment starting with '.' ('${segment}'): such paths are never published.`);
    if (DRIVE_LETTER.test(segment)) throw badDirectory(`The directory must not have a segment starting with a drive letter ('${segment}'): a zip entry cannot be named so.`);
  }
  return segments.join("/");
}

/** What becomes of one zip entry. */
export type EntryPlan = { kind: "skip"; reason: "directory" | "dot-path" } | { kind: "file"; file: FilePath };

function badEntry(name: string, detail: string): AppError {
  return new AppError(400, "invalid-path", `The zip entry '${name}' ${detail}`, { file: name });
}

/**
 * Where the zip entry `name` goes under `directory` of world `org/world`. An entry that climbs out
 * (a `..` or `.` segment, an absolute path, a drive letter, a backslash) is refused, as is one whose
 * resulting path breaks the rules of every file path or is a reserved root name; directories and
 * paths with a segment starting with `.` are skipped (WorkAdventure skips them too).
 */
export function planEntry(org: string, world: string, directory: string, name: string): EntryPlan {
  if (name.includes("\\")) throw badEntry(name, "contains a backslash; zip entries use '/' and never climb out of the directory.");
  if (name.startsWith("/") || DRIVE_LETTER.test(name)) throw badEntry(name, "is an absolute path; entries must be relative to the directory.");
  const segments = name.split("/");
  if (segments.some((s) => s === ".." || s === ".")) throw badEntry(name, "has a '.' or '..' segment, which would climb out of the directory.");
  if (name.endsWith("/")) return { kind: "skip", reason: "directory" };
  if (segments.some((s) => s.startsWith("."))) return { kind: "skip", reason: "dot-path" };
  const path = directory === "" ? name : `${directory}/${name}`;
  if (isReservedPath(path)) throw badEntry(name, `is named '${path}', which is reserved at a world's root for map authors' tools.`);
  try {
    return { kind: "file", file: parseFilePath(`/${org}/${world}/${encodeFilePath(path)}`) };
  } catch (err) {
    if (err instanceof AppError) throw badEntry(name, `cannot be stored: ${err.detail}`);
    throw err;
  }
}

/** Object key prefix of `directory` in world `org/world` (with its trailing `/`). */
export function directoryPrefix(org: string, world: string, directory: string): string {
  return directory === "" ? `${org}/${world}/` : `${org}/${world}/${directory}/`;
}
