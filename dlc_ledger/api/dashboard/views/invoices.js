// #/invoices: invoices by period and workspace (filters: status, period, workspace), each
// with what was paid, what is still open and its payment status (open, paid, overdue,
// voided), and #/invoice/<id>: one invoice — its lines, its credit notes, its payments and
// the credit applied to it, whether it was voided and why, and its totals as the ledger
// gives them (`/v1/invoices`, `/v1/invoices/{id}`).

import { getJson } from "../api.js";
import { h, live, section, selectField, table, when } from "../dom.js";
import { count, money } from "../format.js";

function filters(params, go) {
  const form = h("form", { class: "controls", "aria-label": "Invoice filters", noValidate: true },
    selectField("i-status", "Status", [["", "any"], ["issued", "issued"], ["voided", "voided"]], params.status ?? ""),
    h("label", { for: "i-period" }, "Period ", h("input", {
      id: "i-period", value: params.period ?? "", placeholder: "YYYY-MM", size: 8, pattern: String.raw`\d{4}-(0[1-9]|1[0-2])`,
      title: "a month: YYYY-MM" })),
    h("label", { for: "i-workspace" }, "Workspace ", h("input", { id: "i-workspace", value: params.workspace ?? "", size: 14 })),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const period = form.elements["i-period"];
    period.setCustomValidity(period.value.trim() && !/^\d{4}-(0[1-9]|1[0-2])$/.test(period.value.trim())
      ? "A period is a month: YYYY-MM" : "");
    if (!period.reportValidity()) return;
    go({ status: form.elements["i-status"].value, period: period.value.trim(), workspace: form.elements["i-workspace"].value.trim() });
  });
  return form;
}

const LIST = [
  { key: "invoice_id", label: "invoice", render: (r) => h("a", { href: `#/invoice/${encodeURIComponent(r.invoice_id)}`, title: r.invoice_id }, `${r.workspace} ${r.period}`) },
  { key: "status", label: "status", render: (r) => h("span", { class: `state state-${r.payment_status ?? r.status}` }, r.payment_status ?? r.status) },
  { key: "total", label: "total", numeric: true, render: (r) => money(r, "total") },
  { key: "credited", label: "credited", numeric: true, render: (r) => money(r, "credited") },
  { key: "paid", label: "paid", numeric: true, render: (r) => money(r, "paid") },
  { key: "open", label: "open", numeric: true, render: (r) => money(r, "open") },
  { key: "line_count", label: "lines", numeric: true, render: (r) => count(r.line_count) },
  { key: "issued_at", label: "issued", render: (r) => when(r.issued_at) },
];

export async function invoicesView({ params, go }) {
  const query = { status: params.status, period: params.period, workspace: params.workspace, limit: 100, cursor: params.cursor };
  const page = await getJson("v1/invoices", query);
  const pager = h("nav", { class: "pager", "aria-label": "Pages", "data-next": page.next_cursor ?? "" },
    params.cursor ? h("button", { type: "button", onclick: () => history.back() }, "Previous page") : null,
    page.next_cursor ? h("button", { type: "button", onclick: () => go({ ...params, cursor: page.next_cursor }) }, "Next page") : null);
  const which = [params.status, params.period, params.workspace].filter(Boolean).join(", ");
  return section("Invoices", filters(params, go), live("invoices",
    table({ id: "invoices", caption: `Invoices by period and workspace${which ? ` (${which})` : ""}`, columns: LIST, rows: page.items,
      csv: { path: "v1/invoices", params: { ...query, cursor: undefined }, filename: "invoices.csv" }, empty: "No invoice matches." }),
    pager));
}

const LINES = [
  { key: "line_no", label: "#", numeric: true },
  { key: "description", label: "description" },
  { key: "quantity", label: "quantity", numeric: true, render: (r) => `${r.quantity} ${r.unit}` },
  { key: "rate", label: "rate", numeric: true, render: (r) => (r.rate === null || r.rate === undefined ? "–" : `${r.rate} ${r.currency}`) },
  { key: "amount", label: "amount", numeric: true, render: (r) => money(r, "amount") },
  { key: "billing_mode", label: "billing mode" },
  { key: "job_uid", label: "job", render: (r) => (r.job_uid ? h("a", { href: `#/job/${encodeURIComponent(r.job_uid)}` }, r.job_uid) : "–") },
];
const CREDITS = [
  { key: "credit_note_id", label: "credit note" },
  { key: "amount", label: "amount", numeric: true, render: (r) => money(r, "amount") },
  { key: "reason", label: "reason" },
  { key: "recorded_at", label: "recorded", render: (r) => when(r.recorded_at) },
];

const PAYMENTS = [
  { key: "reference", label: "reference" },
  { key: "amount", label: "amount", numeric: true, render: (r) => money(r, "amount") },
  { key: "applied", label: "applied", numeric: true, render: (r) => money(r, "applied") },
  { key: "excess", label: "kept as credit", numeric: true, render: (r) => money(r, "excess") },
  { key: "received_at", label: "received", render: (r) => when(r.received_at) },
];
const APPLIED = [
  { key: "from_invoice_id", label: "from invoice", render: (r) => h("a", { href: `#/invoice/${encodeURIComponent(r.from_invoice_id)}` }, r.from_invoice_id) },
  { key: "amount", label: "amount", numeric: true, render: (r) => money(r, "amount") },
  { key: "occurred_at", label: "applied", render: (r) => when(r.occurred_at) },
];

export async function invoiceView({ path }) {
  const id = decodeURIComponent(path[1] ?? "");
  const inv = await getJson(`v1/invoices/${encodeURIComponent(id)}`);
  const voided = inv.status === "voided";
  const facts = [
    ["invoice", inv.invoice_id], ["workspace", inv.workspace], ["period", inv.period],
    ["status", voided ? `voided: ${inv.void_reason ?? "no reason given"}` : (inv.payment_status ?? inv.status)],
    ["total", money(inv, "total")], ["credited", money(inv, "credited")],
    ["paid", money(inv, "paid")], ["credit applied", money(inv, "applied")], ["open", money(inv, "open")],
    ["issued", when(inv.issued_at)], ["lines", count(inv.line_count)],
  ];
  return section(`Invoice ${inv.workspace} ${inv.period}`, live("invoice",
    h("p", {}, h("a", { href: "#/invoices" }, "All invoices")),
    voided ? h("p", { class: "warn", id: "voided" }, `This invoice was voided: ${inv.void_reason ?? "no reason given"}. Its total is not owed.`) : null,
    inv.payment_status === "overdue" ? h("p", { class: "warn", id: "overdue" }, `Overdue since ${inv.overdue_at}: ${inv.open_display} still open.`) : null,
    h("dl", { class: "facts", id: "invoice-facts" }, facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-key": k }, v)])),
    table({ id: "invoice-lines", caption: "Lines", columns: LINES, rows: inv.lines ?? [],
      footer: { line_no: "Total", amount: money(inv, "total") },
      csv: { path: `v1/invoices/${encodeURIComponent(inv.invoice_id)}`, params: {}, filename: `invoice-${inv.invoice_id}.csv` } }),
    table({ id: "credit-notes", caption: "Credit notes", columns: CREDITS, rows: inv.credit_notes ?? [], empty: "No credit note." }),
    table({ id: "payments", caption: "Payments", columns: PAYMENTS, rows: inv.payments ?? [], empty: "No payment." }),
    table({ id: "credit-applied", caption: "Credit applied from overpayments", columns: APPLIED, rows: inv.credit_applied ?? [], empty: "No credit applied." })));
}
