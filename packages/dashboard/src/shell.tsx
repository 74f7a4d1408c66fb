/**
 * The signed-in layout: world name, navigation, sign-out, and the screen for the current path.
 */
import { useEffect, useRef, useState, type ReactNode } from "react";
import { signOut } from "./api/session.js";
import { ProblemMessage } from "./components/ui.js";
import { Link, useLocation } from "./router.js";
import { ApiKeysScreen } from "./screens/api-keys.screen.js";
import { DeliveryScreen } from "./screens/delivery.screen.js";
import { EndpointScreen } from "./screens/endpoint.screen.js";
import { EndpointsScreen } from "./screens/endpoints.screen.js";
import { EventCatalogueScreen } from "./screens/event-catalogue.screen.js";
import { OverviewScreen } from "./screens/overview.screen.js";
import { SettingsScreen } from "./screens/settings.screen.js";
import { useSession } from "./session-context.js";

const NAV = [
  { to: "/", label: "Overview" },
  { to: "/endpoints", label: "Endpoints" },
  { to: "/api-keys", label: "API keys" },
  { to: "/event-types", label: "Event catalogue" },
  { to: "/settings", label: "Settings" },
] as const;

function route(path: string): { screen: ReactNode; title: string; section: string } {
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { screen: <OverviewScreen />, title: "Overview", section: "/" };
  if (parts[0] === "api-keys" && parts.length === 1) return { screen: <ApiKeysScreen />, title: "API keys", section: "/api-keys" };
  if (parts[0] === "event-types" && parts.length === 1) return { screen: <EventCatalogueScreen />, title: "Event catalogue", section: "/event-types" };
  if (parts[0] === "settings" && parts.length === 1) return { screen: <SettingsScreen />, title: "Settings", section: "/settings" };
  if (parts[0] === "endpoints") {
    if (parts.length === 1) return { screen: <EndpointsScreen />, title: "Endpoints", section: "/endpoints" };
    if (parts.length === 2) return { screen: <EndpointScreen key={parts[1]} id={parts[1]!} />, title: "Endpoint", section: "/endpoints" };
    if (parts.length === 4 && parts[2] === "deliveries") {
      return { screen: <DeliveryScreen endpointId={parts[1]!} deliveryId={parts[3]!} />, title: "Delivery", section: "/endpoints" };
    }
  }
  return {
    screen: (
      <div className="card">
        <h1>Page not found</h1>
        <p>
          There is no dashboard page at this address. <Link to="/">Go to the overview</Link>.
        </p>
      </div>
    ),
    title: "Not found",
    section: "",
  };
}

const MISSING_LABELS = {
  "manage-endpoints": "change endpoints or world settings",
  "manage-api-keys": "create or revoke API keys",
  send: "send deliveries (Test, Replay, recover)",
} as const;

/** Says once, at the top, what this session cannot do (each disabled control repeats why). */
function CapabilityNote({ capabilities }: { capabilities: readonly string[] }) {
  const missing = (Object.keys(MISSING_LABELS) as (keyof typeof MISSING_LABELS)[]).filter((c) => !capabilities.includes(c));
  if (missing.length === 0) return null;
  return (
    <p className="capability-note" data-testid="capability-note">
      {missing.length === 3 ? "View-only access: " : "Limited access: "}
      this session cannot {missing.map((c) => MISSING_LABELS[c]).join(", nor ")}.
    </p>
  );
}

export function Shell({ onSignedOut }: { onSignedOut: () => void }) {
  const { session } = useSession();
  const { path } = useLocation();
  const { screen, title, section } = route(path);
  const [signOutError, setSignOutError] = useState<unknown>(null);
  const mainRef = useRef<HTMLElement>(null);

  useEffect(() => {
    document.title = `${title} · ${session.worldName} · Developers`;
  }, [title, session.worldName]);
  // After a navigation, move focus to the new screen so keyboard and screen-reader users start there.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    mainRef.current?.focus();
  }, [path]);

  const doSignOut = async () => {
    try {
      await signOut();
      onSignedOut();
    } catch (error) {
      setSignOutError(error);
    }
  };

  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <div className="brand">
          <span className="brand-kicker">Developers</span>
          <span className="brand-world" data-testid="world-name">
            {session.worldName}
          </span>
          <span className="brand-slug mono">
            {session.organization}/{session.world}
          </span>
        </div>
        <button type="button" className="btn btn-link signout" onClick={doSignOut}>
          Sign out
        </button>
        <nav aria-label="Dashboard" className="nav">
          <ul>
            {NAV.map((item) => (
              <li key={item.to}>
                <Link to={item.to} className="nav-link" {...(section === item.to ? { "aria-current": "page" as const } : {})}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      </header>
      <main id="main" ref={mainRef} tabIndex={-1} className="content">
        <CapabilityNote capabilities={session.capabilities} />
        <ProblemMessage error={signOutError} title="Sign-out failed" />
        {screen}
      </main>
      <footer className="footer muted">
        Session for {session.organization}/{session.world}, valid until {new Date(session.expiresAt).toLocaleString()} · capabilities:{" "}
        {session.capabilities.join(", ")}
      </footer>
    </>
  );
}
