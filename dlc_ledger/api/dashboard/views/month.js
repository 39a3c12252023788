// #/month: the month-to-date headline a finance person reads first, per workspace: the
// cost so far this month, the forecast to the month's end from the run rate, the budget
// with how much is left and its state, and beside them what the workspace's subscribed
// capacity cost this month (prepaid: recognised revenue attributed by guarantee) — as
// `/v1/month-to-date?with_prepaid=true` computes them, at an instant (default: the latest
// with data).

import { getAll } from "../api.js";
import { h, live, readTimes, section, table, timeField } from "../dom.js";
import { instant, money } from "../format.js";
import { latest } from "../window.js";

function controls(params, extent, go) {
  const hint = latest(extent) ? `latest: ${instant(latest(extent))}` : "now";
  const form = h("form", { class: "controls", "aria-label": "Instant", noValidate: true },
    timeField("m-at", "As at", params.at, hint), h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const times = readTimes(form, ["m-at"]);
    if (times) go({ at: times["m-at"] });
  });
  return form;
}

const budgetOf = (r, key) => (r.budget ? money(r.budget, key) : "–");

function card(r) {
  const state = r.budget?.state ?? "no budget";
  return h("article", { class: `card state-${String(state).replace(/[^a-z]+/gi, "-")}`, "data-workspace": r.workspace, "aria-label": r.workspace },
    h("h3", {}, r.workspace, " · ", r.month),
    h("dl", { class: "facts" },
      h("dt", {}, "cost so far"), h("dd", { "data-key": "cost" }, money(r, "cost")),
      h("dt", {}, "prepaid (subscriptions)"), h("dd", { "data-key": "prepaid" }, money(r, "prepaid")),
      h("dt", {}, "forecast to month end"), h("dd", { "data-key": "forecast" }, money(r, "forecast")),
      h("dt", {}, "budget"), h("dd", { "data-key": "budget" }, budgetOf(r, "limit")),
      h("dt", {}, "left"), h("dd", { "data-key": "left" }, budgetOf(r, "left")),
      h("dt", {}, "state"), h("dd", { "data-key": "state" }, state)));
}

export async function monthView({ params, go, extent }) {
  const at = params.at || latest(extent) || undefined;
  const { items, body } = await getAll("v1/month-to-date", { at, with_prepaid: true });
  const asOf = items[0]?.as_of ?? body?.at ?? at;
  const columns = [
    { key: "workspace", label: "workspace" }, { key: "month", label: "month" },
    { key: "cost", label: "cost so far", numeric: true, render: (r) => money(r, "cost") },
    { key: "prepaid", label: "prepaid (subscriptions)", numeric: true, render: (r) => money(r, "prepaid") },
    { key: "forecast", label: "forecast to month end", numeric: true, render: (r) => money(r, "forecast") },
    { key: "budget", label: "budget", numeric: true, render: (r) => budgetOf(r, "limit") },
    { key: "left", label: "left", numeric: true, render: (r) => budgetOf(r, "left") },
    { key: "state", label: "state", render: (r) => r.budget?.state ?? "no budget" },
  ];
  return section("Month to date", controls(params, extent, go), live("month",
    h("p", { class: "note" }, `Cost from the month's start to ${asOf ? instant(asOf) : "now"}; the forecast extends the month's run rate to its end. Prepaid: what the workspace's subscribed capacity cost over the same days (the subscriptions' recognised revenue, shared by guarantee), not billed again.`),
    items.length ? h("ul", { class: "legend", "aria-label": "Card colours" },
      [["state-ok", "within budget"], ["state-exceeded", "budget exceeded"], ["state-no-budget", "no budget"]]
        .map(([cls, text]) => h("li", {}, h("span", { class: `swatch card-swatch ${cls}`, "aria-hidden": "true" }), text))) : null,
    items.length ? h("div", { class: "cards" }, items.map(card)) : null,
    table({ id: "month-to-date", caption: "Month to date per workspace", columns, rows: items, empty: "No cost this month yet." })));
}
