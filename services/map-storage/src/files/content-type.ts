/**
 * Content type of a stored file, from its extension only: the client's Content-Type header is not
 * trusted for other files, so a file is always served with the same type whoever uploaded it.
 */
const TYPES: Record<string, string> = {
  wam: "application/json",
  json: "application/json",
  tmj: "application/json",
  tsj: "application/json",
  tmx: "application/xml",
  tsx: "application/xml",
  xml: "application/xml",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  avif: "image/avif",
  svg: "image/svg+xml",
  ico: "image/x-icon",
  mp3: "audio/mpeg",
  ogg: "audio/ogg",
  wav: "audio/wav",
  mp4: "video/mp4",
  webm: "video/webm",
  txt: "text/plain; charset=utf-8",
  md: "text/markdown; charset=utf-8",
  css: "text/css; charset=utf-8",
  html: "text/html; charset=utf-8",
  htm: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  mjs: "text/javascript; charset=utf-8",
  pdf: "application/pdf",
  zip: "application/zip",
  woff: "font/woff",
  woff2: "font/woff2",
  ttf: "font/ttf",
};

export function contentTypeFor(extension: string): string {
  return TYPES[extension] ?? "application/octet-stream";
}

/** Files whose content is JSON, so JSON Patch can apply to them. */
export function isJsonExtension(extension: string): boolean {
  return contentTypeFor(extension) === "application/json";
}
