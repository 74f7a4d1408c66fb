/** The Test action: sends a sample of a subscription (or a ping) and shows the answer. */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState } from "react";
import type { EndpointResource } from "@vw/contracts";
import { Link } from "../router.js";
import { useCapability, useSession } from "../session-context.js";
import { Badge, Button, CodeBlock, ProblemMessage, prettyJson } from "./ui.js";

export function EndpointTestPanel({ endpoint }: { endpoint: EndpointResource }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const send = useCapability("send");
  const id = useId();
  const [subscription, setSubscription] = useState<string>("ping");
  const test = useMutation({
    mutationFn: () => api.test(endpoint.id, subscription === "ping" ? null : subscription),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ["deliveries", endpoint.id] }),
  });
  const result = test.data;
  const ok = result?.status !== null && result?.status !== undefined && result.status >= 200 && result.status < 300;

  return (
    <section className="card" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Test</h2>
      <p className="hint">Sends one realistic sample marked test: true (or a ping), signed like real deliveries. Works on a disabled endpoint too.</p>
      <div className="form-row">
        <div className="field">
          <label htmlFor={`${id}-sub`}>Sample</label>
          <select id={`${id}-sub`} value={subscription} onChange={(e) => setSubscription(e.target.value)}>
            <option value="ping">ping</option>
            {endpoint.subscriptions.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <Button variant="primary" onClick={() => test.mutate()} busy={test.isPending} disabledReason={send.reason}>
          {test.isPending ? "Sending…" : "Send test"}
        </Button>
      </div>
      <ProblemMessage error={test.error} title="Test failed" />
      {result ? (
        <div className="result" role="status" data-testid="test-result">
          <p>
            <Badge tone={ok ? "ok" : "bad"}>{result.status === null ? "no answer" : `HTTP ${result.status}`}</Badge>{" "}
            <span data-testid="test-latency">{result.durationMs} ms</span> · {result.type} · {result.verdict}{" "}
            <Link to={`/endpoints/${endpoint.id}/deliveries/${result.deliveryId}`}>details</Link>
          </p>
          {result.error ? <p className="problem-inline">Error: {result.error}</p> : null}
          {result.responseBody ? (
            <>
              <h3>Response body</h3>
              <CodeBlock label="Response body">{prettyJson(result.responseBody)}</CodeBlock>
            </>
          ) : (
            <p className="muted">The response had no body.</p>
          )}
        </div>
      ) : null}
    </section>
  );
}
