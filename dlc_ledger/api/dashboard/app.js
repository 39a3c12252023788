// The dashboard's entry: the viewer's token (asked for, kept in sessionStorage, signed
// out), who it stands for (/v1/whoami), and the hash router that renders one view into
// <main>. Every figure comes from the public API with that token.

import { ApiError, getJson, onUnauthorized, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { clearError, showError } from "./notify.js";
import { costView } from "./views/cost.js";
import { jobView, jobsView } from "./views/jobs.js";
import { notificationsView } from "./views/notifications.js";
import { quotasView } from "./views/quotas.js";
import { queuesView } from "./views/queues.js";
import { seriesView } from "./views/series.js";

const VIEWS = {
  quotas: quotasView, series: seriesView, queues: queuesView, jobs: jobsView, job: jobView, cost: costView,
  notifications: notificationsView,
};
const main = document.getElementById("main");
const session = document.getElementById("session");
const nav = document.getElementById("views");
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

function signIn(message) {
  setToken(null);
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

async function render() {
  if (!token()) return;
  const ticket = ++rendering;
  const { path, params } = parseHash();
  const view = VIEWS[path[0]];
  for (const link of nav.querySelectorAll("a")) {
    const current = link.getAttribute("href") === `#/${path[0]}` || (path[0] === "job" && link.getAttribute("href") === "#/jobs");
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  clearError();
  main.setAttribute("aria-busy", "true");
  try {
    const content = view ? await view({ path, params, go }) : h("p", {}, `No view named ${path[0]}.`);
    if (ticket !== rendering) return; // a later navigation won
    main.replaceChildren(content);
    main.dataset.view = path[0];
  } catch (error) {
    if (ticket !== rendering) return;
    if (error instanceof ApiError && error.status === 401) return;
    main.replaceChildren(h("p", {}, "This view could not be loaded."));
    showError(error);
  } finally {
    if (ticket === rendering) main.removeAttribute("aria-busy");
  }
}

onUnauthorized((error) => signIn(`The token was refused: ${error.problem?.detail ?? error.message}. Enter it again.`));
window.addEventListener("hashchange", () => {
  render();
  main.focus({ preventScroll: true });
});
start();
