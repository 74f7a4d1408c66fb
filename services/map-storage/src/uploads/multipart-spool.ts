/**
 * The `multipart/form-data` body of `POST {base}/upload`, read with busboy as it arrives: the `file`
 * part is written to a temporary file (never held in memory), `directory` is kept, anything else is
 * ignored (the upload tool also sends the key as an `apiKey` field: it is neither read nor logged).
 */
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { Request, Response } from "express";
import busboy from "busboy";
import { AppError } from "@vw/service-kit";

/** The spooled upload; `dispose()` removes the temporary file whatever happened. */
export interface SpooledUpload {
  zipPath: string;
  /** The `directory` field as sent, when there was one. */
  directory: string | undefined;
  dispose(): Promise<void>;
}

export interface SpoolOptions {
  /** Largest zip accepted, as sent (413 above). */
  maxZipBytes: number;
  /** Where temporary files go. */
  tmpDir: string;
}

const MULTIPART = "multipart/form-data";

const invalid = (pointer: string, detail: string) => new AppError(400, "invalid-request", detail, { errors: [{ pointer, detail }] });

/**
 * Reads the request's multipart body; resolves once the `file` part is entirely on disk. A refusal
 * (wrong type, no `file`, a second file, too large, a malformed body) rejects with its problem and
 * closes the connection after the answer, so the rest of a large body is not read for nothing.
 */
export async function spoolUpload(req: Request, res: Response, options: SpoolOptions): Promise<SpooledUpload> {
  const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== MULTIPART) {
    throw new AppError(415, "unsupported-media-type", `An upload is '${MULTIPART}' with a 'file' part (a zip) and a 'directory' field, not '${type || "no content type"}'.`, {
      headers: { "Accept-Post": MULTIPART },
    });
  }
  const dir = await mkdtemp(join(options.tmpDir, "vw-upload-"));
  const dispose = () => rm(dir, { recursive: true, force: true });
  const zipPath = join(dir, "upload.zip");
  try {
    const directory = await readParts(req, res, zipPath, options.maxZipBytes);
    return { zipPath, directory, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

function readParts(req: Request, res: Response, zipPath: string, maxZipBytes: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { files: 1, fields: 20, parts: 30, fieldSize: 4096, fileSize: maxZipBytes } });
    } catch (err) {
      reject(invalid("", `The multipart body cannot be read: ${(err as Error).message}.`));
      return;
    }
    let directory: string | undefined;
    let fileDone: Promise<void> | undefined;
    let failed = false;
    const fail = (err: AppError) => {
      if (failed) return;
      failed = true;
      req.unpipe(parser);
      res.setHeader("Connection", "close");
      reject(err);
    };
    parser.on("file", (name, stream) => {
      if (name !== "file") {
        stream.resume();
        fail(invalid(`/${name}`, `Unexpected file part '${name}': the zip goes in the part named 'file'.`));
        return;
      }
      stream.on("limit", () => {
        fail(new AppError(413, "payload-too-large", `The zip is larger than ${maxZipBytes} bytes.`, { limit: maxZipBytes }));
      });
      fileDone = pipeline(stream, createWriteStream(zipPath, { flags: "wx" })).catch((err: unknown) => {
        fail(invalid("/file", `The zip could not be received: ${(err as Error).message}.`));
      });
    });
    parser.on("field", (name, value, info) => {
      if (name !== "directory") return;
      if (info.valueTruncated) fail(invalid("/directory", "The directory is longer than 4096 bytes."));
      directory = value;
    });
    parser.on("filesLimit", () => fail(invalid("/file", "Send one file part only: the zip, named 'file'.")));
    parser.on("partsLimit", () => fail(invalid("", "The multipart body has too many parts.")));
    parser.on("fieldsLimit", () => fail(invalid("", "The multipart body has too many fields.")));
    parser.on("error", (err: Error) => fail(invalid("", `The multipart body cannot be read: ${err.message}.`)));
    parser.on("close", () => {
      void (async () => {
        await fileDone;
        if (failed) return;
        if (fileDone === undefined) fail(invalid("/file", "The upload has no 'file' part: send the zip as the multipart part named 'file'."));
        else resolve(directory);
      })();
    });
    req.on("error", (err: Error) => fail(invalid("", `The request failed while it was read: ${err.message}.`)));
    // A client that goes away mid-body never ends the stream: nothing else would settle this.
    req.on("close", () => {
      if (!req.complete) fail(invalid("", "The request ended before its body was complete."));
    });
    req.pipe(parser);
  });
}
