// #/quotas: the quota tree at an instant (default: the latest with data), per flavor a
// table whose rows are the nodes (tree order, indented) with the stacked bar and the
// figures in GPUs, cores or GiB, each node's use as a share of its guarantee and its max,
// and the roots' totals. With a window (typed or a preset) the bars and figures are the
// average and peak use over it (each node's series), and one table gives each node's
// GPU-hours and cost over it, once per node.

import { getAll } from "../api.js";
import { bar, legend, windowBar } from "../bars.js";
import { h, live, section, table } from "../dom.js";
import { count, hours, instant, money, quantity, share, unitName } from "../format.js";
import { addDecimals, money as moneyOfMinor } from "../numbers.js";
import { latest, seriesStep, windowControls, windowOf, windowText } from "../window.js";

const AT = [["used", "used"], ["min", "min"], ["max", "max"], ["borrowed", "borrowed"], ["lent", "lent"], ["lendable", "lendable"],
  ["available", "available"], ["queued", "queued"], ["over_admitted", "over-admitted"]];
const JOBS = [["pending_jobs", "pending jobs"], ["running_jobs", "running jobs"]];

function depths(items) {
  // depth below the top node shown (a scoped token sees a subtree, not the root)
  const parents = new Map(items.map((r) => [r.quota, r.parent]));
  const depth = (q, seen = 0) => (parents.has(parents.get(q)) && seen < 32 ? 1 + depth(parents.get(q), seen + 1) : 0);
  return new Map(items.map((r) => [r.quota, depth(r.quota)]));
}

/** The top nodes shown: the roots, or for a token scoped to a subtree, the nodes whose
 *  parent it does not see (an inner node's figures already hold its subtree). */
export function topNodes(rows) {
  const shown = new Set(rows.map((r) => r.quota));
  return rows.filter((r) => !r.parent || !shown.has(r.parent));
}

/** {average, peak} of each quota x flavor's `used` over the window's points (`to` excluded). */
export function windowUse(series, from, to) {
  const start = from ? Date.parse(from) : -Infinity;
  const end = to ? Date.parse(to) : Infinity;
  const out = new Map();
  for (const p of series) {
    const t = Date.parse(p.at);
    if (t < start || t >= end) continue;
    const key = `${p.quota}\u0000${p.flavor}`;
    const acc = out.get(key) ?? { sum: 0, n: 0, peak: 0 };
    acc.sum += p.used;
    acc.n += 1;
    acc.peak = Math.max(acc.peak, p.used);
    out.set(key, acc);
  }
  return new Map([...out].map(([k, { sum, n, peak }]) => [k, { average: sum / n, peak }]));
}

function quotaCell(depth) {
  return (r) => h("span", { class: `depth-${Math.min(depth.get(r.quota) ?? 0, 6)}` },
    h("a", { href: `#/series/${encodeURIComponent(r.quota)}`, title: `${r.quota}: usage over time` }, r.quota));
}

function instantColumns(depth) {
  const q = (key) => (r) => quantity(r[key], r.unit);
  return [
    { key: "quota", label: "Quota", render: quotaCell(depth) },
    { key: "bar", label: "Use", render: (r) => bar(r, h) },
    { key: "used", label: "used", numeric: true, render: q("used") },
    { key: "of_min", label: "% of min", numeric: true, render: (r) => share(r.used, r.min) },
    { key: "of_max", label: "% of max", numeric: true, render: (r) => share(r.used, r.max) },
    ...AT.slice(1).map(([key, label]) => ({ key, label, numeric: true, render: q(key) })),
    ...JOBS.map(([key, label]) => ({ key, label, numeric: true, render: (r) => count(r[key]) })),
  ];
}

function windowColumns(depth, use) {
  const of = (r) => use.get(`${r.quota}\u0000${r.flavor}`) ?? { average: 0, peak: 0 };
  return [
    { key: "quota", label: "Quota", render: quotaCell(depth) },
    { key: "bar", label: "Average and peak use", render: (r) => windowBar(r, of(r).average, of(r).peak, h) },
    { key: "average", label: "average", numeric: true, render: (r) => quantity(of(r).average, r.unit) },
    { key: "of_min", label: "% of min", numeric: true, render: (r) => share(of(r).average, r.min) },
    { key: "of_max", label: "% of max", numeric: true, render: (r) => share(of(r).average, r.max) },
    { key: "peak", label: "peak", numeric: true, render: (r) => quantity(of(r).peak, r.unit) },
    { key: "peak_of_max", label: "peak % of max", numeric: true, render: (r) => share(of(r).peak, r.max) },
    { key: "min", label: "min", numeric: true, render: (r) => quantity(r.min, r.unit) },
    { key: "max", label: "max", numeric: true, render: (r) => quantity(r.max, r.unit) },
  ];
}

