/**
 * Rows of custom headers (name, value) to add, remove and fill in: the add form and the endpoint
 * page's "Custom headers" card both use it. Values are write-only on the server, so an existing
 * header arrives here with its name and an empty value to type again. The server's errors land on
 * their row (`/headers/<name>`) or under the list (`/headers`).
 */
import { useId } from "react";
import { ApiError } from "../api/client.js";
import { Button } from "./ui.js";

/** The API's limit of headers per endpoint (contracts' MAX_ENDPOINT_HEADERS; a value import would bundle the validators). */
export const MAX_HEADERS = 10;

export interface HeaderRow {
  /** Stable React key: rows move when one above is removed. */
  key: number;
  name: string;
  value: string;
}

let nextKey = 0;
/** A row for `name` (empty by default) with an empty value. */
export const headerRow = (name = ""): HeaderRow => ({ key: (nextKey += 1), name, value: "" });

/** What is wrong with a row before sending, and which of its two fields it is about. */
export interface RowProblem {
  field: "name" | "value";
  message: string;
}

/**
 * The rows as the API's `headers` object, or what is wrong before sending: a row without a name
 * or a value (a stored value is never shown, so keeping a header means typing it again), or a
 * name given twice. Rows left entirely blank are ignored.
 */
export function headersOf(rows: readonly HeaderRow[]): { headers: Record<string, string>; problems: Map<number, RowProblem> } {
  const headers: Record<string, string> = {};
  const problems = new Map<number, RowProblem>();
  const seen = new Set<string>();
  for (const row of rows) {
    const name = row.name.trim();
    if (name === "" && row.value === "") continue;
    if (name === "") problems.set(row.key, { field: "name", message: "Give the header a name." });
    else if (row.value === "") problems.set(row.key, { field: "value", message: `Type the value of ${name}: stored values are never shown, so saving needs it again.` });
    else if (seen.has(name.toLowerCase())) problems.set(row.key, { field: "name", message: `${name} is listed twice.` });
    seen.add(name.toLowerCase());
    headers[name] = row.value;
  }
  return { headers, problems };
}

/** A JSON pointer token (RFC 6901), as the server writes a header's name in `errors[]`. */
const pointerOf = (name: string) => `/headers/${name.trim().replace(/~/g, "~0").replace(/\//g, "~1")}`;

export function HeadersEditor({
  rows,
  onChange,
  error,
  problems,
  disabled,
  legend,
}: {
  rows: readonly HeaderRow[];
  onChange: (rows: HeaderRow[]) => void;
  error: unknown;
  /** Problems found before sending, by row key. */
  problems: ReadonlyMap<number, RowProblem>;
  disabled: boolean;
  legend: string;
}) {
  const id = useId();
  const set = (key: number, change: Partial<HeaderRow>) => onChange(rows.map((r) => (r.key === key ? { ...r, ...change } : r)));
  const serverErrors = (pointer: string) => (error instanceof ApiError ? (error.problem.errors ?? []).filter((e) => e.pointer === pointer).map((e) => e.detail) : []);
  const listErrors = serverErrors("/headers");
  return (
    <fieldset className="field header-rows" aria-describedby={`${id}-hint ${id}-err`}>
      <legend>{legend}</legend>
      <p id={`${id}-hint`} className="hint">
        Sent with every delivery and Test, for example an <span className="mono">Authorization</span> your API gateway expects. At most{" "}
        {MAX_HEADERS}. Values are stored encrypted and never shown again. Reserved names (Content-Type, User-Agent, webhook-*, Proxy-*…) are
        refused.
      </p>
      {rows.length === 0 ? <p className="muted">No custom headers.</p> : null}
      <ol className="header-list">
        {rows.map((row, index) => {
          const local = problems.get(row.key);
          // The server's pointer names the header, not which of its two fields is wrong: both are marked.
          const server = row.name.trim() ? serverErrors(pointerOf(row.name)) : [];
          const messages = [...(local ? [local.message] : []), ...server];
          const nameInvalid = server.length > 0 || local?.field === "name";
          const valueInvalid = server.length > 0 || local?.field === "value";
          const n = index + 1;
          return (
            <li key={row.key} className="header-row" data-testid="header-row">
              <RowInput id={`${id}-name-${row.key}`} label={`Name ${n}`} value={row.name} onChange={(name) => set(row.key, { name })} placeholder="Authorization" disabled={disabled} invalid={nameInvalid} describedBy={`${id}-row-err-${row.key}`} />
              <RowInput id={`${id}-value-${row.key}`} label={`Value ${n}`} value={row.value} onChange={(value) => set(row.key, { value })} placeholder="type the value" disabled={disabled} invalid={valueInvalid} describedBy={`${id}-row-err-${row.key}`} />
              <Button onClick={() => onChange(rows.filter((r) => r.key !== row.key))} disabled={disabled} aria-label={`Remove header ${n}${row.name.trim() ? ` (${row.name.trim()})` : ""}`}>
                Remove
              </Button>
              <ul id={`${id}-row-err-${row.key}`} className="field-errors header-row-errors" hidden={messages.length === 0}>
                {messages.map((m) => (
                  <li key={m}>{/^[a-z]/.test(m) ? `${row.name.trim() || "This header"} ${m}` : m}</li>
                ))}
              </ul>
            </li>
          );
        })}
      </ol>
      <ul id={`${id}-err`} className="field-errors" hidden={listErrors.length === 0}>
        {listErrors.map((m) => (
          <li key={m}>{`The headers ${m}`}</li>
        ))}
      </ul>
      <Button onClick={() => onChange([...rows, headerRow()])} disabled={disabled} disabledReason={rows.length >= MAX_HEADERS ? `At most ${MAX_HEADERS} headers.` : null}>
        Add header
      </Button>
    </fieldset>
  );
}

/** One labelled field of a row: names and values alike are typed as written (no autocomplete, no spelling fixes). */
function RowInput(props: { id: string; label: string; value: string; onChange: (value: string) => void; placeholder: string; disabled: boolean; invalid: boolean; describedBy: string }) {
  return (
    <div className="field">
      <label htmlFor={props.id}>{props.label}</label>
      <input
        id={props.id}
        className="mono"
        value={props.value}
        onChange={(e) => props.onChange(e.target.value)}
        placeholder={props.placeholder}
        autoComplete="off"
        spellCheck={false}
        disabled={props.disabled}
        aria-invalid={props.invalid || undefined}
        aria-describedby={props.describedBy}
      />
    </div>
  );
}
