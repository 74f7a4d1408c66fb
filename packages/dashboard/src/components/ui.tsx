/**
 * Small shared building blocks: buttons that say why they are disabled, problem and field error
 * messages, loading and empty states, a copy-once secret box, an inline confirmation.
 */
import { useId, useState, type ButtonHTMLAttributes, type ReactNode } from "react";
import { ApiError } from "../api/client.js";

/** Formats an RFC 3339 time in the reader's locale, or a dash. */
export function formatTime(value: string | null | undefined): string {
  if (!value) return "—";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? value : d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** A percentage with one decimal, or a dash when there is nothing to divide. */
export function formatRate(rate: number | null | undefined): string {
  return rate === null || rate === undefined || Number.isNaN(rate) ? "—" : `${(rate * 100).toFixed(rate === 1 ? 0 : 1)} %`;
}

type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & {
  variant?: "primary" | "secondary" | "danger";
  /** When set, the button is disabled and this sentence is shown beside it (and read with it). */
  disabledReason?: string | null;
  busy?: boolean;
};

/** A button; disabled with a visible, announced reason when the session may not do this. */
export function Button({ variant = "secondary", disabledReason, busy, children, disabled, ...rest }: ButtonProps) {
  const reasonId = useId();
  const off = Boolean(disabled || disabledReason || busy);
  return (
    <span className="button-wrap">
      <button
        type="button"
        {...rest}
        className={`btn btn-${variant}`}
        disabled={off}
        aria-disabled={off}
        aria-describedby={disabledReason ? reasonId : undefined}
        aria-busy={busy || undefined}
      >
        {children}
      </button>
      {disabledReason ? (
        <span id={reasonId} className="disabled-reason">
          {disabledReason}
        </span>
      ) : null}
    </span>
  );
}

/** An error answer as its `detail` (role=alert so screen readers hear it). */
export function ProblemMessage({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const detail = error instanceof ApiError ? error.problem.detail : error instanceof Error ? error.message : String(error);
  const status = error instanceof ApiError && error.status > 0 ? ` (${error.status})` : "";
  return (
    <div className="problem" role="alert">
      <strong>{title ?? "That did not work"}{status}:</strong> {detail}
    </div>
  );
}

/**
 * The field errors of a problem for one JSON pointer, under its input. Validator messages read
 * as a predicate ("must have at least 1 items"): they get the field's label in front.
 */
export function FieldErrors({ id, error, pointer, label }: { id: string; error: unknown; pointer: string; label: string }) {
  const messages = error instanceof ApiError ? error.fieldErrors(pointer) : [];
  return (
    <ul id={id} className="field-errors" hidden={messages.length === 0}>
      {messages.map((m) => (
        <li key={m}>{/^[a-z]/.test(m) ? `${label} ${m}` : m}</li>
      ))}
    </ul>
  );
}

/** True when the problem has errors for this field (to mark the input invalid). */
export const hasFieldError = (error: unknown, pointer: string) => error instanceof ApiError && error.fieldErrors(pointer).length > 0;

/** Problem message for everything that is not a field error already shown on its field. */
export function FormProblem({ error, fields }: { error: unknown; fields: string[] }) {
  if (!error) return null;
  // The problem's own detail only says "see errors[]": the fields say what is wrong.
  if (error instanceof ApiError && fields.some((f) => error.fieldErrors(f).length > 0)) {
    return (
      <div className="problem" role="alert">
        <strong>Please correct the fields marked above.</strong>
      </div>
    );
  }
  return <ProblemMessage error={error} />;
}

export function Loading({ label = "Loading…" }: { label?: string }) {
  return (
    <p className="loading" role="status">
      {label}
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

/**
 * A secret shown once (API key token, endpoint signing secret): read-only field, copy button,
 * and a warning that it will not be shown again.
 */
export function SecretOnce({ label, value, children, onDone }: { label: string; value: string; children?: ReactNode; onDone?: () => void }) {
  const id = useId();
  const [copied, setCopied] = useState<"yes" | "no" | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied("yes");
    } catch {
      setCopied("no");
    }
  };
  return (
    <section className="secret-once" aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>{label}</h3>
      <p className="warning">Copy it now: it is shown only once and cannot be retrieved later.</p>
      <div className="copy-row">
        <label htmlFor={id} className="visually-hidden">
          {label}
        </label>
        <input id={id} className="mono" readOnly value={value} onFocus={(e) => e.currentTarget.select()} data-testid="secret-value" />
        <Button variant="primary" onClick={() => void copy()}>
          Copy
        </Button>
      </div>
      <p role="status" className="copy-status">
        {copied === "yes" ? "Copied to the clipboard." : copied === "no" ? "Copy failed: select the text and copy it by hand." : ""}
      </p>
      {children}
      {onDone ? (
        <Button onClick={onDone}>I have stored it</Button>
      ) : null}
    </section>
  );
}

/**
 * A destructive action with an inline confirmation step (no modal to trap focus in): the first
 * press shows the question and the real button, which takes focus.
 */
export function ConfirmAction({
  label,
  question,
  confirmLabel,
  onConfirm,
  disabledReason,
  busy,
  variant = "danger",
}: {
  label: string;
  question: ReactNode;
  confirmLabel: string;
  onConfirm: () => void;
  disabledReason?: string | null;
  busy?: boolean;
  variant?: "danger" | "secondary";
}) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <Button variant={variant} onClick={() => setAsking(true)} disabledReason={disabledReason}>
        {label}
      </Button>
    );
  }
  return (
    <div className="confirm" role="group" aria-label={label}>
      <p>{question}</p>
      <div className="actions">
        <Button
          variant={variant === "danger" ? "danger" : "primary"}
          busy={busy}
          autoFocus
          onClick={() => {
            onConfirm();
            setAsking(false);
          }}
        >
          {confirmLabel}
        </Button>
        <Button onClick={() => setAsking(false)}>Cancel</Button>
      </div>
    </div>
  );
}

/** A coloured pill (state, status). */
export function Badge({ tone, children }: { tone: "ok" | "bad" | "warn" | "neutral"; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

/** Pretty-prints JSON text; anything else is shown as it is. */
export function prettyJson(text: string | null): string {
  if (text === null) return "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * A block of code or JSON. Focusable (tabIndex 0) because it scrolls: keyboard users must be able
 * to reach it to scroll it, and its label says what it holds.
 */
export function CodeBlock({ label, children, testId }: { label: string; children: ReactNode; testId?: string }) {
  return (
    <pre className="code" tabIndex={0} aria-label={label} data-testid={testId}>
      {children}
    </pre>
  );
}
