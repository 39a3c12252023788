// The dashboard's entry: the viewer's token (asked for, kept in sessionStorage, signed
// out), who it stands for (/v1/whoami), the data's extent (the default instant, and
// whether it is a replay), the hash router that renders one view into <main>, and the
// live refresh of that view. Every figure comes from the public API with that token.

import { ApiError, getJson, onUnauthorized, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { instant } from "./format.js";
import { startLive, swapLive } from "./live.js";
import { clearError, showError } from "./notify.js";
import { budgetsView } from "./views/budgets.js";
import { costView } from "./views/cost.js";
import { invoiceView, invoicesView } from "./views/invoices.js";
import { jobView, jobsView } from "./views/jobs.js";
import { monthView } from "./views/month.js";
import { notificationsView } from "./views/notifications.js";
import { quotasView } from "./views/quotas.js";
import { queuesView } from "./views/queues.js";
import { seriesView } from "./views/series.js";
import { servicesView } from "./views/services.js";
import { subscriptionsView } from "./views/subscriptions.js";

const VIEWS = {
  quotas: quotasView, series: seriesView, queues: queuesView, jobs: jobsView, job: jobView, services: servicesView, cost: costView,
  month: monthView, budgets: budgetsView, invoices: invoicesView, invoice: invoiceView,
  subscriptions: subscriptionsView, notifications: notificationsView,
};
// a detail view's link in the navigation
const PARENT = { job: "jobs", invoice: "invoices" };
const main = document.getElementById("main");
const session = document.getElementById("session");
const nav = document.getElementById("views");
const banner = document.getElementById("replay");
let rendering = 0;

/** "#/job/abc?x=1" -> {path: ["job", "abc"], params: {x: "1"}} */
function parseHash() {
  const [route, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const path = route.split("/").filter(Boolean);
  return { path: path.length ? path : ["quotas"], params: Object.fromEntries(new URLSearchParams(query)) };
}

/** Navigate: the same view (or `route`) with new parameters (empty ones left out). */
function go(params, route) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const target = `#/${route ?? parseHash().path.join("/")}${query.size ? `?${query}` : ""}`;
  if (location.hash === target) render();
  else location.hash = target;
}

/** The data's extent (GET /v1/extent), and the replay banner from it; null when the
 *  server has no such route (the views then default to the server's own instant). */
async function loadExtent() {
  let extent = null;
  try {
    extent = await getJson("v1/extent");
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
  }
  if (extent?.replayed) {
    const run = extent.run ? ` (run ${extent.run})` : "";
    const span = extent.first && extent.last ? `: ${instant(extent.first)} to ${instant(extent.last)}` : "";
    banner.textContent = `Replayed data${run}${span}. These figures come from replaying a trace, not from a live cluster.`;
    banner.hidden = false;
  } else banner.hidden = true;
  return extent;
}

function signIn(message) {
  setToken(null);
  liveLoop.stopped();
  delete main.dataset.view;
  banner.hidden = true;
  nav.hidden = true;
  session.replaceChildren();
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: false });
  const form = h("form", { class: "sign-in", "aria-label": "Sign in" },
    h("h2", {}, "Sign in"),
    h("p", {}, "Paste an API token (", h("code", {}, "dlc-ledger tokens create"), "). It is kept in this tab only."),
    message ? h("p", { class: "warn", role: "status" }, message) : null,
    h("label", { for: "token" }, "Token "), input, " ",
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    start();
  });
  main.replaceChildren(form);
  input.focus();
}

async function start() {
  clearError();
  if (!token()) return signIn();
  let me;
  try {
    me = await getJson("v1/whoami");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return; // signIn shown by the listener
    showError(error);
    return;
  }
  const scope = me.workspaces === null ? "all workspaces" : `workspaces ${me.workspaces.join(", ")}`;
  session.replaceChildren(
    h("span", { id: "whoami" }, `${me.name} · ${me.roles.join(", ")} · ${scope}`), " ",
    h("button", { type: "button", id: "sign-out", onclick: () => signIn("Signed out.") }, "Sign out"));
  nav.hidden = false;
  render();
}

/** The current route's view rendered off-page (a full render and a refresh alike). */
async function build() {
  const { path, params } = parseHash();
  const view = VIEWS[path[0]];
  if (!view) return h("p", {}, `No view named ${path[0]}.`);
  const extent = await loadExtent();
  return view({ path, params, go, extent });
}

async function render() {
  if (!token()) return;
  const ticket = ++rendering;
  const route = location.hash;
  const { path } = parseHash();
  for (const link of nav.querySelectorAll("a")) {
    const href = link.getAttribute("href");
    const current = href === `#/${path[0]}` || href === `#/${PARENT[path[0]]}`;
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  clearError();
  main.setAttribute("aria-busy", "true");
  try {
    const content = await build();
    if (ticket !== rendering) return; // a later navigation won
    main.replaceChildren(content);
    main.dataset.view = path[0];
    main.dataset.route = route; // which route the content is of: the URL changes before the render
    liveLoop.rendered();
  } catch (error) {
    if (ticket !== rendering) return;
    if (error instanceof ApiError && error.status === 401) return;
    main.replaceChildren(h("p", {}, "This view could not be loaded."));
    main.dataset.view = path[0];
    main.dataset.route = route;
    showError(error);
  } finally {
    if (ticket === rendering) main.removeAttribute("aria-busy");
  }
}

/** A refresh: the same route rendered again, unless a navigation started meanwhile. */
async function refresh() {
  if (!token() || main.getAttribute("aria-busy") || !main.dataset.view) return null;
  const ticket = rendering;
  try {
    const content = await build();
    if (ticket !== rendering || main.getAttribute("aria-busy")) return null;
    clearError();
    return content;
  } catch (error) {
    if (ticket !== rendering || (error instanceof ApiError && error.status === 401)) return null;
    showError(error);
    return null;
  }
}

function apply(content) {
  const current = main.firstElementChild;
  if (!current || !swapLive(current, content)) {
    const { scrollX, scrollY } = window;
    main.replaceChildren(content);
    window.scrollTo(scrollX, scrollY);
  }
}

const liveLoop = startLive({ refresh, apply, indicator: document.getElementById("updated") });

onUnauthorized((error) => signIn(`The token was refused: ${error.problem?.detail ?? error.message}. Enter it again.`));
window.addEventListener("hashchange", () => {
  render();
  main.focus({ preventScroll: true });
});
start();
