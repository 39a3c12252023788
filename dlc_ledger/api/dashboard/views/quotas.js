// #/quotas: the quota tree at an instant, per flavor a table whose rows are the nodes
// (tree order, indented) with the stacked bar beside the figures, and the roots' totals.
// With a window, each node's GPU-hours and cost over it.

import { getAll } from "../api.js";
import { bar, legend } from "../bars.js";
import { fromInput, h, num, section, table, timeField, when } from "../dom.js";
import { addDecimals, money } from "../numbers.js";

const FIGURES = ["min", "max", "used", "borrowed", "lent", "lendable", "available",
  "over_admitted", "queued", "pending_jobs", "running_jobs"];

function depths(items) {
  // depth below the top node shown (a scoped token sees a subtree, not the root)
  const parents = new Map(items.map((r) => [r.quota, r.parent]));
  const depth = (q, seen = 0) => (parents.has(parents.get(q)) && seen < 32 ? 1 + depth(parents.get(q), seen + 1) : 0);
  return new Map(items.map((r) => [r.quota, depth(r.quota)]));
}

/** The top nodes' sums per figure (an inner node's figures hold its subtree): the roots,
 *  or for a token scoped to a subtree, the nodes whose parent it does not see. */
export function rootTotals(rows) {
  const shown = new Set(rows.map((r) => r.quota));
  const roots = rows.filter((r) => !r.parent || !shown.has(r.parent));
  const totals = { quota: `Total (${roots.map((r) => r.quota).join(", ")})` };
  for (const key of FIGURES) totals[key] = roots.reduce((sum, r) => sum + (r[key] ?? 0), 0);
  if (roots.some((r) => "gpu_hours" in r)) {
    totals.gpu_hours = addDecimals(roots.map((r) => r.gpu_hours));
    const priced = roots.filter((r) => r.currency);
    const currencies = new Set(priced.map((r) => r.currency));
    if (currencies.size === 1) {
      const { currency, scale } = priced[0];
      totals.cost_display = money(priced.reduce((s, r) => s + BigInt(r.cost_minor), 0n), scale, currency);
    } else totals.cost_display = currencies.size ? "several currencies" : "–";
  }
  return totals;
}

function controls(params, go) {
  const form = h("form", { class: "controls", "aria-label": "Instant and window" },
    timeField("q-at", "At", params.at),
    timeField("q-from", "GPU-hours and cost from", params.from),
    timeField("q-to", "to", params.to),
    h("button", { type: "submit" }, "Show"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go({ at: fromInput(form.elements["q-at"].value), from: fromInput(form.elements["q-from"].value),
      to: fromInput(form.elements["q-to"].value) });
  });
  return form;
}

export async function quotasView({ params, go }) {
  const query = { at: params.at, from: params.from, to: params.to };
  const { items, complete, body: tree } = await getAll("v1/quotas/tree", query);
  const depth = depths(items);
  const windowed = items.some((r) => "gpu_hours" in r);
  const flavors = [...new Set(items.map((r) => r.flavor))];
  const columns = [
    { key: "quota", label: "Quota", render: (r) => h("span", { class: `depth-${Math.min(depth.get(r.quota) ?? 0, 6)}` },
      h("a", { href: `#/series/${encodeURIComponent(r.quota)}`, title: `${r.quota}: usage over time` }, r.quota)) },
    { key: "bar", label: "Usage", render: (r) => bar(r, r.unit, h) },
    ...FIGURES.map((key) => ({ key, label: key.replaceAll("_", " "), numeric: true })),
    ...(windowed ? [{ key: "gpu_hours", label: "GPU-hours", numeric: true },
      { key: "cost_display", label: "cost", numeric: true }] : []),
  ];
  const tables = flavors.map((flavor) => {
    const rows = items.filter((r) => r.flavor === flavor);
    const unit = rows[0]?.unit ? ` (${rows[0].unit})` : "";
    return table({
      id: `tree-${flavor.replace(/[^a-z0-9]+/gi, "-")}`,
      caption: `Flavor ${flavor}${unit}`,
      columns,
      rows,
      footer: rootTotals(rows),
      csv: { path: "v1/quotas/tree", params: query, filename: "quotas-tree.csv" },
    });
  });
  const title = `Quota tree at ${tree.at ? when(tree.at) : "the latest instant"}`;
  const windowText = windowed
    ? `GPU-hours and cost from ${params.from ? when(params.from) : "the start"} to ${params.to ? when(params.to) : "now"}.`
    : "Pick a window for GPU-hours and cost.";
  return section(title, controls(params, go), legend(h),
    complete ? null : h("p", { class: "warn" }, "Only the first 20,000 rows of the tree are shown."),
    h("p", {}, windowText,
    ` ${num(items.length)} node × flavor rows.`), ...(tables.length ? tables : [h("p", {}, "No quota tree yet.")]));
}
