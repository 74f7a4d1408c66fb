/**
 * Reading an uploaded zip from its temporary file with yauzl: the central directory is read from
 * the end of the file (the only authoritative list of entries; a streaming reader that trusts local
 * headers can be fooled by entries hidden between them), entries one at a time, and every size is
 * counted as the bytes come out of the decompressor, never taken from the zip's own headers.
 */
import { Transform, type Readable, type TransformCallback } from "node:stream";
import { crc32 } from "node:zlib";
import yauzl from "yauzl";
import { AppError } from "@vw/service-kit";

/** An open zip; `close()` it when done. */
export type ZipArchive = yauzl.ZipFile;
export type ZipEntry = yauzl.Entry;

/** A zip the service cannot read: 400 `invalid-zip`, naming the entry when there is one. */
export function invalidZip(detail: string, entry?: string): AppError {
  return new AppError(400, "invalid-zip", detail, entry === undefined ? {} : { file: entry });
}

/**
 * Opens the zip at `path`. Names are decoded here by {@link entryName}, not by yauzl, so that a
 * name it would refuse (`..`, absolute, backslash) reaches the upload's own rules and is refused
 * with the entry named; sizes are not validated against the headers because they are counted.
 */
export async function openZip(path: string): Promise<ZipArchive> {
  try {
    return await yauzl.openPromise(path, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: false });
  } catch (err) {
    throw invalidZip(`The file is not a zip archive that can be read: ${(err as Error).message}.`);
  }
}

/** Every entry of the central directory, in order; a malformed directory is a 400. */
export async function* zipEntries(zip: ZipArchive): AsyncGenerator<ZipEntry> {
  try {
    for await (const entry of zip.eachEntry()) yield entry;
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw invalidZip(`The zip's central directory cannot be read: ${(err as Error).message}.`);
  }
}

/** The entry's name as stored: UTF-8 when flagged (or in the Info-ZIP Unicode field), CP437 otherwise; backslashes kept. */
export function entryName(entry: ZipEntry): string {
  return yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, entry.fileNameRaw, entry.extraFields, true);
}

/** Limits on what one entry may produce, checked on the bytes that actually come out. */
export interface EntryBudget {
  /** Most bytes this entry may produce. */
  maxBytes: number;
  /** Thrown (as an error of the stream) when the entry produces more than `maxBytes`. */
  tooLarge: (bytes: number) => Error;
}

/**
 * Counts bytes and computes the CRC-32 as they pass; fails the stream with `budget.tooLarge` as
 * soon as the count passes `budget.maxBytes`, so a zip bomb stops after at most one chunk more.
 */
class CountingStream extends Transform {
  bytes = 0;
  crc = 0;

  constructor(private readonly budget: EntryBudget) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.budget.maxBytes) {
      callback(this.budget.tooLarge(this.bytes));
      return;
    }
    this.crc = crc32(chunk, this.crc);
    callback(null, chunk);
  }
}

/**
 * The entry's decompressed bytes as a stream that counts them (see {@link CountingStream}).
 * Encrypted entries and unknown compression methods are refused before any byte is read.
 */
export async function openEntry(zip: ZipArchive, entry: ZipEntry, name: string, budget: EntryBudget): Promise<{ stream: Readable; counter: CountingStream }> {
  if (entry.isEncrypted()) throw invalidZip(`The zip entry '${name}' is encrypted; upload an unencrypted zip.`, name);
  if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) {
    throw invalidZip(`The zip entry '${name}' uses compression method ${entry.compressionMethod}; only stored (0) and deflate (8) are supported.`, name);
  }
  let raw: Readable;
  try {
    raw = await zip.openReadStreamPromise(entry);
  } catch (err) {
    throw invalidZip(`The zip entry '${name}' cannot be read: ${(err as Error).message}.`, name);
  }
  const counter = new CountingStream(budget);
  raw.on("error", (err: Error) => counter.destroy(err instanceof AppError ? err : invalidZip(`The zip entry '${name}' is corrupt: ${err.message}.`, name)));
  raw.pipe(counter);
  // A refused or abandoned entry stops its decompression at once.
  counter.once("close", () => raw.destroy());
  return { stream: counter, counter };
}

/**
 * Reads the whole entry, keeping the bytes only when `keep` (a `.wam` to validate, a small file to
 * write from memory) and showing each chunk to `observe` (a JSON file's depth, scanned as it
 * passes); checks the CRC-32 the zip declares against what came out. Resolves with the count.
 */
export async function drainEntry(
  zip: ZipArchive,
  entry: ZipEntry,
  name: string,
  budget: EntryBudget,
  options: { keep?: boolean; observe?: (chunk: Buffer) => void } = {},
): Promise<{ bytes: number; body?: Buffer }> {
  const { stream, counter } = await openEntry(zip, entry, name, budget);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    options.observe?.(chunk as Buffer);
    if (options.keep) chunks.push(chunk as Buffer);
  }
  if ((counter.crc >>> 0) !== (entry.crc32 >>> 0)) throw invalidZip(`The zip entry '${name}' is corrupt (its CRC-32 does not match its content).`, name);
  return options.keep ? { bytes: counter.bytes, body: Buffer.concat(chunks) } : { bytes: counter.bytes };
}
