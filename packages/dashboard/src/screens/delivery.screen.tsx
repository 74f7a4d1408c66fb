/** One delivery: its body and every attempt as sent and answered, and Replay. */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { AttemptResource } from "@vw/contracts";
import { DeliveryStatusBadge } from "../components/delivery-status.js";
import { Badge, Button, CodeBlock, Loading, ProblemMessage, formatTime, prettyJson } from "../components/ui.js";
import { Link } from "../router.js";
import { useCapability, useSession } from "../session-context.js";

function Headers({ headers }: { headers: Record<string, string> | null }) {
  if (!headers || Object.keys(headers).length === 0) return <p className="muted">none</p>;
  return (
    <dl className="headers mono">
      {Object.entries(headers).map(([k, v]) => (
        <div key={k} className="header-line">
          <dt>{k}:</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

function Attempt({ attempt }: { attempt: AttemptResource }) {
  const ok = attempt.responseStatus !== null && attempt.responseStatus >= 200 && attempt.responseStatus < 300;
  return (
    <li className="attempt" data-testid="attempt">
      <h3>
        Attempt {attempt.attemptNumber} <span className="muted">({attempt.trigger})</span>{" "}
        <Badge tone={ok ? "ok" : "bad"}>{attempt.responseStatus === null ? "no answer" : `HTTP ${attempt.responseStatus}`}</Badge>
      </h3>
      <div className="meta">
        <span>{formatTime(attempt.startedAt)}</span>
        <span>{attempt.durationMs} ms</span>
        <span>verdict: {attempt.verdict}</span>
      </div>
      {attempt.error ? (
        <p className="problem-inline">
          Error{attempt.errorKind ? ` (${attempt.errorKind})` : ""}: {attempt.error}
        </p>
      ) : null}
      <details>
        <summary>Request headers</summary>
        <Headers headers={attempt.requestHeaders} />
      </details>
      <details open={!ok}>
        <summary>Response</summary>
        <h4>Headers</h4>
        <Headers headers={attempt.responseHeaders} />
        <h4>Body{attempt.responseBodyTruncated ? " (first 4 KiB)" : ""}</h4>
        {attempt.responseBody ? <CodeBlock label={`Response body of attempt ${attempt.attemptNumber}`}>{prettyJson(attempt.responseBody)}</CodeBlock> : <p className="muted">empty</p>}
      </details>
    </li>
  );
}

export function DeliveryScreen({ endpointId, deliveryId }: { endpointId: string; deliveryId: string }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const send = useCapability("send");
  const delivery = useQuery({
    queryKey: ["delivery", endpointId, deliveryId],
    queryFn: () => api.delivery(endpointId, deliveryId),
    // While it is pending (queued, retrying, replayed) new attempts arrive: keep it fresh.
    refetchInterval: (q) => (q.state.data?.status === "pending" ? 1_000 : false),
  });
  const replay = useMutation({
    mutationFn: () => api.replay(endpointId, deliveryId),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ["delivery", endpointId, deliveryId] });
      void queryClient.invalidateQueries({ queryKey: ["deliveries", endpointId] });
    },
  });
  const d = delivery.data;

  return (
    <>
      <p className="breadcrumb">
        <Link to={`/endpoints/${endpointId}`}>← Endpoint</Link>
      </p>
      <h1>Delivery</h1>
      {delivery.isPending ? <Loading /> : null}
      <ProblemMessage error={delivery.error} title="Could not load the delivery" />
      {d ? (
        <>
          <section className="card">
            <dl className="facts">
              <dt>Delivery id</dt>
              <dd className="mono break" data-testid="delivery-id">
                {d.deliveryId}
              </dd>
              <dt>Type</dt>
              <dd>
                {d.type}
                {d.test ? " (test)" : ""}
              </dd>
              <dt>Status</dt>
              <dd data-testid="delivery-status">
                <DeliveryStatusBadge status={d.status} />
                {d.nextAttemptAt ? <span className="muted"> next attempt {formatTime(d.nextAttemptAt)}</span> : null}
                {d.nextAttemptReason ? <span className="muted" data-testid="next-attempt-reason">, later than the retry schedule: {d.nextAttemptReason}</span> : null}
              </dd>
              <dt>Created</dt>
              <dd>{formatTime(d.createdAt)}</dd>
            </dl>
            <p className="hint">Replay sends the same body again under the same deliveryId; receivers that de-duplicate will see it once.</p>
            <Button variant="primary" onClick={() => replay.mutate()} busy={replay.isPending} disabledReason={send.reason}>
              Replay
            </Button>
            {replay.isSuccess ? (
              <p role="status" data-testid="replay-queued">
                Replay queued: a new attempt will appear below.
              </p>
            ) : null}
            <ProblemMessage error={replay.error} title="Replay refused" />
          </section>
          <section className="card">
            <h2>Body</h2>
            <CodeBlock label="Request body" testId="delivery-body">
              {prettyJson(d.body)}
            </CodeBlock>
          </section>
          <section className="card">
            <h2>Attempts ({d.attempts.length})</h2>
            {d.attempts.length === 0 ? <p className="muted">No attempt yet: the delivery is queued.</p> : null}
            <ol className="attempts">
              {d.attempts.map((a) => (
                <Attempt key={a.attemptId} attempt={a} />
              ))}
            </ol>
          </section>
        </>
      ) : null}
    </>
  );
}
