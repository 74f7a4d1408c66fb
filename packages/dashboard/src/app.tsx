/**
 * Opens the session (exchanging a link's one-time code, or reading the current cookie's
 * session), then renders the signed-in shell; a refused link or a missing session gets a page
 * that says what happened and what to do.
 */
import { useEffect, useMemo, useState } from "react";
import { ApiError, onSessionLost, problemCode } from "./api/client.js";
import { codeFromFragment, currentSession, exchangeCode, type DashboardSession } from "./api/session.js";
import { worldApi } from "./api/world-api.js";
import { Loading } from "./components/ui.js";
import { SessionContext } from "./session-context.js";
import { Shell } from "./shell.js";

type OpenState =
  | { kind: "opening" }
  | { kind: "open"; session: DashboardSession }
  | { kind: "link-refused"; error: ApiError | Error }
  | { kind: "no-session"; ended: boolean }
  | { kind: "signed-out" }
  | { kind: "error"; error: unknown };

// React's StrictMode runs effects twice in development; a code can be exchanged only once.
let pendingExchange: Promise<DashboardSession> | null = null;

async function openSession(): Promise<OpenState> {
  const code = codeFromFragment(window.location.hash);
  if (code !== null) {
    pendingExchange ??= exchangeCode(code);
    try {
      const session = await pendingExchange;
      return { kind: "open", session };
    } catch (error) {
      return error instanceof ApiError && error.status >= 400 && error.status < 500 ? { kind: "link-refused", error } : { kind: "error", error };
    } finally {
      // The code is spent (or worthless) either way: take it out of the address bar and history.
      window.history.replaceState(null, "", window.location.pathname + window.location.search);
    }
  }
  try {
    return { kind: "open", session: await currentSession() };
  } catch (error) {
    return error instanceof ApiError && error.status === 401
      ? { kind: "no-session", ended: problemCode(error) === "dashboard-session-expired" }
      : { kind: "error", error };
  }
}

export function App() {
  const [state, setState] = useState<OpenState>({ kind: "opening" });
  useEffect(() => {
    let live = true;
    void openSession().then((s) => live && setState(s));
    const unsubscribe = onSessionLost(() => setState({ kind: "no-session", ended: true }));
    return () => {
      live = false;
      unsubscribe();
    };
  }, []);

  const context = useMemo(
    () => (state.kind === "open" ? { session: state.session, api: worldApi(state.session.organization, state.session.world) } : null),
    [state],
  );

  if (state.kind === "opening") {
    return (
      <main className="center-page">
        <Loading label="Opening your dashboard session…" />
      </main>
    );
  }
  if (context !== null) {
    return (
      <SessionContext.Provider value={context}>
        <Shell onSignedOut={() => setState({ kind: "signed-out" })} />
      </SessionContext.Provider>
    );
  }
  return <NoSessionPage state={state} />;
}

function NoSessionPage({ state }: { state: OpenState }) {
  let title = "Something went wrong";
  let body = "The dashboard could not open your session. Reload the page; if it keeps failing, ask your platform for a new dashboard link.";
  if (state.kind === "link-refused") {
    const status = state.error instanceof ApiError ? state.error.status : 0;
    const code = problemCode(state.error);
    title =
      code === "dashboard-link-used"
        ? "This dashboard link was already used"
        : code === "dashboard-link-expired"
          ? "This dashboard link has expired"
          : status === 410
            ? "This dashboard link has expired or was already used"
            : "This dashboard link is not valid";
    body =
      status === 410
        ? "A dashboard link works once, within 10 minutes of being issued. Ask your platform for a new link."
        : "The link is unknown: it may be mistyped, cut, or its sessions were revoked. Ask your platform for a new link.";
  } else if (state.kind === "no-session") {
    title = state.ended ? "Your dashboard session has ended" : "You are not signed in";
    body = state.ended
      ? "It expired, was signed out, or was revoked by your platform. Open a new dashboard link from your platform to continue."
      : "Open the dashboard through the link your platform gives you; each link signs you in to one world.";
  } else if (state.kind === "signed-out") {
    title = "You are signed out";
    body = "Your dashboard session has ended. Open a new link from your platform to come back.";
  }
  const detail = state.kind === "link-refused" || state.kind === "error" ? (state.error instanceof ApiError ? state.error.problem.detail : String(state.error)) : null;
  return (
    <main className="center-page">
      <div className="card narrow">
        <h1>{title}</h1>
        <p>{body}</p>
        {detail ? (
          <p className="muted" data-testid="session-problem">
            Server said: {detail}
          </p>
        ) : null}
      </div>
    </main>
  );
}
