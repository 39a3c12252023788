// #/subscriptions: the nodes bought by subscription (as of the latest instant with data),
// the resource groups they fill (subscribed against delivered nodes), and "are we using
// what we pay for?" over a window (default: the whole data) by group, month, quota or
// workspace (`/v1/subscriptions`, `/v1/resource-groups`, `/v1/subscription-utilisation`).

import { getAll } from "../api.js";
import { h, live, section, selectField, table, when } from "../dom.js";
import { count, hours, instant, money, quantity, unitName, unitOfKey } from "../format.js";
import { latest, windowControls, windowOf, windowText } from "../window.js";

const GROUPINGS = [["group", "resource group"], ["month", "group and month"], ["quota", "quota"], ["workspace", "workspace"]];

const SUBSCRIPTIONS = [
  { key: "subscription_id", label: "subscription" },
  { key: "workspace", label: "workspace" },
  { key: "group", label: "group" },
  { key: "spec", label: "node spec" },
  { key: "nodes", label: "nodes", numeric: true, render: (r) => count(r.nodes) },
  { key: "term", label: "term", render: (r) => `${r.term}${r.auto_renew ? ", renews" : ""}` },
  { key: "status", label: "status", render: (r) => h("span", { class: `state state-${r.status}` }, r.status) },
  { key: "starts_at", label: "starts", render: (r) => when(r.starts_at) },
  { key: "ends_at", label: "ends", render: (r) => when(r.ends_at) },
  { key: "terms", label: "terms", numeric: true, render: (r) => count(r.terms) },
  { key: "paid", label: "paid", numeric: true, render: (r) => money(r, "paid") },
  { key: "refunded", label: "refunded", numeric: true, render: (r) => money(r, "refunded") },
];

const GROUPS = [
  { key: "group", label: "group" },
  { key: "spec", label: "node spec", render: (r) => r.spec ?? "not bought" },
  { key: "subscribed_nodes", label: "subscribed nodes", numeric: true, render: (r) => count(r.subscribed_nodes) },
  { key: "delivered_nodes", label: "delivered nodes", numeric: true, render: (r) => count(r.delivered_nodes) },
  { key: "capacity", label: "capacity", render: (r) => Object.entries(r.capacity ?? {})
    .map(([k, v]) => `${k} ${quantity(v, unitOfKey(k))} ${unitName(unitOfKey(k))}`).join(", ") || "–" },
  { key: "quotas", label: "drawn on by", render: (r) => (r.quotas ?? []).join(", ") || "–" },
];

/** The utilisation report's columns: its figures in the order it gives them, GPU-hours to
 *  one decimal, money as the API wrote it, the per-GPU-hour price with its currency. */
function utilisationColumns(rows) {
  const keys = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!keys.includes(key)) keys.push(key);
  const hidden = (k) => k.endsWith("_minor") || k === "scale" || k === "currency";
  return keys.filter((k) => !hidden(k)).map((key) => {
    if (key.endsWith("_gpu_hours")) return { key, label: key.replace(/_gpu_hours$/, " GPU-hours").replaceAll("_", " "), numeric: true, render: (r) => hours(r[key]) };
    if (key.endsWith("_display")) return { key, label: key.replace(/_display$/, "").replaceAll("_", " "), numeric: true };
    if (key === "cost_per_used_gpu_hour") return { key, label: "cost per used GPU-hour", numeric: true, render: (r) => (r[key] === null || r[key] === undefined ? "–" : `${r[key]} ${r.currency}`) };
    return { key, label: key.replaceAll("_", " "), numeric: key === "utilisation" };
  });
}

export async function subscriptionsView({ params, go, extent }) {
  const win = windowOf(params, extent, "all");
  const at = latest(extent) || undefined;
  const by = GROUPINGS.some(([k]) => k === params.by) ? params.by : "group";
  const [subs, groups, use] = await Promise.all([
    getAll("v1/subscriptions", { at }),
    getAll("v1/resource-groups", { at }),
    getAll("v1/subscription-utilisation", { from: win.from, to: win.to, group_by: by }),
  ]);
  const form = windowControls({
    prefix: "u", label: "Utilisation window", params, window: win, extent,
    fields: [selectField("u-by", "By", GROUPINGS, by)],
    submit: (w, f) => go({ ...w, by: f.elements["u-by"].value }),
  });
  const asOf = subs.body?.at ?? at;
  return section("Subscriptions", form, live("subscriptions",
    h("h3", {}, `Subscriptions as of ${asOf ? instant(asOf) : "now"}`),
    table({ id: "subscriptions", caption: "Nodes bought for a month or a year", columns: SUBSCRIPTIONS, rows: subs.items,
      csv: { path: "v1/subscriptions", params: { at }, filename: "subscriptions.csv" }, empty: "No subscription." }),
    h("h3", {}, `Are we using what we pay for? ${windowText(win)}`),
    table({ id: "utilisation", caption: `Subscribed, used, lent and idle GPU-hours by ${GROUPINGS.find(([k]) => k === by)[1]}`,
      columns: utilisationColumns(use.items), rows: use.items,
      csv: { path: "v1/subscription-utilisation", params: { from: win.from, to: win.to, group_by: by }, filename: `subscription-utilisation-${by}.csv` },
      empty: "No subscribed capacity in this window." }),
    h("h3", {}, "Resource groups"),
    table({ id: "resource-groups", caption: "Subscribed against delivered nodes per group", columns: GROUPS, rows: groups.items,
      csv: { path: "v1/resource-groups", params: { at }, filename: "resource-groups.csv" } })));
}
