// #/cost: the top jobs by cost over a window (links to their pages) and the cost by
// workspace and month, as /v1/cost reports them.

import { getAll } from "../api.js";
import { columnsOf, fromInput, h, section, selectField, table, timeField } from "../dom.js";
import { money } from "../numbers.js";

const TOP = 20;

function controls(params, go) {
  const form = h("form", { class: "controls", "aria-label": "Cost window" },
    timeField("c-from", "From", params.from), timeField("c-to", "to", params.to),
    selectField("c-source", "Source", [["auto", "auto (ledger where it can)"], ["ledger", "ledger (posted)"],
      ["rated", "rated (to the second)"]], params.source || "auto"),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    go({ from: fromInput(e["c-from"].value), to: fromInput(e["c-to"].value), source: e["c-source"].value === "auto" ? "" : e["c-source"].value });
  });
  return form;
}

/** The rows' cost added in minor units (one currency; else no total). */
function total(rows, label) {
  const currencies = new Set(rows.map((r) => r.currency));
  if (rows.length === 0 || currencies.size !== 1) return undefined;
  const sum = rows.reduce((s, r) => s + BigInt(r.cost_minor), 0n);
  return { [label]: "Total", cost_display: money(sum, rows[0].scale, rows[0].currency) };
}

/** Rows by cost, highest first (minor units compared exactly; ties by job). */
export function topByCost(rows, n = TOP) {
  return [...rows].sort((a, b) => {
    const diff = BigInt(b.cost_minor ?? 0) - BigInt(a.cost_minor ?? 0);
    return diff > 0n ? 1 : diff < 0n ? -1 : String(a.job).localeCompare(String(b.job));
  }).slice(0, n);
}

export async function costView({ params, go }) {
  const query = { from: params.from, to: params.to, source: params.source };
  const [byJob, byWorkspace] = await Promise.all([
    getAll("v1/cost", { ...query, group_by: "workspace,job" }),
    getAll("v1/cost", { ...query, group_by: "workspace,month" }),
  ]);
  const top = topByCost(byJob.items);
  const hidden = (key) => key.endsWith("_minor") || key.endsWith("_precise") || key === "scale" || key === "currency";
  // the job first: it names the row (<th scope="row">) and links to the job's page
  const topColumns = columnsOf(top).filter((c) => !hidden(c.key))
    .sort((a, b) => (b.key === "job") - (a.key === "job")).map((c) =>
    c.key === "job" ? { ...c, render: (r) => h("a", { href: `#/job/${encodeURIComponent(r.job)}` }, r.job) }
      : c.key.endsWith("_display") ? { ...c, numeric: true } : c);
  const wsColumns = columnsOf(byWorkspace.items).filter((c) => !hidden(c.key)).map((c) =>
    c.key.endsWith("_display") ? { ...c, numeric: true } : c);
  return section("Cost", controls(params, go),
    h("h3", {}, `Top ${TOP} jobs by cost`),
    table({ id: "top-jobs", caption: `The ${top.length} costliest of ${byJob.items.length} jobs`, columns: topColumns, rows: top,
      csv: { path: "v1/cost", params: { ...query, group_by: "workspace,job" }, filename: "cost-by-job.csv", label: "Download CSV (all jobs)" } }),
    h("h3", {}, "Cost by workspace and month"),
    table({ id: "cost-ws-month", caption: "Cost by workspace and month", columns: wsColumns, rows: byWorkspace.items,
      footer: total(byWorkspace.items, "workspace"),
      csv: { path: "v1/cost", params: { ...query, group_by: "workspace,month" }, filename: "cost-by-workspace-month.csv" } }));
}
