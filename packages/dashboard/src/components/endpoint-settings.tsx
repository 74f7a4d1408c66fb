/**
 * An endpoint's settings: edit URL and subscriptions, rate limit, custom headers, disable /
 * re-enable, rotate the secret, body format, delete. Each action is disabled with its reason
 * without manage-endpoints.
 */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import type { EndpointResource, EndpointWithSecretResource } from "@vw/contracts";
import { navigate } from "../router.js";
import { useCapability, useSession } from "../session-context.js";
import { CustomHeadersCard } from "./custom-headers-card.js";
import { EndpointForm } from "./endpoint-form.js";
import { RateLimitForm } from "./rate-limit-form.js";
import { Button, ConfirmAction, ProblemMessage, SecretOnce } from "./ui.js";
import { VerificationHint } from "./verification-hint.js";

export function EndpointSettings({ endpoint }: { endpoint: EndpointResource }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const manage = useCapability("manage-endpoints");
  const [editing, setEditing] = useState(false);
  const [rotated, setRotated] = useState<EndpointWithSecretResource | null>(null);

  const refresh = (updated?: EndpointResource) => {
    if (updated) queryClient.setQueryData(["endpoint", endpoint.id], updated);
    void queryClient.invalidateQueries({ queryKey: ["endpoints"] });
  };
  const update = useMutation({
    mutationFn: (v: { url: string; subscriptions: EndpointResource["subscriptions"] }) => api.updateEndpoint(endpoint.id, v),
    onSuccess: (e) => {
      refresh(e);
      setEditing(false);
    },
  });
  const state = useMutation({
    mutationFn: (enable: boolean) => (enable ? api.enableEndpoint(endpoint.id) : api.disableEndpoint(endpoint.id)),
    onSuccess: (e) => refresh(e),
  });
  const rotate = useMutation({
    mutationFn: () => api.rotateSecret(endpoint.id),
    onSuccess: (e) => {
      setRotated(e);
      refresh(e);
    },
  });
  const format = useMutation({
    mutationFn: (f: EndpointResource["format"]) => api.setFormat(endpoint.id, f),
    onSuccess: (e) => refresh(e),
  });
  const remove = useMutation({
    mutationFn: () => api.deleteEndpoint(endpoint.id),
    onSuccess: () => {
      queryClient.removeQueries({ queryKey: ["endpoint", endpoint.id] });
      void queryClient.invalidateQueries({ queryKey: ["endpoints"] });
      navigate("/endpoints");
    },
  });
  const otherFormat = endpoint.format === "current" ? "legacy" : "current";

  return (
    <>
      <section className="card" aria-labelledby="settings-title">
        <h2 id="settings-title">URL and subscriptions</h2>
        {editing ? (
          <EndpointForm
            initial={{ url: endpoint.url, subscriptions: endpoint.subscriptions }}
            submitLabel="Save changes"
            onSubmit={(v) => update.mutate(v)}
            error={update.error}
            busy={update.isPending}
            disabledReason={manage.reason}
            onCancel={() => {
              setEditing(false);
              update.reset();
            }}
          />
        ) : (
          <>
            <dl className="facts">
              <dt>URL</dt>
              <dd className="mono break">{endpoint.url}</dd>
              <dt>Subscriptions</dt>
              <dd>{endpoint.subscriptions.join(", ")}</dd>
            </dl>
            <Button onClick={() => setEditing(true)} disabledReason={manage.reason}>
              Edit
            </Button>
          </>
        )}
      </section>

      <RateLimitForm endpoint={endpoint} />

      <CustomHeadersCard endpoint={endpoint} />

      <section className="card" aria-labelledby="state-title">
        <h2 id="state-title">{endpoint.enabled ? "Disable" : "Re-enable"}</h2>
        <p>
          {endpoint.enabled
            ? "While disabled, no event is sent to this endpoint. Events that happen meanwhile are never caught up after re-enabling."
            : "Re-enabling sends the events that happen from now on. Events missed while it was disabled are never caught up (use Recover for failed ones)."}
        </p>
        <ProblemMessage error={state.error} />
        {endpoint.enabled ? (
          <ConfirmAction
            label="Disable endpoint"
            question="Disable it? Events that happen while it is disabled are never delivered, even after re-enabling."
            confirmLabel="Disable"
            variant="secondary"
            busy={state.isPending}
            disabledReason={manage.reason}
            onConfirm={() => state.mutate(false)}
          />
        ) : (
          <Button variant="primary" onClick={() => state.mutate(true)} busy={state.isPending} disabledReason={manage.reason}>
            Re-enable endpoint
          </Button>
        )}
      </section>

      <section className="card" aria-labelledby="secret-title">
        <h2 id="secret-title">Signing secret</h2>
        {endpoint.hasSecret ? null : <p>This endpoint has no secret: its deliveries are not signed (legacy import).</p>}
        {rotated ? (
          <SecretOnce label="New signing secret" value={rotated.secret} onDone={() => setRotated(null)}>
            <p className="warning">The previous secret stopped working at once: deploy this one to your receiver now.</p>
            <VerificationHint />
          </SecretOnce>
        ) : (
          <>
            <p>Rotating makes a new secret, shown once. The old secret stops working at once: deliveries signed with it are no longer sent.</p>
            <ProblemMessage error={rotate.error} />
            <ConfirmAction
              label="Rotate secret"
              question="Rotate now? The current secret stops working immediately; your receiver will reject deliveries until it has the new one."
              confirmLabel="Rotate secret"
              variant="secondary"
              busy={rotate.isPending}
              disabledReason={manage.reason}
              onConfirm={() => rotate.mutate()}
            />
          </>
        )}
      </section>

      <section className="card" aria-labelledby="format-title">
        <h2 id="format-title">Body format</h2>
        <p>
          Now: <strong data-testid="endpoint-format">{endpoint.format}</strong>.{" "}
          {endpoint.format === "current"
            ? "Current: every delivery is an envelope {deliveryId, apiVersion, type, timestamp, world, data}."
            : "Legacy: the flat body of the former single-URL webhook, for receivers written before envelopes. Switch to current once your receiver reads envelopes."}
        </p>
        <ProblemMessage error={format.error} />
        <Button onClick={() => format.mutate(otherFormat)} busy={format.isPending} disabledReason={manage.reason}>
          Switch to {otherFormat}
        </Button>
      </section>

      <section className="card danger-zone" aria-labelledby="delete-title">
        <h2 id="delete-title">Delete</h2>
        <p>Deleting removes the endpoint and its delivery history. Nothing more is sent to it.</p>
        <ProblemMessage error={remove.error} />
        <ConfirmAction
          label="Delete endpoint"
          question="Delete this endpoint and its history? This cannot be undone."
          confirmLabel="Delete for good"
          busy={remove.isPending}
          disabledReason={manage.reason}
          onConfirm={() => remove.mutate()}
        />
      </section>
    </>
  );
}
