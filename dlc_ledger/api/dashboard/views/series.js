// #/series/<quota>: one quota node's usage over a window at a step (hour or day), per
// flavor a time-series chart (uPlot, vendored) with its data as a table (the chart's
// text alternative) and the server's CSV.

import uPlot from "../vendor/uPlot.esm.js";
import { getAll } from "../api.js";
import { fromInput, h, section, selectField, table, timeField, columnsOf } from "../dom.js";

const LINES = [
  ["used", "#1f5fbf"], ["min", "#2e7d32"], ["max", "#6d6d6d"],
  ["borrowed", "#e08a00"], ["lent", "#7b3fa0"], ["queued", "#c62828"],
];
const DAY = 86400000;

function controls(quotas, quota, params, go) {
  const form = h("form", { class: "controls", "aria-label": "Quota, window and step" },
    selectField("s-quota", "Quota", quotas, quota),
    timeField("s-from", "From", params.from),
    timeField("s-to", "to", params.to),
    selectField("s-step", "Step", ["hour", "day"], params.step),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    go({ from: fromInput(e["s-from"].value), to: fromInput(e["s-to"].value), step: e["s-step"].value },
      `series/${encodeURIComponent(e["s-quota"].value)}`);
  });
  return form;
}

function chart(rows, flavor, width) {
  const xs = rows.map((r) => Date.parse(r.at) / 1000);
  const data = [xs, ...LINES.map(([key]) => rows.map((r) => r[key]))];
  const plot = h("div", { class: "plot", "aria-hidden": "true" });
  const holder = h("figure", { class: "chart", "aria-label": `Usage of ${flavor} over time` }, plot);
  const opts = {
    width, height: 260, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    series: [{ label: "time (UTC)" }, ...LINES.map(([label, stroke]) => ({ label, stroke, width: 2 }))],
    axes: [{}, { label: rows[0]?.unit ?? "", size: 80, labelSize: 20 }],
  };
  // drawn once the figure is in the page (uPlot measures its container)
  requestAnimationFrame(() => new uPlot(opts, data, plot));
  holder.append(h("figcaption", {}, `${flavor}: used, min, max, borrowed, lent and queued at each step (the table below holds the same figures).`));
  return holder;
}

export async function seriesView({ path, params, go }) {
  const { items: nodes, body: tree } = await getAll("v1/quotas/tree", {});
  const quotas = [...new Set(nodes.map((r) => r.quota))];
  const quota = decodeURIComponent(path[1] ?? quotas[0] ?? "");
  const end = params.to || tree.at || new Date().toISOString();
  const start = params.from || new Date(Date.parse(end) - 7 * DAY).toISOString().replace(/\.\d+Z$/, "Z");
  const query = { from: start, to: end, step: params.step || "hour" };
  const form = controls(quotas, quota, { ...params, ...query }, go);
  if (!quota) return section("Usage over time", form, h("p", {}, "No quota tree yet."));
  // one page: the server computes the whole series for every page it answers
  const { items, complete } = await getAll(`v1/quotas/${encodeURIComponent(quota)}/series`, {
    ...query,
    limit: 10000,
  });
  const flavors = [...new Set(items.map((r) => r.flavor))];
  const width = Math.max(480, Math.min(1200, (document.getElementById("main")?.clientWidth ?? 1000) - 32));
  const parts = [];
  for (const flavor of flavors) {
    const rows = items.filter((r) => r.flavor === flavor);
    parts.push(h("h3", {}, `${quota} · ${flavor}`), chart(rows, flavor, width),
      h("details", {}, h("summary", {}, `Data table (${rows.length} rows)`),
        table({ caption: `${quota} ${flavor} at each ${query.step}`, columns: columnsOf(rows), rows,
          csv: { path: `v1/quotas/${encodeURIComponent(quota)}/series`, params: query, filename: `quota-series-${quota}.csv` } })));
  }
  return section(`Usage of ${quota} over time`, form,
    complete ? null : h("p", { class: "warn" }, "Only the first 20,000 points are shown: narrow the window or use step day."),
    ...(parts.length ? parts : [h("p", {}, "No usage in this window.")]));
}
