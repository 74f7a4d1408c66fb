/**
 * A self-signed certificate for an https receiver on loopback, made by the machine's `openssl`
 * (Debian's, always there), so a test can serve `https://receiver.test/` and have the sender
 * check it for real: the certificate is given to the sender as its only trusted CA (`ca` in the
 * agent options), and its subjectAltName names exactly the host names asked for.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run } from "./owned-processes.js";

/** PEM key and certificate; `cert` is also the CA that trusts it. */
export interface TlsCertificate {
  key: string;
  cert: string;
}

/** Makes a P-256 key and a certificate valid for a day for `hostNames` (DNS names; IP addresses too). */
export async function selfSignedCertificate(hostNames: readonly string[]): Promise<TlsCertificate> {
  const [first] = hostNames;
  if (first === undefined) throw new Error("selfSignedCertificate needs at least one host name");
  const dir = mkdtempSync(join(tmpdir(), "vw-tls-"));
  try {
    const san = hostNames.map((name) => (/^[\d.]+$|:/.test(name) ? `IP:${name}` : `DNS:${name}`)).join(",");
    await run("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1",
      "-subj", `/CN=${first}`, "-addext", `subjectAltName=${san}`,
    ]);
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
