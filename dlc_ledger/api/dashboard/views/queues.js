// #/queues/<quota>?at&from&to: a quota's pending queue in dispatch order (its subtree's,
// for an inner node) and its depth per flavor at an instant (default: the latest with
// data); the waits and preemptions reports over a window (typed or a preset).

import { getAll, getJson } from "../api.js";
import { h, live, section, selectField, table, when } from "../dom.js";
import { count, duration, hours, instant, money, quantity, request, unitName } from "../format.js";
import { latest, windowControls, windowOf, windowText } from "../window.js";

function jobLink(uid, label, at) {
  const query = at ? `?at=${encodeURIComponent(at)}` : "";
  return h("a", { href: `#/job/${encodeURIComponent(uid)}${query}`, title: `uid ${uid}` }, label || uid);
}

const DEPTH = [
  { key: "flavor", label: "flavor" },
  { key: "queued", label: "queued", numeric: true, render: (r) => `${quantity(r.queued, r.unit)} ${unitName(r.unit)}` },
  { key: "pending_jobs", label: "pending jobs", numeric: true, render: (r) => count(r.pending_jobs) },
];

function queueColumns(at) {
  return [
    { key: "position", label: "#", numeric: true },
    { key: "job_uid", label: "job", render: (r) => jobLink(r.job_uid, r.name, at) },
    { key: "workspace", label: "workspace" },
    { key: "quota", label: "quota" },
    { key: "priority", label: "priority", numeric: true, render: (r) => (r.effective_priority !== r.priority ? `${r.priority} (aged ${r.effective_priority})` : String(r.priority)) },
    { key: "request", label: "request", render: (r) => request(r.request) },
    { key: "waited_seconds", label: "waited", numeric: true, render: (r) => duration(r.waited_seconds) },
    { key: "reason", label: "reason" },
    { key: "estimated_start", label: "estimated start", render: (r) => (r.estimated_start ? when(r.estimated_start) : `– (${r.estimate_basis ?? "no estimate"})`) },
    { key: "cohort_position", label: "in the tree", numeric: true },
  ];
}

const WAITS = [
  { key: "quota", label: "quota" }, { key: "priority", label: "priority", numeric: true },
  { key: "waits", label: "waits", numeric: true }, { key: "requeued", label: "requeued", numeric: true },
  { key: "waiting", label: "still waiting", numeric: true }, { key: "withdrawn", label: "withdrawn", numeric: true },
  ...["p50_s", "p95_s", "max_s", "mean_s"].map((key) => ({ key, label: key.replace("_s", ""), numeric: true, render: (r) => duration(r[key]) })),
];

const PREEMPTIONS = [
  { key: "at", label: "at", render: (r) => when(r.at) },
  { key: "victim_uid", label: "victim", render: (r) => jobLink(r.victim_uid, r.victim) },
  { key: "victim_quota", label: "its quota" },
  { key: "preemptor_uid", label: "preempted by", render: (r) => jobLink(r.preemptor_uid, r.preemptor) },
  { key: "preemptor_quota", label: "their quota" },
  { key: "reason", label: "reason" },
  { key: "gpu_hours_lost", label: "GPU-hours lost", numeric: true, render: (r) => hours(r.gpu_hours_lost) },
  { key: "lost_cost", label: "cost lost", numeric: true, render: (r) => money(r, "lost_cost") },
];

export async function queuesView({ path, params, go, extent }) {
  const at = params.at || latest(extent) || undefined;
  const win = windowOf(params, extent);
  const { items: nodes, body: tree } = await getAll("v1/quotas/tree", { at });
  const quotas = [...new Set(nodes.map((r) => r.quota))];
  const quota = decodeURIComponent(path[1] ?? quotas[0] ?? "");
  const form = windowControls({
    prefix: "w", label: "Quota, instant and window", params, window: win, extent, at: "Queue at",
    fields: [selectField("w-quota", "Queue of", quotas, quota)],
    submit: (w, f) => go(w, `queues/${encodeURIComponent(f.elements["w-quota"].value)}`),
  });
  const parts = [];
  if (quota) {
    const shownAt = tree.at ? instant(tree.at) : "now";
    const queue = await getJson(`v1/queues/${encodeURIComponent(quota)}`, { at, limit: 100 });
    parts.push(h("h3", {}, `Queue of ${quota} at ${shownAt}`),
      table({
        id: "queue-depth", caption: `Queued demand and pending jobs of ${quota} per flavor`, columns: DEPTH,
        rows: nodes.filter((r) => r.quota === quota),
        csv: { path: "v1/quotas/tree", params: { at }, filename: "quotas-tree.csv" },
      }),
      table({
        id: "queue", caption: `Pending jobs of ${quota} in queue order${queue.next_cursor ? " (the first 100)" : ""}`,
        columns: queueColumns(params.at), rows: queue.items,
        csv: { path: `v1/queues/${encodeURIComponent(quota)}`, params: { at }, filename: `queue-${quota}.csv` },
        empty: "No job waits in this queue.",
      }));
  }
  const windowParams = { from: win.from, to: win.to };
  const [waits, preemptions] = await Promise.all([getAll("v1/waits", windowParams), getAll("v1/preemptions", windowParams)]);
  parts.push(h("h3", {}, `Waits ${windowText(win)}`), table({
    id: "waits", caption: "Waits from submission (or preemption) to admission, per quota and priority",
    columns: WAITS, rows: waits.items, csv: { path: "v1/waits", params: windowParams, filename: "waits.csv" },
  }), h("h3", {}, `Preemptions ${windowText(win)}`), table({
    id: "preemptions", caption: "Who preempted whom, why, and what it lost", columns: PREEMPTIONS, rows: preemptions.items,
    csv: { path: "v1/preemptions", params: windowParams, filename: "preemptions.csv" }, empty: "No preemption in this window.",
  }));
  return section(`Queues and waits${quota ? `: ${quota}` : ""}`, form, live("queues", ...parts));
}
