import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { createHash } from "node:crypto";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import type { Readable } from "node:stream";
import type { ObjectHead, ObjectPage, ObjectStore, OpenedObject, StoredObject, WriteCondition } from "./object-store.js";
import { ObjectTooLargeError, WriteConflictError } from "./object-store.js";

export interface S3Settings {
  endpoint: string | undefined;
  region: string;
  bucket: string;
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  forcePathStyle: boolean;
}

/** One S3 client with keep-alive sockets; checksums only where S3 requires them (MinIO/R2/s3rver alike). */
export function createS3Client(s: S3Settings): S3Client {
  const agentOptions = { keepAlive: true, maxSockets: 128 };
  return new S3Client({
    region: s.region,
    ...(s.endpoint ? { endpoint: s.endpoint } : {}),
    forcePathStyle: s.forcePathStyle,
    ...(s.accessKeyId && s.secretAccessKey
      ? { credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey } }
      : {}),
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({
      httpAgent: new HttpAgent(agentOptions),
      httpsAgent: new HttpsAgent(agentOptions),
      connectionTimeout: 5_000,
      requestTimeout: 20_000,
    }),
  });
}

function statusOf(err: unknown): number | undefined {
  return err instanceof S3ServiceException ? err.$metadata.httpStatusCode : (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

/** {@link ObjectStore} on any S3-compatible service. */
export class S3ObjectStore implements ObjectStore {
  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {}

  async get(key: string, maxBytes = Number.POSITIVE_INFINITY): Promise<StoredObject | null> {
    const opened = await this.open(key);
    if (!opened) return null;
    if (opened.size > maxBytes) {
      opened.body.destroy();
      throw new ObjectTooLargeError(key, opened.size);
    }
    const chunks: Buffer[] = [];
    for await (const chunk of opened.body) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    return { body, etag: opened.etag || quotedMd5(body), contentType: opened.contentType };
  }

  async open(key: string): Promise<OpenedObject | null> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      // In Node the SDK's body is an http.IncomingMessage: a Readable, paced by whoever reads it.
      return { body: out.Body as Readable, etag: out.ETag ?? "", contentType: out.ContentType ?? "application/octet-stream", size: out.ContentLength ?? 0 };
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
  }

  async getStream(key: string): Promise<Readable | null> {
    return (await this.open(key))?.body ?? null;
  }

  async head(key: string): Promise<ObjectHead | null> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { etag: out.ETag ?? "", contentType: out.ContentType ?? "application/octet-stream", size: out.ContentLength ?? 0 };
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
  }

  async put(key: string, body: Buffer, contentType: string, condition: WriteCondition = {}): Promise<{ etag: string }> {
    try {
      const out = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: contentType,
          ContentLength: body.length,
          ...(condition.ifMatch ? { IfMatch: condition.ifMatch } : {}),
          ...(condition.ifNoneMatch ? { IfNoneMatch: condition.ifNoneMatch } : {}),
        }),
      );
      return { etag: out.ETag ?? quotedMd5(body) };
    } catch (err) {
      // 412: the condition failed; 409: AWS's ConditionalRequestConflict for concurrent writers.
      const status = statusOf(err);
      if (status === 412 || status === 409) throw new WriteConflictError(key);
      throw err;
    }
  }

  async putStream(key: string, body: Readable, length: number, contentType: string): Promise<{ etag: string }> {
    const out = await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType, ContentLength: length }),
    );
    if (!out.ETag) throw new Error(`PutObject of ${key} answered without an ETag`);
    return { etag: out.ETag };
  }

  async list(prefix: string, startAfter: string | undefined, max: number): Promise<ObjectPage> {
    const out = await this.client.send(
      new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, MaxKeys: Math.min(max, 1000), ...(startAfter ? { StartAfter: startAfter } : {}) }),
    );
    return {
      keys: (out.Contents ?? []).flatMap((o) => (o.Key === undefined ? [] : [{ key: o.Key, size: o.Size ?? 0 }])),
      truncated: out.IsTruncated === true,
    };
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }
}

/** The ETag S3 gives a single-part upload, for backends that omit the header. */
export function quotedMd5(body: Buffer): string {
  return `"${createHash("md5").update(body).digest("hex")}"`;
}
