/**
 * A tiny client-side router over the History API: admin-api answers index.html for every
 * extension-less path under /dashboard/, so screens have real, bookmarkable addresses without a
 * routing library. It owns `Link` too, so screens depend on the router and the shell on the
 * screens, never the other way round.
 */
import { createElement, useSyncExternalStore, type MouseEvent, type ReactNode } from "react";

export const BASE = "/dashboard";

const listeners = new Set<() => void>();
window.addEventListener("popstate", () => listeners.forEach((l) => l()));

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

const snapshot = () => window.location.pathname + window.location.search;

/** Current location relative to {@link BASE} (`/endpoints/abc?status=failed`). */
export function useLocation(): { path: string; search: URLSearchParams } {
  const full = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(full, window.location.origin);
  const path = url.pathname.startsWith(BASE) ? url.pathname.slice(BASE.length) || "/" : "/";
  return { path: path.replace(/\/+$/, "") || "/", search: url.searchParams };
}

/** Goes to `to` (relative to {@link BASE}); `replace` keeps the history entry (filters). */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = `${BASE}${to}`;
  if (options.replace) window.history.replaceState(null, "", url);
  else window.history.pushState(null, "", url);
  listeners.forEach((l) => l());
  if (!options.replace) window.scrollTo(0, 0);
}

/** Full href of a dashboard path, for real links (middle click, copy address). */
export const href = (to: string) => `${BASE}${to}`;

/** A same-app link: normal href (new tab works), client-side navigation on a plain click. */
export function Link({ to, children, className, ...rest }: { to: string; children: ReactNode; className?: string; "aria-current"?: "page" }) {
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  // createElement rather than JSX: this module stays plain TypeScript (router.ts).
  return createElement("a", { href: href(to), onClick, className, ...rest }, children);
}
