// One quota node x flavor as a stacked bar. At an instant the segments are computed from
// the tree route's fields only (docs/dashboard.md, "The bar"); over a window the bar is
// the average use with a mark at the peak (from the node's series). So what is drawn can
// be checked against the API's JSON. Every colour has its line in the legend.

import { quantity, unitName } from "./format.js";

export const SEGMENTS = [
  ["within", "within guarantee"],
  ["borrowed", "borrowed"],
  ["over", "over-admitted"],
  ["lent", "lent"],
  ["free", "free"],
];
// over a window: the average use, split at the guarantee
export const WINDOW_SEGMENTS = [
  ["within", "average use within guarantee"],
  ["borrowed", "average use above guarantee"],
];

const clamp = (value, low, high) => Math.max(low, Math.min(high, value));

/** {within, borrowed, over, lent, free, scale} for a /v1/quotas/tree item. */
export function segments(row) {
  const { min, max, used, borrowed, lent, available, over_admitted: overAdmitted } = row;
  // used = within + borrowed + over: the guarantee's part, then above min up to max,
  // then above max (at a root, which never borrows, everything above min is over)
  const within = clamp(used - borrowed, 0, min);
  const over = clamp(overAdmitted, 0, used - within);
  const borrowedPart = Math.max(0, used - within - over);
  // lent: the guarantee's unused part lent to others (an inner node's `lent` also counts
  // what it supplies its own children, which its `used` holds: capped to what is left)
  const lentPart = clamp(lent, 0, Math.max(0, min - within));
  // free: what one more job could be admitted with here now (Kueue's available)
  const free = Math.max(0, available);
  const scale = Math.max(max, min, within + borrowedPart + over + lentPart + free, 1);
  return { within, borrowed: borrowedPart, over, lent: lentPart, free, scale };
}

/** Over a window: {within, borrowed, peak, scale} from the average and peak use. */
export function windowSegments(row, average, peak) {
  const within = Math.min(average, row.min);
  return { within, borrowed: Math.max(0, average - within), peak, scale: Math.max(row.max, row.min, peak, 1) };
}

function drawn(h, label, parts, keys, min) {
  const el = h("div", { class: "bar", role: "img", "aria-label": label, title: label });
  for (const [key] of keys) {
    if (parts[key] <= 0) continue;
    const seg = h("span", { class: `seg seg-${key}`, "data-segment": key, "data-value": parts[key] });
    seg.style.width = `${(100 * parts[key]) / parts.scale}%`;
    el.append(seg);
  }
  if (min > 0 && min < parts.scale) {
    const tick = h("span", { class: "min-tick", "aria-hidden": "true" });
    tick.style.left = `${(100 * min) / parts.scale}%`;
    el.append(tick);
  }
  el.dataset.scale = parts.scale;
  return el;
}

/** The bar at the tree's instant: a row of segments sized in % of the node's scale, with
 *  a text alternative in the readable unit. */
export function bar(row, h) {
  const parts = segments(row);
  const q = (v) => quantity(v, row.unit);
  const text = SEGMENTS.map(([key, label]) => `${label} ${q(parts[key])}`).join(", ");
  const label = `${row.quota} ${row.flavor}: ${text}; min ${q(row.min)}, max ${q(row.max)} ${unitName(row.unit)}`;
  return drawn(h, label, parts, SEGMENTS, row.min);
}

/** The bar over a window: the average use (within and above the guarantee) and a mark at
 *  the peak. */
export function windowBar(row, average, peak, h) {
  const parts = windowSegments(row, average, peak);
  const q = (v) => quantity(v, row.unit);
  const label = `${row.quota} ${row.flavor}: average ${q(average)}, peak ${q(peak)}; ` +
    `min ${q(row.min)}, max ${q(row.max)} ${unitName(row.unit)}`;
  const el = drawn(h, label, parts, WINDOW_SEGMENTS, row.min);
  if (peak > 0) {
    const mark = h("span", { class: "peak-tick", "aria-hidden": "true", "data-value": peak });
    mark.style.left = `calc(${(100 * Math.min(peak, parts.scale)) / parts.scale}% - 2px)`;
    el.append(mark);
  }
  return el;
}

const item = (h, cls, text) => h("li", {}, h("span", { class: `swatch ${cls}`, "aria-hidden": "true" }), text);

/** The legend naming every colour a bar can show (over a window: `windowed`). */
export function legend(h, windowed = false) {
  const keys = windowed ? WINDOW_SEGMENTS : SEGMENTS;
  return h("ul", { class: "legend", "aria-label": "Bar colours" },
    keys.map(([key, label]) => item(h, `seg-${key}`, label)),
    windowed ? item(h, "peak-swatch", "peak use in the window") : null,
    item(h, "min-swatch", "min (guarantee)"),
    item(h, "rest-swatch", windowed ? "unused, up to max" : "not free now, up to max (held by others or above max)"));
}
