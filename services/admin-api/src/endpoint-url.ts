import { badRequest, type FieldError, type Logger } from "@vw/service-kit";
import { endpointHeadersErrors, type ValidationResult } from "@vw/contracts";
import { checkEndpointUrl, systemResolver, type EndpointUrlPolicy, type HostResolver } from "@vw/webhook-core";

/** Outcome of applying ENDPOINT_URL_POLICY to one url: the normalised URL or the problem. */
export type EndpointUrlVerdict = { ok: true; url: string } | { ok: false; error: FieldError };

/** Applies ENDPOINT_URL_POLICY to the url of a request body. */
export interface EndpointUrlChecker {
  readonly policy: EndpointUrlPolicy;
  check(url: string, pointer?: string): Promise<EndpointUrlVerdict>;
}

/**
 * The creation-time half of the SSRF defence (the delivery worker checks again at connect time).
 * Accepted URLs come back in their WHATWG serialisation (`https://Example.com` becomes
 * `https://example.com/`), which is what is stored and what deliveries go to.
 *
 * A host name that is not public gets one answer, `<host> is not a public address`, whether it
 * resolves to a private address or not at all (no DNS oracle for sessions); what the resolver said
 * is logged here, for operators only.
 *
 * @param resolveHost DNS lookup of a host name; the system resolver unless a test injects one
 */
export function createEndpointUrlChecker(policy: EndpointUrlPolicy, resolveHost: HostResolver = systemResolver, logger?: Logger): EndpointUrlChecker {
  return {
    policy,
    async check(url, pointer = "/url") {
      const result = await checkEndpointUrl(url, policy, resolveHost);
      if (result.ok) return { ok: true, url: result.url.href };
      if (result.detail !== undefined) logger?.warn({ pointer, detail: result.detail }, "endpoint URL refused by ENDPOINT_URL_POLICY");
      return { ok: false, error: { pointer, detail: `is refused by ENDPOINT_URL_POLICY=${policy}: ${result.reason}` } };
    },
  };
}

/**
 * Validates a request body that may carry an endpoint `url` and `headers`: the schema, the URL
 * policy for a url the schema accepts, and the header rules the schema cannot say (reserved
 * names, a name repeated in another case), so one 400 `invalid-request` lists every problem, each
 * header's at its own pointer (`/headers/Host`). Returns the body with the url normalised.
 */
export async function validEndpointBody<T extends { url?: string }>(
  validate: (data: unknown) => ValidationResult<T>,
  body: unknown,
  urls: EndpointUrlChecker,
): Promise<T> {
  const result = validate(body);
  const errors: FieldError[] = result.ok ? [] : [...result.errors];
  const url = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as { url?: unknown }).url : undefined;
  let accepted: string | undefined;
  if (typeof url === "string" && !errors.some((e) => e.pointer === "/url")) {
    const verdict = await urls.check(url);
    if (verdict.ok) accepted = verdict.url;
    else errors.push(verdict.error);
  }
  const headers = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as { headers?: unknown }).headers : undefined;
  if (typeof headers === "object" && headers !== null && !Array.isArray(headers)) errors.push(...endpointHeadersErrors(headers as Record<string, string>));
  if (!result.ok || errors.length > 0) {
    throw badRequest("invalid-request", "The request body is not valid; see `errors` for each invalid member.", errors);
  }
  return accepted === undefined ? result.value : { ...result.value, url: accepted };
}
