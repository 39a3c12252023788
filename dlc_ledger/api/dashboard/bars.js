// One quota node x flavor as a stacked bar: the segments are computed from the tree
// route's fields only (docs/dashboard.md, "The bar"), so what is drawn can be checked
// against the API's JSON.

export const SEGMENTS = [
  ["within", "within guarantee"],
  ["borrowed", "borrowed"],
  ["over", "over-admitted"],
  ["lent", "lent"],
  ["free", "free"],
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

/** The bar: a row of segments sized in % of the node's scale, with a text alternative. */
export function bar(row, unit, h) {
  const parts = segments(row);
  const text = SEGMENTS.map(([key, label]) => `${label} ${parts[key]}`).join(", ");
  const label = `${row.quota} ${row.flavor}: ${text}; min ${row.min}, max ${row.max} ${unit}`;
  const el = h("div", { class: "bar", role: "img", "aria-label": label, title: label });
  for (const [key] of SEGMENTS) {
    if (parts[key] <= 0) continue;
    const seg = h("span", { class: `seg seg-${key}`, "data-segment": key, "data-value": parts[key] });
    seg.style.width = `${(100 * parts[key]) / parts.scale}%`;
    el.append(seg);
  }
  if (row.min > 0 && row.min < parts.scale) {
    const tick = h("span", { class: "min-tick", "aria-hidden": "true" });
    tick.style.left = `${(100 * row.min) / parts.scale}%`;
    el.append(tick);
  }
  el.dataset.scale = parts.scale;
  return el;
}

/** The legend naming the segments' colours. */
export function legend(h) {
  return h("ul", { class: "legend", "aria-label": "Bar segments" },
    SEGMENTS.map(([key, label]) => h("li", {}, h("span", { class: `swatch seg-${key}`, "aria-hidden": "true" }), label)),
    h("li", {}, h("span", { class: "swatch min-swatch", "aria-hidden": "true" }), "min (guarantee)"));
}
