// #/series/<quota>: one quota node's use over a window (default: the 7 days to the latest
// data) at a step (hour or day), per flavor a time-series chart (uPlot, vendored) in GPUs,
// cores or GiB with its data as a table (the chart's text alternative) and the server's CSV.

import uPlot from "../vendor/uPlot.esm.js";
import { getAll } from "../api.js";
import { h, live, section, selectField, table, when } from "../dom.js";
import { count, instant, quantity, scaled, unitName } from "../format.js";
import { seriesStep, windowControls, windowOf, windowText } from "../window.js";

const LINES = [
  ["used", "#1f5fbf"], ["min", "#2e7d32"], ["max", "#6d6d6d"],
  ["borrowed", "#e08a00"], ["lent", "#7b3fa0"], ["queued", "#c62828"],
];

/** A short, stable digest of a chart's data: a refresh redraws a chart only when it changed. */
export function digest(text) {
  let hash = 5381;
  for (let i = 0; i < text.length; i += 1) hash = (hash * 33 + text.charCodeAt(i)) | 0;
  return `${text.length}:${hash >>> 0}`;
}

function chart(rows, flavor, width) {
  const unit = rows[0]?.unit;
  const xs = rows.map((r) => Date.parse(r.at) / 1000);
  const data = [xs, ...LINES.map(([key]) => rows.map((r) => scaled(r[key], unit)))];
  const plot = h("div", { class: "plot", "aria-hidden": "true" });
  const holder = h("figure", { class: "chart", "aria-label": `Use of ${flavor} over time` }, plot);
  const stamp = (u, ts) => (ts === null || ts === undefined ? "–" : instant(ts * 1000));
  const opts = {
    // splits on UTC hours and days (uPlot places them in this zone; the labels are ours)
    width, height: 260, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    series: [{ label: "time", value: stamp },
      ...LINES.map(([label, stroke]) => ({ label, stroke, width: 2, value: (u, v) => (v === null ? "–" : v.toFixed(1)) }))],
    axes: [
      // one time format everywhere: the axis writes "2027-03-29 14:05Z", spaced to fit
      { space: 150, values: (u, splits) => splits.map((ts) => instant(ts * 1000)) },
      { label: unitName(unit), size: 70, labelSize: 20 },
    ],
  };
  // drawn once the figure is in the page (uPlot measures its container); a refresh that
  // kept the old chart never attaches this one
  requestAnimationFrame(() => {
    if (plot.isConnected) new uPlot(opts, data, plot);
  });
  holder.append(h("figcaption", {}, `${flavor} in ${unitName(unit)}: used, min, max, borrowed, lent and queued at each step (the table below holds the same figures).`));
  return holder;
}

function dataTable(quota, flavor, rows, query) {
  const q = (key) => (r) => quantity(r[key], r.unit);
  const columns = [
    { key: "at", label: "at", render: (r) => when(r.at) },
    ...LINES.map(([key]) => ({ key, label: key, numeric: true, render: q(key) })),
    { key: "over_admitted", label: "over-admitted", numeric: true, render: q("over_admitted") },
    { key: "pending_jobs", label: "pending jobs", numeric: true, render: (r) => count(r.pending_jobs) },
    { key: "running_jobs", label: "running jobs", numeric: true, render: (r) => count(r.running_jobs) },
  ];
  return table({ id: `series-${flavor.replace(/[^a-z0-9]+/gi, "-")}`, caption: `${quota} ${flavor} at each ${query.step} (${unitName(rows[0]?.unit)})`, columns, rows,
    csv: { path: `v1/quotas/${encodeURIComponent(quota)}/series`, params: query, filename: `quota-series-${quota}.csv` } });
}

export async function seriesView({ path, params, go, extent }) {
  const { items: nodes } = await getAll("v1/quotas/tree", {});
  const quotas = [...new Set(nodes.map((r) => r.quota))];
  const quota = decodeURIComponent(path[1] ?? quotas[0] ?? "");
  const win = windowOf(params, extent, "7d");
  const step = seriesStep(win, params.step);
  const query = { from: win.from, to: win.to, step };
  const form = windowControls({
    prefix: "s", label: "Quota, window and step", params, window: win, extent,
    fields: [selectField("s-quota", "Quota", quotas, quota), selectField("s-step", "Step", ["hour", "day"], step)],
    submit: (w, f) => go({ ...w, step: f.elements["s-step"].value }, `series/${encodeURIComponent(f.elements["s-quota"].value)}`),
  });
  if (!quota) return section("Usage over time", form, live("series", h("p", {}, "No quota tree yet.")));
  // one page: the server computes the whole series for every page it answers
  const { items, complete } = await getAll(`v1/quotas/${encodeURIComponent(quota)}/series`, { ...query, limit: 10000 });
  const flavors = [...new Set(items.map((r) => r.flavor))];
  const width = Math.max(480, Math.min(1200, (document.getElementById("main")?.clientWidth ?? 1000) - 32));
  const parts = [];
  for (const flavor of flavors) {
    const rows = items.filter((r) => r.flavor === flavor);
    const figure = chart(rows, flavor, width);
    figure.dataset.live = `chart-${flavor}`;
    figure.dataset.sig = digest(JSON.stringify(rows));
    parts.push(h("h3", {}, `${quota} · ${flavor}`), figure,
      live(`table-${flavor}`, h("details", {}, h("summary", {}, `Data table (${rows.length} rows)`), dataTable(quota, flavor, rows, query))));
  }
  return section(`Usage of ${quota} ${windowText(win)}`, form,
    live("notes", complete ? null : h("p", { class: "warn" }, "Only part of the series is shown: narrow the window or use step day.")),
    ...(parts.length ? parts : [live("series", h("p", {}, "No usage in this window."))]));
}
