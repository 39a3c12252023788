// Views stay current on their own: every 5 s while the tab is visible the current view is
// rendered again off-page and its live parts (`data-live`, dom.js `live`) swapped in, so
// the page is never reloaded and what the viewer typed, scrolled, opened or focused stays.
// Hidden tabs are not refreshed (Page Visibility API); coming back refreshes at once. One
// refresh at a time; the header says when the figures were last read.

import { ago } from "./format.js";

export const INTERVAL_MS = 5000;

/**
 * Start the loop. `refresh()` renders the current view again and returns the fresh
 * element (or null: nothing to refresh, e.g. signed out); `apply(fresh)` swaps it in.
 * Returns {rendered(), stopped()}: to be called after any full render (the clock starts
 * again) and when there is nothing to keep current (signed out).
 */
export function startLive({ refresh, apply, indicator }) {
  let updatedAt = null;
  let triedAt = null; // a refresh that failed is tried again an interval later, not each second
  let inFlight = false;

  const hidden = () => document.visibilityState === "hidden";
  const show = () => {
    if (updatedAt === null) {
      indicator.textContent = "";
      return;
    }
    const age = ago(Date.now() - updatedAt);
    indicator.textContent = hidden() ? `paused while hidden · updated ${age}` : `updated ${age}`;
    indicator.dataset.state = hidden() ? "paused" : "live";
  };

  let ticker = null;
  // the clock ticks each second from the last read, so "N s ago" turns on the second and
  // the refresh comes exactly INTERVAL_MS after it
  function updated() {
    updatedAt = Date.now();
    clearInterval(ticker);
    ticker = setInterval(() => {
      if (!hidden() && Date.now() - Math.max(updatedAt, triedAt ?? 0) >= INTERVAL_MS) run();
      show();
    }, 1000);
    show();
  }

  async function run() {
    if (inFlight || hidden() || updatedAt === null) return;
    inFlight = true;
    triedAt = Date.now();
    indicator.dataset.refreshing = "true";
    try {
      const fresh = await refresh();
      if (fresh && updatedAt !== null) {
        apply(fresh);
        updated();
      }
    } finally {
      inFlight = false;
      delete indicator.dataset.refreshing;
      show();
    }
  }

  document.addEventListener("visibilitychange", () => {
    show();
    if (!hidden()) run();
  });
  return {
    rendered: updated,
    stopped() {
      clearInterval(ticker);
      updatedAt = null;
      show();
    },
  };
}

/** A stable description of where the focus is inside `root`'s live parts, or null. */
function focusPath(root) {
  const active = document.activeElement;
  const part = active?.closest?.("[data-live]");
  if (!part || !root.contains(part)) return null;
  if (active.id) return { id: active.id };
  const focusable = [...part.querySelectorAll("a, button, input, select, textarea, summary, [tabindex]")];
  return { live: part.dataset.live, index: focusable.indexOf(active) };
}

function refocus(root, path) {
  if (!path) return;
  let target = null;
  if (path.id) target = document.getElementById(path.id);
  else {
    const part = root.querySelector(`[data-live="${CSS.escape(path.live)}"]`);
    target = part?.querySelectorAll("a, button, input, select, textarea, summary, [tabindex]")[path.index] ?? null;
  }
  target?.focus({ preventScroll: true });
}

/** What a live part holds that a person changed: open disclosures, scrolled boxes. */
function viewState(part) {
  return {
    open: [...part.querySelectorAll("details")].map((d) => d.open),
    scroll: [...part.querySelectorAll(".scroll")].map((s) => [s.scrollLeft, s.scrollTop]),
  };
}

function restoreState(part, state) {
  part.querySelectorAll("details").forEach((d, i) => {
    if (state.open[i] !== undefined) d.open = state.open[i];
  });
  part.querySelectorAll(".scroll").forEach((s, i) => {
    if (state.scroll[i]) [s.scrollLeft, s.scrollTop] = state.scroll[i];
  });
}

/**
 * Swap `fresh`'s live parts into `current` (both a view's root element): parts with the
 * same key are replaced (kept as they are when nothing in them changed); the rest of the
 * view — its forms — is left alone. Returns false when the two have different live parts
 * (the caller replaces the whole view then).
 */
export function swapLive(current, fresh) {
  const parts = [...current.querySelectorAll("[data-live]")].filter((p) => !p.parentElement.closest("[data-live]"));
  const freshParts = new Map([...fresh.querySelectorAll("[data-live]")]
    .filter((p) => !p.parentElement.closest("[data-live]")).map((p) => [p.dataset.live, p]));
  if (parts.length !== freshParts.size || parts.some((p) => !freshParts.has(p.dataset.live))) return false;
  const focus = focusPath(current);
  const { scrollX, scrollY } = window;
  for (const part of parts) {
    const next = freshParts.get(part.dataset.live);
    if (next.dataset.sig !== undefined ? next.dataset.sig === part.dataset.sig : next.outerHTML === part.outerHTML) continue;
    const state = viewState(part);
    part.replaceWith(next);
    restoreState(next, state);
  }
  window.scrollTo(scrollX, scrollY);
  refocus(current, focus);
  return true;
}