/** The totals row of a flavor's table: the top nodes' sums (their names in the row). */
function totals(rows, use) {
  const tops = topNodes(rows);
  const unit = rows[0]?.unit;
  const sum = (f) => tops.reduce((s, r) => s + f(r), 0);
  const out = { quota: `Total (${tops.map((r) => r.quota).join(", ")})` };
  if (use) {
    const of = (r) => use.get(`${r.quota}\u0000${r.flavor}`) ?? { average: 0, peak: 0 };
    out.average = quantity(sum((r) => of(r).average), unit);
    out.peak = tops.length === 1 ? quantity(of(tops[0]).peak, unit) : "–"; // peaks of several need not coincide
    out.min = quantity(sum((r) => r.min), unit);
    out.max = quantity(sum((r) => r.max), unit);
  } else {
    for (const [key] of AT) out[key] = quantity(sum((r) => r[key]), unit);
    for (const [key] of JOBS) out[key] = count(sum((r) => r[key]));
    out.of_min = share(sum((r) => r.used), sum((r) => r.min));
    out.of_max = share(sum((r) => r.used), sum((r) => r.max));
  }
  return out;
}

/** GPU-hours and cost over the window, once per node (the tree repeats them per flavor). */
function costTable(items, depth, win) {
  const seen = new Set();
  const rows = items.filter((r) => !seen.has(r.quota) && seen.add(r.quota));
  const tops = topNodes(rows);
  const footer = { quota: `Total (${tops.map((r) => r.quota).join(", ")})` };
  footer.gpu_hours = hours(addDecimals(tops.map((r) => r.gpu_hours)));
  const currencies = new Set(tops.filter((r) => r.currency).map((r) => r.currency));
  if (tops.length === 1) footer.cost = money(tops[0]);
  else if (currencies.size === 1) {
    const priced = tops.filter((r) => r.currency);
    footer.cost = moneyOfMinor(priced.reduce((s, r) => s + BigInt(r.cost_minor ?? 0), 0n), priced[0].scale, priced[0].currency);
  } else footer.cost = currencies.size ? "several currencies" : "–";
  return table({
    id: "tree-cost",
    caption: `GPU-hours and cost ${windowText(win)} (each node: its subtree)`,
    columns: [
      { key: "quota", label: "Quota", render: quotaCell(depth) },
      { key: "gpu_hours", label: "GPU-hours", numeric: true, render: (r) => hours(r.gpu_hours) },
      { key: "cost", label: "cost", numeric: true, render: (r) => money(r) },
    ],
    rows, footer,
    csv: { path: "v1/quotas/tree", params: { at: items[0]?.at, from: win.from, to: win.to }, filename: "quotas-tree.csv" },
  });
}

async function seriesOf(quotas, win) {
  const step = seriesStep(win);
  const pages = await Promise.all(quotas.map((q) =>
    getAll(`v1/quotas/${encodeURIComponent(q)}/series`, { from: win.from, to: win.to, step, limit: 10000 })));
  return { items: pages.flatMap((p) => p.items), complete: pages.every((p) => p.complete), step };
}

export async function quotasView({ params, go, extent }) {
  const win = windowOf(params, extent);
  const windowed = Boolean(win.from || win.to);
  const last = latest(extent);
  const at = params.at || (windowed && win.to && (!last || win.to < last) ? win.to : last) || undefined;
  const query = { at, from: win.from, to: win.to };
  const { items, complete, body: tree } = await getAll("v1/quotas/tree", query);
  const depth = depths(items);
  const quotas = [...new Set(items.map((r) => r.quota))];
  const series = windowed ? await seriesOf(quotas, win) : null;
  const use = series ? windowUse(series.items, win.from, win.to) : null;
  const flavors = [...new Set(items.map((r) => r.flavor))];
  const columns = use ? windowColumns(depth, use) : instantColumns(depth);
  const tables = flavors.map((flavor) => {
    const rows = items.filter((r) => r.flavor === flavor);
    return table({
      id: `tree-${flavor.replace(/[^a-z0-9]+/gi, "-")}`,
      caption: `Flavor ${flavor} (${unitName(rows[0]?.unit) || "no unit"})`,
      columns, rows, footer: totals(rows, use),
      csv: { path: "v1/quotas/tree", params: query, filename: "quotas-tree.csv" },
    });
  });
  const heading = use
    ? `Quota use ${windowText(win)}`
    : `Quota tree at ${tree.at ? instant(tree.at) : "the latest instant"}`;
  const note = use
    ? `Average and peak of each node's use at each ${series.step} of the window (its series); the tree's min and max at ${instant(tree.at)}.`
    : `${params.at ? "" : "The latest instant with data. "}Pick a window or a preset for average and peak use, GPU-hours and cost.`;
  const form = windowControls({
    prefix: "q", label: "Instant and window", params, window: win, extent, at: "At",
    submit: (w) => go(w),
  });
  return section(heading, form,
    live("tree", legend(h, Boolean(use)),
      complete && (!series || series.complete) ? null : h("p", { class: "warn" }, "Only part of the tree or its series is shown: narrow the window."),
      h("p", { class: "note" }, note, ` ${count(quotas.length)} nodes.`),
      use ? costTable(items, depth, win) : null,
      ...(tables.length ? tables : [h("p", {}, "No quota tree yet.")])));
}
