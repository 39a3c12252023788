// #/services: inference services (or, `?list=notebooks`, notebook instances) the token may
// see, a page at a time, each linking to #/services/<uid>: one service's (or notebook's)
// desired replicas over time as a step chart (uPlot, vendored) with its data table (the
// chart's text alternative), and its cost per day by billing mode (rated: a spilling
// service's prepaid baseline, `quota`, and its pay-as-you-go spill, `public`, apart), over
// a window (default: the service's life). Every figure is the API's (docs/workloads.md).

import uPlot from "../vendor/uPlot.esm.js";
import { ApiError, getAll, getJson } from "../api.js";
import { h, live, section, table, when } from "../dom.js";
import { count, hours, instant, money, quantity, request, unitHours } from "../format.js";
import { windowControls, windowOf, windowText } from "../window.js";
import { digest } from "./series.js";

const LISTS = [["services", "Services"], ["notebooks", "Notebooks"]];
const MINUTE = 60_000;
// billing modes in this order (the rest after them, as the API names them)
const MODES = ["quota", "public", "spot"];
const MODE_TEXT = { quota: "prepaid (quota)", public: "pay-as-you-go (public)", spot: "spot" };
const MODE_COLOUR = { quota: "#2e7d32", public: "#e08a00", spot: "#7b3fa0" };

const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

/** The desired replicas now: the replica specs' `replicas` (one spec for a service); none
 *  once deleted (the API's row keeps the count it had, the replica history ends at 0). */
export function desiredNow(row) {
  if (row.deleted_at) return 0;
  const specs = row.replicas ?? [];
  if (!specs.length) return null;
  return specs.reduce((s, r) => s + (r.replicas ?? r.count ?? 0), 0);
}

/** "ns1/ranker": the service's key in reports (group key `service`). */
export function serviceKey(row) {
  return `${row.namespace ?? ""}/${row.name ?? ""}`;
}

function serviceLink(row) {
  return h("a", { href: `#/services/${encodeURIComponent(row.job_uid)}`, title: `uid ${row.job_uid}` },
    row.name || row.job_uid);
}

function listColumns() {
  return [
    { key: "name", label: "name", render: serviceLink },
    { key: "namespace", label: "namespace" },
    { key: "workspace", label: "workspace" },
    { key: "quota", label: "quota" },
    { key: "kind", label: "kind" },
    { key: "desired", label: "desired replicas now", numeric: true, render: (r) => count(desiredNow(r)) },
    { key: "gpu_request", label: "GPUs now", numeric: true, render: (r) => quantity(r.deleted_at ? 0 : r.gpu_request_mgpu, "mGPU") },
    { key: "status", label: "status" },
    { key: "gpu_hours", label: "GPU-hours", numeric: true, render: (r) => hours(r.gpu_hours) },
    { key: "cost", label: "cost", numeric: true, render: (r) => money(r) },
  ];
}

function listFilters(params, go, list) {
  const form = h("form", { class: "controls", "aria-label": "Workload filters", noValidate: true },
    h("label", { for: "w-workspace" }, "Workspace ", h("input", { id: "w-workspace", value: params.workspace ?? "", size: 12 })),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go({ list: list === "services" ? "" : list, workspace: form.elements["w-workspace"].value.trim() });
  });
  return form;
}

export async function servicesView(context) {
  if (context.path[1]) return serviceView(context);
  const { params, go } = context;
  const list = LISTS.some(([k]) => k === params.list) ? params.list : "services";
  const query = { workspace: params.workspace, limit: 50, cursor: params.cursor };
  const page = await getJson(`v1/${list}`, query);
  const tabs = h("nav", { class: "tabs", "aria-label": "Services or notebooks" },
    LISTS.map(([key, text]) => {
      const q = new URLSearchParams(Object.entries({ list: key === "services" ? "" : key, workspace: params.workspace ?? "" }).filter(([, v]) => v));
      return h("a", { href: `#/services${q.size ? `?${q}` : ""}`, "aria-current": key === list ? "page" : null, "data-list": key }, text);
    }));
  const pager = h("nav", { class: "pager", "aria-label": "Pages", "data-next": page.next_cursor ?? "" },
    params.cursor ? h("button", { type: "button", onclick: () => history.back() }, "Previous page") : null,
    page.next_cursor ? h("button", { type: "button", onclick: () => go({ ...params, cursor: page.next_cursor }) }, "Next page") : null);
  const what = list === "services" ? "Inference services" : "Notebook instances";
  const inWorkspace = params.workspace ? ` in workspace ${params.workspace}` : "";
  return section(what, tabs, listFilters(params, go, list), live(list, table({
    id: list,
    caption: `${what}${inWorkspace}, newest first: desired replicas now, GPU-hours and cost (posted) so far`,
    columns: listColumns(), rows: page.items,
    csv: { path: `v1/${list}`, params: { ...query, cursor: undefined }, filename: `${list}.csv` },
    empty: list === "services" ? `No service${inWorkspace}.` : `No notebook${inWorkspace}.`,
  }), pager));
}

