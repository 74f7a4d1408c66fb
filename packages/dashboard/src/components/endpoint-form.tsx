/**
 * The URL + subscriptions form of an endpoint (add and edit). Problem `errors[]` land on their
 * field: `/url` (the URL policy: https only, no private addresses) and `/subscriptions`.
 */
import { useId, useState, type FormEvent } from "react";
import type { WebhookSubscription } from "@vw/contracts";
import { Button, FieldErrors, FormProblem, hasFieldError } from "./ui.js";

/**
 * Subscriptions in canonical order with what each delivers. A value import of the contracts'
 * list would pull its validators into the bundle; the record type keeps this one complete.
 */
export const SUBSCRIPTION_INFO: Record<WebhookSubscription, string> = {
  recording: "recording.completed: a meeting recording is ready",
  visitor: "visitor.registered: a visitor account became usable",
  consent: "consent.changed: a member or visitor changed a consent",
  analytics: "analytics.batch: batched activity events (privacy settings apply)",
  auth: "member.connecting: synchronous hook when a member enters (not retried)",
};
export const SUBSCRIPTIONS = Object.keys(SUBSCRIPTION_INFO) as WebhookSubscription[];

export interface EndpointFormValue {
  url: string;
  subscriptions: WebhookSubscription[];
}

export function EndpointForm({
  initial,
  submitLabel,
  onSubmit,
  error,
  busy,
  disabledReason,
  onCancel,
}: {
  initial: EndpointFormValue;
  submitLabel: string;
  onSubmit: (value: EndpointFormValue) => void;
  error: unknown;
  busy: boolean;
  disabledReason: string | null;
  onCancel?: () => void;
}) {
  const id = useId();
  const [url, setUrl] = useState(initial.url);
  const [subs, setSubs] = useState<WebhookSubscription[]>(initial.subscriptions);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (disabledReason) return;
    onSubmit({ url: url.trim(), subscriptions: SUBSCRIPTIONS.filter((s) => subs.includes(s)) });
  };
  const toggle = (s: WebhookSubscription, on: boolean) => setSubs((cur) => (on ? [...cur, s] : cur.filter((x) => x !== s)));
  const off = disabledReason !== null;
  return (
    <form onSubmit={submit} noValidate>
      <div className="field">
        <label htmlFor={`${id}-url`}>Endpoint URL</label>
        <input
          id={`${id}-url`}
          type="url"
          inputMode="url"
          required
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          placeholder="https://example.com/webhooks"
          aria-invalid={hasFieldError(error, "/url") || undefined}
          aria-describedby={`${id}-url-hint ${id}-url-err`}
          disabled={off}
          className="mono"
        />
        <p id={`${id}-url-hint`} className="hint">
          HTTPS on a public address. Deliveries are POSTed here, signed with the endpoint's secret.
        </p>
        <FieldErrors id={`${id}-url-err`} error={error} pointer="/url" label="The URL" />
      </div>
      <fieldset className="field" aria-describedby={`${id}-subs-err`}>
        <legend>Subscriptions</legend>
        {SUBSCRIPTIONS.map((s) => (
          <label key={s} className="check">
            <input type="checkbox" checked={subs.includes(s)} onChange={(e) => toggle(s, e.target.checked)} disabled={off} name="subscriptions" value={s} />
            <span>
              <strong>{s}</strong> <span className="muted">{SUBSCRIPTION_INFO[s]}</span>
            </span>
          </label>
        ))}
        <FieldErrors id={`${id}-subs-err`} error={error} pointer="/subscriptions" label="Subscriptions" />
      </fieldset>
      <FormProblem error={error} fields={["/url", "/subscriptions"]} />
      <div className="actions">
        <Button type="submit" variant="primary" busy={busy} disabledReason={disabledReason}>
          {submitLabel}
        </Button>
        {onCancel ? <Button onClick={onCancel}>Cancel</Button> : null}
      </div>
    </form>
  );
}
