// #/cost: the top N jobs (or users, quotas, workspaces) by cost over a window, computed by
// the server in one request (`/v1/cost/top`), with the window's total as the server gives
// it; and the cost by workspace and month (`/v1/cost`) with, beside it, what each
// workspace's subscribed capacity cost (`with_prepaid`). No total is added up here.

import { getAll, getJson } from "../api.js";
import { h, live, section, selectField, table } from "../dom.js";
import { count, hours, money } from "../format.js";
import { windowControls, windowOf, windowText } from "../window.js";
import { jobColumns } from "./jobs.js";

const BY = [["job", "jobs"], ["user", "users"], ["quota", "quotas"], ["workspace", "workspaces"]];
const SIZES = ["10", "20", "50", "100"];

function topColumns(by) {
  const figures = [
    { key: "gpu_hours", label: "GPU-hours", numeric: true, render: (r) => hours(r.gpu_hours) },
    { key: "cost", label: "cost", numeric: true, render: (r) => money(r) },
  ];
  if (by === "job") return jobColumns(null, "job");
  return [{ key: by, label: by }, ...figures];
}

export async function costView({ params, go, extent }) {
  const win = windowOf(params, extent);
  const by = BY.some(([k]) => k === params.by) ? params.by : "job";
  const n = SIZES.includes(params.n) ? params.n : "20";
  const query = { from: win.from, to: win.to };
  const [top, byMonth] = await Promise.all([
    getJson("v1/cost/top", { ...query, by, n }),
    getAll("v1/cost", { ...query, group_by: "workspace,month", with_prepaid: true }),
  ]);
  const form = windowControls({
    prefix: "c", label: "Cost window", params, window: win, extent,
    fields: [selectField("c-by", "Top", BY, by), selectField("c-n", "How many", SIZES, n)],
    submit: (w, f) => go({ ...w, by: f.elements["c-by"].value, n: f.elements["c-n"].value }),
  });
  const what = BY.find(([k]) => k === by)[1];
  const total = top.total ?? {};
  const monthColumns = [
    { key: "workspace", label: "workspace" }, { key: "month", label: "month" },
    { key: "cost", label: "cost", numeric: true, render: (r) => money(r) },
    { key: "prepaid", label: "prepaid (subscriptions)", numeric: true, render: (r) => money(r, "prepaid") },
  ];
  return section("Cost", form, live("cost",
    h("p", { class: "headline", id: "cost-total" },
      "Total ", windowText(win), ": ", h("strong", { "data-key": "total" }, money(total)),
      total.gpu_hours !== undefined ? ` · ${hours(total.gpu_hours)} GPU-hours` : "",
      ` · ${count(top.count)} ${what}`),
    h("h3", {}, `Top ${n} ${what} by cost`),
    table({
      id: "top-cost",
      caption: `The ${top.items.length} costliest of ${count(top.count)} ${what}, ${windowText(win)}`,
      columns: topColumns(by), rows: top.items,
      csv: { path: "v1/cost", params: { ...query, group_by: by === "job" ? "workspace,job" : by }, filename: `cost-by-${by}.csv`,
        label: `Download CSV (all ${what})` },
    }),
    h("h3", {}, "Cost by workspace and month"),
    table({ id: "cost-ws-month", caption: `Cost by workspace and month, ${windowText(win)}`, columns: monthColumns, rows: byMonth.items,
      csv: { path: "v1/cost", params: { ...query, group_by: "workspace,month", with_prepaid: true }, filename: "cost-by-workspace-month.csv" } })));
}