/** The service's life as a window: its creation to the minute after its deletion (or
 *  after the data's latest instant while it runs). */
function lifeWindow(history, extent) {
  if (!history.length) return { from: "", to: "", preset: "" };
  const first = Date.parse(history[0].at);
  const last = history.at(-1);
  const endMs = last.change === "deleted" ? Date.parse(last.at) : Math.max(Date.parse(extent?.last ?? "") || Date.now(), Date.parse(last.at));
  return { from: iso(Math.floor(first / MINUTE) * MINUTE), to: iso(Math.floor(endMs / MINUTE) * MINUTE + MINUTE), preset: "" };
}

/** The steps the chart draws and the table lists: each instant in [from, to) where the
 *  desired replicas (`replica_history`) or the occupied pods (`occupied_history`) change,
 *  with both counts from then on (null: none known yet), led by the counts in force at
 *  `from` when a change came before it. */
export function steps(history, occupied, win) {
  const fromMs = win.from ? Date.parse(win.from) : -Infinity;
  const toMs = win.to ? Date.parse(win.to) : Infinity;
  const changes = [
    ...history.map((c) => ({ ms: Date.parse(c.at), at: c.at, desired: c })),
    ...occupied.map((o) => ({ ms: Date.parse(o.at), at: o.at, pods: o.pods })),
  ].sort((x, y) => x.ms - y.ms);
  const out = [];
  let desired = null;
  let pods = null;
  let lead = null; // the counts in force at `from`
  for (const c of changes) {
    if (c.ms >= toMs) break;
    if (c.desired) desired = c.desired.replicas;
    if (c.pods !== undefined) pods = c.pods;
    if (c.ms < fromMs) {
      lead = { at: win.from, desired, pods, change: "in force", by: null };
      continue;
    }
    const last = out.at(-1);
    if (last && Date.parse(last.at) === c.ms) {
      Object.assign(last, { desired, pods });
      if (c.desired) Object.assign(last, { change: c.desired.change, by: c.desired.by });
    } else {
      out.push({ at: c.at, desired, pods, change: c.desired?.change ?? null, by: c.desired?.by ?? null });
    }
  }
  if (lead && (!out.length || Date.parse(out[0].at) > fromMs)) out.unshift(lead);
  return out;
}

/** Occupied replicas from pods: pods / pods a replica (a whole number, else one decimal). */
function replicasOf(pods, perReplica) {
  if (pods === null || pods === undefined) return null;
  return pods / Math.max(1, perReplica);
}

function replicaText(value) {
  if (value === null || value === undefined) return "–";
  return Number.isInteger(value) ? count(value) : value.toFixed(1);
}

function replicaChart(points, perReplica, win, width, name) {
  const endMs = win.to ? Date.parse(win.to) : Date.parse(points.at(-1).at);
  const xs = points.map((p) => Date.parse(p.at) / 1000);
  const desired = points.map((p) => p.desired);
  const occupied = points.map((p) => replicasOf(p.pods, perReplica));
  if (endMs / 1000 > xs.at(-1)) {
    xs.push(endMs / 1000);
    desired.push(desired.at(-1));
    occupied.push(occupied.at(-1));
  }
  const plot = h("div", { class: "plot", "aria-hidden": "true" });
  const holder = h("figure", { class: "chart", "aria-label": `Desired and occupied replicas of ${name} over time` }, plot);
  const stepped = uPlot.paths.stepped({ align: 1 });
  const opts = {
    width, height: 220, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    scales: { y: { range: (u, min, max) => [0, Math.max(1, max) + 1] } },
    series: [{ label: "time", value: (u, ts) => (ts === null || ts === undefined ? "–" : instant(ts * 1000)) },
      { label: "desired replicas", stroke: "#1f5fbf", width: 2, fill: "rgba(31, 95, 191, 0.08)", paths: stepped,
        value: (u, v) => replicaText(v) },
      { label: "occupied replicas", stroke: "#e08a00", width: 2, dash: [6, 4], paths: stepped,
        value: (u, v) => replicaText(v) }],
    axes: [
      { space: 150, values: (u, splits) => splits.map((ts) => instant(ts * 1000)) },
      { label: "replicas", size: 60, labelSize: 20, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] },
    ],
  };
  requestAnimationFrame(() => {
    if (plot.isConnected) new uPlot(opts, [xs, desired, occupied], plot);
  });
  holder.append(h("figcaption", {}, `${name}: desired replicas (a step at each change: created, scaled, deleted) and occupied replicas (its pods bound to nodes${perReplica > 1 ? `, ${perReplica} a replica` : ""}), ${windowText(win)} (the table below holds the same figures).`));
  return holder;
}

