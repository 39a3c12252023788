// Small DOM helpers shared by the views: an element builder, the time inputs, and the one
// table every view uses (caption, <th scope>, a CSV button from the server).

import { downloadCsv } from "./api.js";
import { instant, parseInstant } from "./format.js";
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

/** An instant as a <time> element: "2027-03-29 14:05Z", the exact instant in its
 *  datetime attribute and title. */
export function when(iso) {
  if (!iso) return "–";
  return h("time", { dateTime: iso, title: iso }, instant(iso));
}

/** A labelled UTC instant typed as text, "YYYY-MM-DD HH:MMZ" (24 h; id unique on the page);
 *  `hint`: the placeholder when empty (what the view uses instead). */
export function timeField(id, label, iso, hint = "YYYY-MM-DD HH:MMZ") {
  return h("label", { for: id }, `${label} (UTC) `,
    h("input", { id, name: id, type: "text", value: iso ? instant(iso) : "", placeholder: hint,
      size: Math.max(19, hint.length), spellcheck: false, autocomplete: "off", pattern: String.raw`\s*\d{4}-\d\d-\d\d([ T]\d\d:\d\d)?\s*(Z|UTC)?\s*`,
      title: "YYYY-MM-DD HH:MMZ, 24 h, UTC" }));
}

/** The form's time inputs read back ({id: ISO or ""}), or null after telling the person
 *  which one is not an instant (the field is marked and focused). */
export function readTimes(form, ids) {
  const out = {};
  for (const id of ids) {
    const input = form.elements[id];
    try {
      out[id] = parseInstant(input.value);
      input.setCustomValidity("");
    } catch (error) {
      input.setCustomValidity(error.message);
      input.reportValidity();
      input.addEventListener("input", () => input.setCustomValidity(""), { once: true });
      return null;
    }
  }
  return out;
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

export const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)$/;

/** A cell's content: an instant as <time>, nested objects (a request, a figure) as
 *  "key=value" pairs. */
export function text(value) {
  if (value === null || value === undefined || value === "") return "–";
  if (Array.isArray(value)) return value.map((v) => textOf(v)).join("; ");
  if (typeof value === "object") return Object.entries(value).map(([k, v]) => `${k}=${textOf(v)}`).join(", ");
  if (typeof value === "string" && ISO_INSTANT.test(value)) return when(value);
  return String(value);
}

function textOf(value) {
  const content = text(value);
  return content instanceof Node ? content.textContent : content;
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

/** A section with a heading (level 2) and its content. */
export function section(title, ...content) {
  return h("section", { "aria-label": title }, h("h2", { "data-live": "title" }, title), ...content);
}

/** A part of a view the live refresh replaces (docs/dashboard.md, "Live"): `key` names it
 *  across renders; the view's forms are not live, so what is typed there stays. */
export function live(key, ...content) {
  return h("div", { "data-live": key }, ...content);
}
