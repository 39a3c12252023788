// The dashboard's one way to write a figure for a person: quantities in GPUs, cores and
// GiB (the API and its CSV keep mGPU, milli-cores and MiB), shares, durations, money as
// the API's formatted strings, and every instant as "2027-03-29 14:05Z" (24 h, UTC) — in
// tables, chart axes and the inputs, which parse the same text back.

import { roundDecimal } from "./numbers.js";

const GROUPED = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const WHOLE = new Intl.NumberFormat("en-US");

/** The API's unit -> how many of it make the unit a person reads. */
export const UNITS = {
  mGPU: { name: "GPUs", per: 1000 },
  "milli-cores": { name: "cores", per: 1000 },
  MiB: { name: "GiB", per: 1024 },
};

/** "mGPU" -> "GPUs" (an unknown unit as it comes). */
export function unitName(unit) {
  return UNITS[unit]?.name ?? unit ?? "";
}

/** A raw quantity in tenths of the readable unit, rounded half away from zero, exactly
 *  (integers only: 41,450 mGPU -> 415, i.e. 41.5 GPUs). */
export function tenths(value, unit) {
  const per = UNITS[unit]?.per ?? 1;
  const sign = value < 0 ? -1 : 1;
  return sign * Math.floor((Math.abs(value) * 10 + per / 2) / per);
}

/** 41490 mGPU -> "41.5"; 1200000 milli-cores -> "1,200.0"; null -> "–". */
export function quantity(value, unit) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (!UNITS[unit]) return WHOLE.format(value);
  return GROUPED.format(tenths(value, unit) / 10);
}

/** The readable value as a number (charts): 41490 mGPU -> 41.49. */
export function scaled(value, unit) {
  return value === null || value === undefined ? null : value / (UNITS[unit]?.per ?? 1);
}

/** used as a share of whole: "52%" ("–" when there is no whole). */
export function share(part, whole) {
  if (!whole || whole <= 0 || part === null || part === undefined) return "–";
  return `${Math.round((100 * part) / whole)}%`;
}

/** A decimal string (GPU-hours, exact from the API) to one decimal: "10443.370206" -> "10,443.4". */
export function hours(value) {
  if (value === null || value === undefined || value === "") return "–";
  const [whole, frac] = roundDecimal(String(value), 1).split(".");
  const negative = whole.startsWith("-");
  const grouped = WHOLE.format(BigInt(whole.replace("-", "")));
  return `${negative ? "-" : ""}${grouped}.${frac}`;
}

/** An integer count: 7255 -> "7,255". */
export function count(value) {
  return value === null || value === undefined ? "–" : WHOLE.format(value);
}

const UNIT_SECONDS = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];

/** Seconds -> its two largest units: 273600 -> "3d 4h", 3725 -> "1h 2m", 42 -> "42s". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") return "–";
  let left = Math.round(Math.abs(Number(seconds)));
  if (left === 0) return "0s";
  const parts = [];
  for (const [name, size] of UNIT_SECONDS) {
    const n = Math.floor(left / size);
    left -= n * size;
    if (n > 0 || parts.length) parts.push(n > 0 ? `${n}${name}` : null);
    if (parts.length === 2) break;
  }
  return (Number(seconds) < 0 ? "-" : "") + parts.filter(Boolean).join(" ");
}

/** A money amount as the API wrote it (never from minor units here): an object's
 *  `<key>_display` (money_fields' string, "1,267.21 USD"); "–" for none. */
export function money(value, key = "cost") {
  if (value === null || value === undefined) return "–";
  return value[`${key}_display`] ?? "–";
}

const pad = (n) => String(n).padStart(2, "0");

/** An instant (ISO 8601 or epoch ms) -> "2027-03-29 14:05Z" (UTC, to the minute). */
export function instant(value) {
  if (value === null || value === undefined || value === "") return "–";
  const d = typeof value === "number" ? new Date(value) : new Date(String(value));
  if (Number.isNaN(d.getTime())) return String(value);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}Z`;
}

const TYPED = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}))?\s*(?:Z|UTC)?$/i;

/** What a person typed ("2027-03-29 14:05Z", "2027-03-29 14:05", "2027-03-29") -> the
 *  API's "2027-03-29T14:05:00Z"; "" for nothing; an Error naming the format otherwise. */
export function parseInstant(text) {
  const value = String(text ?? "").trim();
  if (!value) return "";
  const m = value.match(TYPED);
  const wrong = new Error(`"${value}" is not an instant: write YYYY-MM-DD HH:MMZ (24 h, UTC)`);
  if (!m) throw wrong;
  const [year, month, day, hour = 0, minute = 0] = m.slice(1).map((v) => (v === undefined ? undefined : Number(v)));
  const d = new Date(Date.UTC(year, month - 1, day, hour, minute));
  if (d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day || hour > 23 || minute > 59) throw wrong;
  return `${year}-${pad(month)}-${pad(day)}T${pad(hour)}:${pad(minute)}:00Z`;
}

/** "updated 5 s ago" from milliseconds elapsed. */
export function ago(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  return s < 60 ? `${s} s ago` : `${duration(s)} ago`;
}

/** The API's unit of a flavor or resource key: gpu/* in mGPU, cpu in milli-cores, memory in MiB. */
export function unitOfKey(key) {
  const k = String(key ?? "");
  if (k.startsWith("gpu") || k === "mgpu") return "mGPU";
  if (k.startsWith("cpu")) return "milli-cores";
  if (k.startsWith("memory")) return "MiB";
  return "";
}

/** A quantity x seconds in unit-hours, one decimal: 3600000 mGPU-seconds -> "1.0" (GPU-hours). */
export function unitHours(value, unit) {
  if (value === null || value === undefined) return "–";
  const per = (UNITS[unit]?.per ?? 1) * 3600;
  const sign = value < 0 ? -1 : 1;
  return GROUPED.format((sign * Math.floor((Math.abs(value) * 10 + per / 2) / per)) / 10);
}

/** A request {flavor or resource: raw quantity} as "gpu/any 32.0 GPUs, cpu 8.0 cores". */
export function request(value) {
  if (!value || typeof value !== "object") return "–";
  const parts = Object.entries(value).map(([k, v]) => `${k} ${quantity(v, unitOfKey(k))} ${unitName(unitOfKey(k))}`.trim());
  return parts.length ? parts.join(", ") : "–";
}
