// Small DOM helpers shared by the views: an element builder, number and time formats,
// and the one table every view uses (caption, <th scope>, a CSV button from the server).

import { downloadCsv } from "./api.js";
import { showError } from "./notify.js";

/** h("a", {href: "#/x"}, "text", child) -> element; attributes set as properties where
 *  the DOM has them (class, hidden, disabled...), data-* and aria-* as attributes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role" ||
               key === "for" || key === "scope" || key === "colspan") {
      el.setAttribute(key, value === true ? "" : String(value));
    } else el[key] = value;
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const NUMBER = new Intl.NumberFormat("en-US");

/** An integer or decimal figure as shown in tables (thousands separators). */
export function num(value) {
  if (value === null || value === undefined || value === "") return "–";
  if (typeof value === "number") return NUMBER.format(value);
  if (typeof value === "string" && /^-?\d+(\.\d+)?$/.test(value)) {
    const negative = value.startsWith("-");
    const [whole, frac] = value.replace("-", "").split(".");
    const grouped = NUMBER.format(BigInt(whole));
    return `${negative ? "-" : ""}${grouped}${frac === undefined ? "" : `.${frac}`}`;
  }
  return String(value);
}

/** An ISO 8601 timestamp shortened for a table cell (UTC, to the second). */
export function when(value) {
  if (!value) return "–";
  return String(value).replace("T", " ").replace(/(\.\d+)?(Z|\+00:00)$/, " UTC");
}

/** "2023-07-01T00:00" (a datetime-local input, read as UTC) -> "2023-07-01T00:00:00Z". */
export function fromInput(value) {
  if (!value) return "";
  return value.length === 16 ? `${value}:00Z` : `${value}Z`;
}

/** The inverse of fromInput, for an input's value. */
export function toInput(iso) {
  if (!iso) return "";
  return String(iso).replace(/(\.\d+)?(Z|\+00:00)$/, "").slice(0, 16);
}

/** A labelled UTC datetime input (id unique on the page). */
export function timeField(id, label, iso) {
  return h("label", { for: id }, `${label} (UTC) `,
    h("input", { id, name: id, type: "datetime-local", value: toInput(iso) }));
}

/** A labelled <select>. */
export function selectField(id, label, options, selected) {
  const select = h("select", { id, name: id });
  for (const option of options) {
    const [value, text] = Array.isArray(option) ? option : [option, option];
    select.append(h("option", { value, selected: value === selected }, text));
  }
  return h("label", { for: id }, `${label} `, select);
}

/** A button that saves the server's CSV of a route (with the viewer's token). */
export function csvButton(path, params, filename, label = "Download CSV", tableId = null) {
  const button = h("button", { type: "button", class: "csv" }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await downloadCsv(path, params, filename);
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
    }
  });
  button.dataset.csv = path;
  if (tableId) button.dataset.table = tableId;
  return button;
}

const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)$/;
const DECIMAL = /^-?\d+(\.\d+)?$/;

/** A cell's text: nested objects (a request, a figure) as "key=value" pairs. */
export function text(value) {
  if (value === null || value === undefined || value === "") return "–";
  if (Array.isArray(value)) return value.map(text).join("; ");
  if (typeof value === "object") return Object.entries(value).map(([k, v]) => `${k}=${text(v)}`).join(", ");
  if (typeof value === "string" && ISO_INSTANT.test(value)) return when(value);
  return String(value);
}

/**
 * A table: columns [{key, label, numeric, render(row) -> node|text}], rows, a caption,
 * optionally a footer row and a CSV button (the server's CSV of `csv.path`).
 */
export function table({ caption, columns, rows, footer, csv, id, empty = "Nothing to show." }) {
  const head = h("tr", {}, columns.map((c) =>
    h("th", { scope: "col", class: c.numeric ? "n" : "" }, c.label ?? c.key)));
  const body = h("tbody");
  for (const row of rows) {
    body.append(h("tr", {}, columns.map((c, i) => {
      const content = c.render ? c.render(row) : c.numeric ? num(row[c.key]) : text(row[c.key]);
      const attrs = { class: c.numeric ? "n" : "", "data-key": c.key };
      return i === 0 ? h("th", { ...attrs, scope: "row" }, content) : h("td", attrs, content);
    })));
  }
  const parts = [h("caption", {}, caption), h("thead", {}, head), body];
  if (footer) {
    parts.push(h("tfoot", {}, h("tr", {}, columns.map((c, i) => {
      const value = footer[c.key];
      const content = value === undefined ? "" : c.numeric ? num(value) : value;
      const attrs = { class: c.numeric ? "n" : "", "data-key": c.key };
      return i === 0 ? h("th", { ...attrs, scope: "row" }, content) : h("td", attrs, content);
    }))));
  }
  if (rows.length === 0) {
    return h("div", { class: "table-wrap", id }, h("p", { class: "caption" }, caption), h("p", { class: "empty" }, empty));
  }
  const tbl = h("table", { id }, parts);
  const tools = h("div", { class: "table-tools" },
    csv ? csvButton(csv.path, csv.params, csv.filename, csv.label, id) : null);
  return h("div", { class: "table-wrap" }, tools, h("div", { class: "scroll" }, tbl));
}

/** Columns for every key of the rows (a route's items as they come), in first-seen order. */
export function columnsOf(rows, numericKeys = []) {
  const keys = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!keys.includes(key)) keys.push(key);
  return keys.map((key) => ({
    key,
    label: key.replace(/_display$/, "").replaceAll("_", " "),
    // numbers, and decimal strings (seconds, GPU-hours: exact, as the API sends them)
    numeric: numericKeys.includes(key) || (rows.some((r) => r[key] !== null && r[key] !== undefined) &&
      rows.every((r) => r[key] === null || r[key] === undefined || typeof r[key] === "number" ||
        (typeof r[key] === "string" && DECIMAL.test(r[key])))),
  }));
}

/** A section with a heading (level 2) and its content. */
export function section(title, ...content) {
  return h("section", { "aria-label": title }, h("h2", {}, title), ...content);
}