function costChart(days, modes, width, name) {
  // one point a day at its start, held to the next day's (a step per day); the figures
  // drawn are the API's minor units over its scale, the table holds its strings
  const xs = days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000);
  xs.push(xs.at(-1) + 86400);
  const series = modes.map((mode) => {
    const ys = days.map((d) => (d[mode] ? d[mode].cost_minor / 10 ** (d[mode].scale ?? 0) : null));
    ys.push(ys.at(-1));
    return ys;
  });
  const currency = days.flatMap((d) => modes.map((m) => d[m]?.currency)).find(Boolean) ?? "";
  const plot = h("div", { class: "plot", "aria-hidden": "true" });
  const holder = h("figure", { class: "chart", "aria-label": `Cost of ${name} per day by billing mode` }, plot);
  const opts = {
    width, height: 200, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    series: [{ label: "day", value: (u, ts) => (ts === null || ts === undefined ? "–" : instant(ts * 1000).slice(0, 10)) },
      ...modes.map((mode) => ({ label: MODE_TEXT[mode] ?? mode, stroke: MODE_COLOUR[mode] ?? "#555", width: 2,
        paths: uPlot.paths.stepped({ align: 1 }), value: (u, v) => (v === null ? "–" : `${v.toFixed(2)} ${currency}`) }))],
    axes: [
      { space: 150, values: (u, splits) => splits.map((ts) => instant(ts * 1000)) },
      { label: currency, size: 70, labelSize: 20 },
    ],
  };
  requestAnimationFrame(() => {
    if (plot.isConnected) new uPlot(opts, [xs, ...series], plot);
  });
  holder.append(h("figcaption", {}, `${name}: rated cost per day (UTC), one line per billing mode (the table below holds the same figures).`));
  return holder;
}

function facts(svc) {
  const spec = (svc.replicas ?? [])[0] ?? {};
  const perReplica = spec.per_replica ?? 1;
  const one = { [spec.flavor ?? "gpu/any"]: (spec.mgpu ?? 0) * perReplica };
  if (spec.cpu_milli) one.cpu = spec.cpu_milli * perReplica;
  if (spec.memory_mib) one.memory = spec.memory_mib * perReplica;
  const gpu = (svc.occupied ?? []).reduce((s, r) => s + (r.mgpu_seconds ?? 0), 0);
  const rows = [
    ["name", `${serviceKey(svc)}`], ["uid", svc.job_uid], ["workload", svc.framework], ["kind", svc.kind],
    ["status", svc.status], ["since", when(svc.status_since)],
    ["workspace", svc.workspace], ["quota", svc.quota], ["user", svc.user],
    ["desired replicas now", count(desiredNow(svc))],
    ["one replica", `${perReplica} pod${perReplica === 1 ? "" : "s"}: ${request(one)}`],
    ["created", when(svc.submitted_at)], ["deleted", when(svc.deleted_at)],
    ["open occupancies", count(svc.open_occupancies)],
    ["GPU-hours", unitHours(gpu, "mGPU")],
  ];
  return h("dl", { class: "facts" }, rows.flatMap(([k, v]) =>
    [h("dt", {}, k), h("dd", { "data-key": k }, v === null || v === undefined || v === "" ? "–" : v)]));
}

function stepColumns(perReplica) {
  return [
    { key: "at", label: "from", render: (r) => when(r.at) },
    { key: "desired", label: "desired replicas", numeric: true, render: (r) => replicaText(r.desired) },
    { key: "occupied", label: "occupied replicas", numeric: true, render: (r) => replicaText(replicasOf(r.pods, perReplica)) },
    perReplica > 1 ? { key: "pods", label: "occupied pods", numeric: true, render: (r) => count(r.pods) } : null,
    { key: "change", label: "change" },
    { key: "by", label: "by" },
  ].filter(Boolean);
}

/** The rated cost rows of this service by day: [{day, <mode>: row}] and the modes seen. */
function byDay(rows) {
  const days = new Map();
  const seen = new Set();
  for (const row of rows) {
    const mode = row.billing_mode ?? "–";
    seen.add(mode);
    if (!days.has(row.day)) days.set(row.day, { day: row.day });
    days.get(row.day)[mode] = row;
  }
  const modes = [...MODES.filter((m) => seen.has(m)), ...[...seen].filter((m) => !MODES.includes(m)).sort()];
  return { days: [...days.values()].sort((a, b) => a.day.localeCompare(b.day)), modes };
}

