// The time window a view reads and the form that picks it: typed from/to (and an instant
// where the view has one) or a preset — last 24 h, last 7 d, this month, the whole data —
// computed from the data's extent (`GET /v1/extent`) at every render, so a preset follows
// data appended while the page is open, and never from the viewer's clock when there is
// data (a replay's data lies in its own time).

import { h, readTimes, timeField } from "./dom.js";
import { instant } from "./format.js";

export const PRESETS = [
  ["24h", "Last 24 h"],
  ["7d", "Last 7 d"],
  ["month", "This month"],
  ["all", "Whole data"],
];
const HOUR = 3_600_000;
const MINUTE = 60_000;

const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

/** The latest instant with data (the views' default instant), or null. */
export function latest(extent) {
  return extent?.last ?? null;
}

/** {from, to, preset}: the params' own from/to, else the preset's window over the extent
 *  (`to` the minute after the last datum, so it is included), else `fallback` (a preset
 *  key or null: no window). */
export function windowOf(params, extent, fallback = null) {
  if (params.from || params.to) return { from: params.from ?? "", to: params.to ?? "", preset: "" };
  const preset = params.preset || fallback;
  if (!preset) return { from: "", to: "", preset: "" };
  const lastMs = Date.parse(extent?.last ?? "") || Date.now();
  const end = Math.ceil(lastMs / MINUTE) * MINUTE;
  const firstMs = Date.parse(extent?.first ?? "");
  const start = {
    "24h": end - 24 * HOUR,
    "7d": end - 7 * 24 * HOUR,
    month: Date.UTC(new Date(lastMs).getUTCFullYear(), new Date(lastMs).getUTCMonth(), 1),
    all: Number.isNaN(firstMs) ? NaN : Math.floor(firstMs / MINUTE) * MINUTE,
  }[preset];
  if (start === undefined) throw new Error(`unknown preset ${preset}: use ${PRESETS.map(([k]) => k).join(", ")}`);
  if (Number.isNaN(start)) return { from: "", to: "", preset };
  return { from: iso(start), to: iso(end), preset };
}

/** "from 2027-03-01 00:00Z to 2027-04-01 00:00Z" (or the whole data). */
export function windowText({ from, to }) {
  if (!from && !to) return "over the whole data";
  return `${from ? `from ${instant(from)}` : "from the start"} ${to ? `to ${instant(to)}` : "to the end"}`;
}

/**
 * The view's form: [an instant,] from, to, the view's own `fields`, Show, and the preset
 * buttons. `submit({at, from, to, preset})` navigates (the view adds its own fields, read
 * from the form it gets as a second argument). Typed instants are parsed; a wrong one is
 * marked on its field and nothing is sent.
 */
export function windowControls({ prefix, label, params, window: win, extent, submit, fields = [], at = null }) {
  const ids = [...(at ? [`${prefix}-at`] : []), `${prefix}-from`, `${prefix}-to`];
  const latestHint = latest(extent) ? `latest: ${instant(latest(extent))}` : "latest";
  const form = h("form", { class: "controls", "aria-label": label, noValidate: true },
    at ? timeField(`${prefix}-at`, at, params.at, latestHint) : null,
    timeField(`${prefix}-from`, "From", params.from, win.preset ? instant(win.from) : undefined),
    timeField(`${prefix}-to`, "to", params.to, win.preset ? instant(win.to) : undefined),
    ...fields,
    h("button", { type: "submit" }, "Show"),
    h("span", { class: "presets", role: "group", "aria-label": "Window presets" },
      PRESETS.map(([key, text]) => h("button", {
        type: "button", "data-preset": key, "aria-pressed": String(win.preset === key),
        onclick: () => submit({ at: params.at ?? "", from: "", to: "", preset: key }, form),
      }, text))));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const times = readTimes(form, ids);
    if (!times) return;
    submit({ at: at ? times[ids[0]] : params.at ?? "", from: times[`${prefix}-from`], to: times[`${prefix}-to`], preset: "" }, form);
  });
  return form;
}

/** A series' step for a window: hourly up to 62 days, daily beyond (a series is read
 *  whole, one page of at most 10,000 points a quota). */
export function seriesStep(win, asked = "") {
  if (asked) return asked;
  const span = Date.parse(win.to || "") - Date.parse(win.from || "");
  return Number.isNaN(span) || span > 62 * 24 * HOUR ? "day" : "hour";
}
