/**
 * Recover: resend every failed delivery of the endpoint since a time. First a count preview
 * (dry run), then the queued job, polled until it is done, with its progress.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useId, useState } from "react";
import type { EndpointResource } from "@vw/contracts";
import type { Recovery } from "../api/world-api.js";
import { useCapability, useSession } from "../session-context.js";
import { Button, ProblemMessage } from "./ui.js";

/** `Date` as a `datetime-local` value in local time. */
function toLocalInput(d: Date): string {
  const local = new Date(d.getTime() - d.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

export function RecoverPanel({ endpoint }: { endpoint: EndpointResource }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const send = useCapability("send");
  const id = useId();
  const [since, setSince] = useState(() => toLocalInput(new Date(Date.now() - 24 * 3600_000)));
  const [preview, setPreview] = useState<{ since: string; count: number } | null>(null);
  const [recoveryId, setRecoveryId] = useState<string | null>(null);
  const sinceIso = since === "" ? "" : new Date(since).toISOString();

  const dryRun = useMutation({
    mutationFn: () => api.recoverPreview(endpoint.id, sinceIso),
    onSuccess: (r) => setPreview({ since: sinceIso, count: r.count }),
  });
  const run = useMutation({
    mutationFn: () => api.recover(endpoint.id, preview!.since),
    onSuccess: (r) => {
      setRecoveryId(r.id);
      queryClient.setQueryData(["recovery", endpoint.id, r.id], r);
    },
  });
  const progress = useQuery({
    queryKey: ["recovery", endpoint.id, recoveryId],
    queryFn: () => api.recovery(endpoint.id, recoveryId!),
    enabled: recoveryId !== null,
    refetchInterval: (q) => {
      const s = (q.state.data as Recovery | undefined)?.status;
      return s === "done" || s === "failed" ? false : 1_000;
    },
  });
  const job = progress.data;
  useEffect(() => {
    if (job?.status === "done") void queryClient.invalidateQueries({ queryKey: ["deliveries", endpoint.id] });
  }, [job?.status, endpoint.id, queryClient]);

  return (
    <section className="card" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Recover failed deliveries</h2>
      <p className="hint">
        After an outage of your receiver: resend every delivery of this endpoint that failed since a time. Each keeps its deliveryId and
        exact body, so your receiver's de-duplication still works.
      </p>
      {endpoint.enabled ? null : <p className="warning">The endpoint is disabled: re-enable it before recovering.</p>}
      <div className="form-row">
        <div className="field">
          <label htmlFor={`${id}-since`}>Failed since</label>
          <input
            id={`${id}-since`}
            type="datetime-local"
            value={since}
            onChange={(e) => {
              setSince(e.target.value);
              setPreview(null);
            }}
          />
        </div>
        <Button onClick={() => dryRun.mutate()} busy={dryRun.isPending} disabled={since === ""} disabledReason={send.reason}>
          Preview
        </Button>
      </div>
      <ProblemMessage error={dryRun.error} title="Preview failed" />
      {preview ? (
        <div className="result" role="status">
          <p data-testid="recover-count">
            {preview.count === 0
              ? "No failed delivery in that window: nothing to recover."
              : `${preview.count} failed ${preview.count === 1 ? "delivery" : "deliveries"} will be sent again.`}
          </p>
          {preview.count > 0 && recoveryId === null ? (
            <Button variant="primary" onClick={() => run.mutate()} busy={run.isPending} disabledReason={send.reason}>
              Recover {preview.count} {preview.count === 1 ? "delivery" : "deliveries"}
            </Button>
          ) : null}
        </div>
      ) : null}
      <ProblemMessage error={run.error} title="Recover failed" />
      <ProblemMessage error={progress.error} title="Could not read the recovery's progress" />
      {job ? (
        <div className="result" data-testid="recover-progress">
          <label htmlFor={`${id}-bar`}>
            Recovery {job.status}: {job.requeued} of {job.total} queued again
          </label>
          <progress id={`${id}-bar`} max={Math.max(job.total, 1)} value={job.requeued} />
          {job.status === "done" ? <p role="status">Done: every delivery is back in the queue and will be sent shortly.</p> : null}
          {job.status === "failed" ? (
            <p role="alert">The recovery stopped before the end{job.error ? ` (${job.error})` : ""}; run it again to resend the rest.</p>
          ) : null}
        </div>
      ) : null}
    </section>
  );
}