async function serviceView({ path, params, go, extent }) {
  const uid = decodeURIComponent(path[1]);
  let svc;
  try {
    svc = await getJson(`v1/services/${encodeURIComponent(uid)}`);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    return section(`Service ${uid}`, live("service",
      h("p", {}, h("a", { href: "#/services" }, "All services")),
      h("p", { class: "warn", id: "not-found", role: "status" },
        `No service or notebook “${uid}” is visible to this token (it does not exist, is a training job, or belongs to another workspace). `,
        `The API said: ${error.message}.`)));
  }
  const name = serviceKey(svc);
  const history = svc.replica_history ?? [];
  const win = params.from || params.to || params.preset ? windowOf(params, extent) : lifeWindow(history, extent);
  const form = windowControls({
    prefix: "v", label: "Window", params, window: win, extent,
    submit: (w) => go(w),
  });
  if (!win.preset && !params.from && !params.to) {
    // the default window, the service's life, shown as the inputs' placeholders
    if (win.from) form.elements["v-from"].placeholder = instant(win.from);
    if (win.to) form.elements["v-to"].placeholder = instant(win.to);
  }
  const query = { from: win.from, to: win.to, source: "rated" };
  // a service's cost is the report's by `service` (its namespace/name); a notebook has no
  // such key (it is "-" there): its own is the report's by `job` (its uid)
  const [key, value] = svc.framework === "service" ? ["service", name] : ["job", svc.job_uid];
  const [perDay, whole] = await Promise.all([
    getAll("v1/cost", { ...query, group_by: `${key},day,billing_mode` }),
    getAll("v1/cost", { ...query, group_by: key }),
  ]);
  const mine = perDay.items.filter((r) => r[key] === value);
  const total = whole.items.find((r) => r[key] === value);
  const width = Math.max(480, Math.min(1200, (document.getElementById("main")?.clientWidth ?? 1000) - 32));

  const perReplica = (svc.replicas ?? [])[0]?.per_replica ?? 1;
  const points = steps(history, svc.occupied_history ?? [], win);
  const replicaPart = [live("replica-table", h("p", { class: "empty" }, `No change of ${name}'s replicas ${windowText(win)}.`))];
  if (points.length) {
    const figure = replicaChart(points, perReplica, win, width, name);
    figure.dataset.live = "replica-chart";
    figure.dataset.sig = digest(JSON.stringify([points, win]));
    replicaPart.splice(0, 1, figure, live("replica-table", h("details", { open: true }, h("summary", {}, `Data table (${points.length} rows)`),
      table({ id: "replicas", caption: `Desired and occupied replicas of ${name}, ${windowText(win)}: each change and the counts from then on`, columns: stepColumns(perReplica), rows: points }))));
  }

  const { days, modes } = byDay(mine);
  const costColumns = [
    { key: "day", label: "day (UTC)" },
    ...modes.map((mode) => ({ key: mode, label: MODE_TEXT[mode] ?? mode, numeric: true, render: (d) => money(d[mode]) })),
  ];
  const costParts = [live("cost-table", h("p", { class: "empty" }, `No cost of ${name} ${windowText(win)}.`))];
  if (days.length) {
    const figure = costChart(days, modes, width, name);
    figure.dataset.live = "cost-chart";
    figure.dataset.sig = digest(JSON.stringify([days, modes]));
    costParts.splice(0, 1, figure, live("cost-table", table({
      id: "service-cost", caption: `Rated cost of ${name} per day and billing mode, ${windowText(win)}`, columns: costColumns, rows: days,
      csv: { path: "v1/cost", params: { ...query, group_by: `${key},day,billing_mode` }, filename: `cost-by-${key}-day-mode.csv`, label: `Download CSV (all ${key}s)` },
    })));
  }
  const cut = perDay.complete && whole.complete ? null : h("p", { class: "warn" }, "Only part of the cost report was read: narrow the window.");
  return section(`${svc.framework === "notebook" ? "Notebook" : "Service"} ${name}`, live("service",
    h("p", {}, h("a", { href: `#/services${svc.framework === "notebook" ? "?list=notebooks" : ""}` }, svc.framework === "notebook" ? "All notebooks" : "All services"),
      " · ", h("a", { href: `#/job/${encodeURIComponent(svc.job_uid)}` }, "its job page (audit timeline, occupied resources)"),
      ` · uid ${svc.job_uid}`),
    facts(svc)),
  form,
  h("h3", {}, "Replicas over time: desired and occupied"), ...replicaPart,
  h("h3", {}, "Cost per day (rated)"),
  live("cost-total", h("p", { class: "headline", id: "service-cost-total" }, `Rated cost ${windowText(win)}: `,
    h("strong", { "data-key": "total" }, money(total))), cut),
  ...costParts);
}
