// #/budgets: every budget in force at an instant (default: the latest with data) with
// what its workspace spent in the period, what is left and its state, as `/v1/budgets`
// computes them (`dlc-ledger budgets show`).

import { getAll } from "../api.js";
import { h, live, readTimes, section, table, timeField, when } from "../dom.js";
import { instant, money } from "../format.js";
import { latest } from "../window.js";

const COLUMNS = [
  { key: "workspace", label: "workspace" },
  { key: "period", label: "period" },
  { key: "limit", label: "budget", numeric: true, render: (r) => money(r, "limit") },
  { key: "spent", label: "spent", numeric: true, render: (r) => money(r, "spent") },
  { key: "left", label: "left", numeric: true, render: (r) => money(r, "left") },
  { key: "state", label: "state", render: (r) => h("span", { class: `state state-${r.state}` }, r.state ?? "–") },
  { key: "action", label: "on crossing" },
  { key: "since", label: "in force since", render: (r) => when(r.since) },
];

export async function budgetsView({ params, go, extent }) {
  const at = params.at || latest(extent) || undefined;
  const { items, body } = await getAll("v1/budgets", { at });
  const hint = latest(extent) ? `latest: ${instant(latest(extent))}` : "now";
  const form = h("form", { class: "controls", "aria-label": "Instant", noValidate: true },
    timeField("b-at", "As at", params.at, hint), h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const times = readTimes(form, ["b-at"]);
    if (times) go({ at: times["b-at"] });
  });
  const asOf = body?.at ?? at;
  return section("Budgets", form, live("budgets",
    h("p", { class: "note" }, "Budgets are applied with ", h("code", {}, "dlc-ledger budgets apply FILE"),
      `; spent is the posted cost of the period up to ${asOf ? instant(asOf) : "now"}.`),
    table({ id: "budgets", caption: "Budgets in force, with what was spent and what is left", columns: COLUMNS, rows: items,
      csv: { path: "v1/budgets", params: { at }, filename: "budgets.csv" }, empty: "No budget is in force." })));
}
