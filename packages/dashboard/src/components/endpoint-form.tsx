/**
 * The URL + subscriptions form of an endpoint (add and edit), with the custom headers when
 * adding. Problem `errors[]` land on their field: `/url` (the URL policy: https only, no private
 * addresses), `/subscriptions` and `/headers/<name>`.
 */
import { useId, useState, type FormEvent } from "react";
import type { WebhookSubscription } from "@vw/contracts";
import { HeadersEditor, headersOf, type HeaderRow, type RowProblem } from "./headers-editor.js";
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
  /** Only with `withHeaders`, and only when some were given. */
  headers?: Record<string, string>;
}

export function EndpointForm({
  initial,
  submitLabel,
  onSubmit,
  error,
  busy,
  disabledReason,
  onCancel,
  withHeaders = false,
}: {
  initial: EndpointFormValue;
  submitLabel: string;
  onSubmit: (value: EndpointFormValue) => void;
  error: unknown;
  busy: boolean;
  disabledReason: string | null;
  onCancel?: () => void;
  /** Show the custom headers editor (adding: an edit of the set is the endpoint page's own card). */
  withHeaders?: boolean;
}) {
  const id = useId();
  const [url, setUrl] = useState(initial.url);
  const [subs, setSubs] = useState<WebhookSubscription[]>(initial.subscriptions);
  const [rows, setRows] = useState<HeaderRow[]>([]);
  const [problems, setProblems] = useState<ReadonlyMap<number, RowProblem>>(new Map());
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (disabledReason) return;
    const checked = headersOf(rows);
    setProblems(checked.problems);
    if (checked.problems.size > 0) return;
    const headers = Object.keys(checked.headers).length > 0 ? { headers: checked.headers } : {};
    onSubmit({ url: url.trim(), subscriptions: SUBSCRIPTIONS.filter((s) => subs.includes(s)), ...headers });
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
      {withHeaders ? <HeadersEditor rows={rows} onChange={setRows} error={error} problems={problems} disabled={off} legend="Custom headers (optional)" /> : null}
      <FormProblem error={error} fields={["/url", "/subscriptions", "/headers"]} />
      <div className="actions">
        <Button type="submit" variant="primary" busy={busy} disabledReason={disabledReason}>
          {submitLabel}
        </Button>
        {onCancel ? <Button onClick={onCancel}>Cancel</Button> : null}
      </div>
    </form>
  );
}
