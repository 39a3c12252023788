// #/notifications: the event centre — the rules as applied (who is told what, where) and
// the latest deliveries with their status, attempts and last error; both scoped to the
// token's workspaces by the API.

import { getJson } from "../api.js";
import { h, live, section, selectField, table, when } from "../dom.js";
import { count } from "../format.js";

const STATUSES = [["", "any"], ["queued", "queued"], ["delivered", "delivered"], ["failed", "failed"]];

function joined(value) {
  if (Array.isArray(value)) return value.join(", ");
  if (value && typeof value === "object") {
    const pairs = Object.entries(value).map(([k, v]) => `${k}=${v}`);
    return pairs.length ? pairs.join(", ") : "–";
  }
  return value ?? "–";
}

function filters(params, go) {
  const form = h("form", { class: "controls", "aria-label": "Delivery filter" },
    selectField("n-status", "Deliveries", STATUSES, params.status ?? ""), h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go({ status: form.elements["n-status"].value });
  });
  return form;
}

export async function notificationsView({ params, go }) {
  const status = params.status;
  const [rules, deliveries] = await Promise.all([
    getJson("v1/notifications/rules", { limit: 500 }),
    getJson("v1/notifications/deliveries", { status, limit: 100 }),
  ]);
  const ruleColumns = ["workspace", "name", "events", "filters", "limits", "target", "enabled"]
    .map((key) => ({ key, label: key, render: (r) => joined(r[key]) }));
  const deliveryColumns = [
    { key: "finished_at", label: "finished", render: (r) => when(r.finished_at) },
    { key: "rule", label: "rule" },
    { key: "event_type", label: "event" },
    { key: "subject", label: "subject" },
    { key: "status", label: "status" },
    { key: "attempts", label: "attempts", numeric: true, render: (r) => count(r.attempts) },
    { key: "latency_ms", label: "latency (ms)", numeric: true, render: (r) => count(r.latency_ms) },
    { key: "last_error", label: "last error" },
  ];
  return section("Notifications", filters(params, go), live("notifications",
    h("p", {}, "Rules are applied with ", h("code", {}, "dlc-ledger notifications apply"),
      " or PUT /v1/notifications/rules/{workspace}/{name}; the sender is ",
      h("code", {}, "dlc-ledger notifications send"), "."),
    h("h3", {}, "Rules"),
    table({
      id: "notification-rules",
      caption: "Who is told what, and where (secrets stay in the sender's environment)",
      columns: ruleColumns,
      rows: rules.items,
      csv: { path: "v1/notifications/rules", params: {}, filename: "notification-rules.csv" },
      empty: "No rule yet.",
    }),
    h("h3", {}, "Latest deliveries"),
    table({
      id: "notification-deliveries",
      caption: `The latest notifications${status ? ` (${status})` : ""}, newest first`,
      columns: deliveryColumns,
      rows: deliveries.items,
      csv: { path: "v1/notifications/deliveries", params: { status }, filename: "notification-deliveries.csv" },
      empty: "Nothing delivered yet.",
    })));
}
