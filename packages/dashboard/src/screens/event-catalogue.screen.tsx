/**
 * Event catalogue: every delivered type with its description, JSON Schema and a sample, read
 * from admin-api's published OpenAPI document (`/openapi.json`, `webhooks`), so it can never
 * disagree with what is validated and sent.
 */
import { useQuery } from "@tanstack/react-query";
import type { OpenApiDocument } from "@vw/contracts";
import { getJson } from "../api/client.js";
import { CodeBlock, Loading, ProblemMessage } from "../components/ui.js";

interface WebhookOperation {
  summary?: string;
  description?: string;
  tags?: string[];
  requestBody?: { content?: Record<string, { schema?: unknown; examples?: Record<string, { value?: unknown }> }> };
}

/** Replaces `#/components/schemas/X` references by the schemas themselves (cycles left as refs). */
function inline(value: unknown, schemas: Record<string, unknown>, seen: string[] = []): unknown {
  if (Array.isArray(value)) return value.map((v) => inline(v, schemas, seen));
  if (value === null || typeof value !== "object") return value;
  const ref = (value as { $ref?: unknown }).$ref;
  if (typeof ref === "string" && ref.startsWith("#/components/schemas/")) {
    const name = ref.slice("#/components/schemas/".length);
    if (seen.includes(name) || !(name in schemas)) return value;
    return inline(schemas[name], schemas, [...seen, name]);
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inline(v, schemas, seen)]));
}

export function EventCatalogueScreen() {
  const doc = useQuery({ queryKey: ["openapi"], queryFn: () => getJson<OpenApiDocument>("/openapi.json"), staleTime: Infinity });
  const entries = doc.data ? Object.entries(doc.data.webhooks) : [];

  return (
    <>
      <h1>Event catalogue</h1>
      <p className="lead">
        Every event your endpoints can receive. Each delivery is signed (Standard Webhooks), delivered at least once and unordered:
        de-duplicate on <span className="mono">deliveryId</span> and ignore types you do not know. The whole catalogue is also published as an
        OpenAPI 3.1 document at{" "}
        <a href="/openapi.json" className="mono">
          /openapi.json
        </a>
        .
      </p>
      {doc.isPending ? <Loading /> : null}
      <ProblemMessage error={doc.error} title="Could not load the catalogue" />
      {doc.data ? (
        <nav aria-label="Event types" className="card toc">
          <ul>
            {entries.map(([name]) => (
              <li key={name}>
                <a href={`#type-${name}`} className="mono">
                  {name}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      ) : null}
      {entries.map(([name, item]) => {
        const op = item.post as WebhookOperation;
        const content = op.requestBody?.content?.["application/json"];
        const schema = content?.schema ? inline(content.schema, doc.data!.components.schemas) : null;
        const sample = content?.examples ? Object.values(content.examples)[0]?.value : undefined;
        return (
          <section key={name} id={`type-${name}`} className="card" aria-labelledby={`title-${name}`} data-testid="event-type">
            <h2 id={`title-${name}`} className="mono">
              {name}
            </h2>
            {op.summary ? <p>{op.summary}</p> : null}
            {op.description ? <p className="muted">{op.description}</p> : null}
            {op.tags?.length ? <p className="meta">Subscription: {op.tags.join(", ")}</p> : null}
            {sample !== undefined ? (
              <details open>
                <summary>Sample</summary>
                <CodeBlock label={`Sample ${name} delivery`}>{JSON.stringify(sample, null, 2)}</CodeBlock>
              </details>
            ) : null}
            {schema ? (
              <details>
                <summary>JSON Schema</summary>
                <CodeBlock label={`JSON Schema of ${name}`}>{JSON.stringify(schema, null, 2)}</CodeBlock>
              </details>
            ) : null}
          </section>
        );
      })}
    </>
  );
}
