/**
 * The benchmarks' own S3 client, configured from the S3_* variables that scripts/bench.mjs sets,
 * with the connection settings map-storage gives its client (keep-alive, 128 sockets, no checksums
 * beyond what the protocol requires). A direct read through it is the baseline a read through
 * map-storage is compared with, so neither side gets a better-tuned client than the other.
 */
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { S3Client } from "@aws-sdk/client-s3";
import { NodeHttpHandler } from "@smithy/node-http-handler";

/** Where the benchmark's objects are: S3_ENDPOINT (AWS when unset), S3_REGION, S3_BUCKET. */
export interface BenchS3 {
  client: S3Client;
  bucket: string;
  /** S3_ENDPOINT, or undefined for AWS. */
  endpoint: string | undefined;
}

/** An S3 client from `env` (the S3_* variables map-storage reads); throws when S3_BUCKET is unset. */
export function benchS3(env: NodeJS.ProcessEnv): BenchS3 {
  const bucket = env.S3_BUCKET;
  if (!bucket) throw new Error("S3_BUCKET is not set: run it as `pnpm bench <name>` (scripts/bench.mjs starts an s3rver)");
  const endpoint = env.S3_ENDPOINT || undefined;
  const agentOptions = { keepAlive: true, maxSockets: 128 };
  const client = new S3Client({
    region: env.S3_REGION || "us-east-1",
    ...(endpoint ? { endpoint } : {}),
    forcePathStyle: /^(1|true|yes|on)$/i.test(env.S3_FORCE_PATH_STYLE ?? ""),
    ...(env.S3_ACCESS_KEY_ID && env.S3_SECRET_ACCESS_KEY
      ? { credentials: { accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY } }
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
  return { client, bucket, endpoint };
}
