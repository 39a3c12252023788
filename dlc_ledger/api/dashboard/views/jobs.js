// #/jobs: the jobs list (filters, a page at a time) and #/job/<uid>: one job with its
// occupied resources, cost and audit timeline, and for a job that waits or was
// preempted, why (queue position, reason, estimated start).

import { ApiError, getJson } from "../api.js";
import { columnsOf, fromInput, h, section, selectField, table, timeField, when } from "../dom.js";

const STATUSES = ["", "Creating", "Queuing", "Admitted", "Running", "Restarting", "Preempted",
  "Stopping", "Succeeded", "Failed", "Stopped"];
const LIST_COLUMNS = ["job_uid", "name", "workspace", "quota", "user", "status", "priority",
  "submitted_at", "running_seconds"];

function jobLink(uid, at) {
  const query = at ? `?at=${encodeURIComponent(at)}` : "";
  return h("a", { href: `#/job/${encodeURIComponent(uid)}${query}` }, uid);
}

function filters(params, go) {
  const form = h("form", { class: "controls", "aria-label": "Job filters" },
    h("label", { for: "j-workspace" }, "Workspace ", h("input", { id: "j-workspace", value: params.workspace ?? "" })),
    selectField("j-status", "Status", STATUSES.map((s) => [s, s || "any"]), params.status ?? ""),
    timeField("j-at", "As at", params.at),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    go({ workspace: e["j-workspace"].value.trim(), status: e["j-status"].value, at: fromInput(e["j-at"].value) });
  });
  return form;
}

export async function jobsView({ params, go }) {
  const query = { workspace: params.workspace, status: params.status, at: params.at, limit: 50, cursor: params.cursor };
  const page = await getJson("v1/jobs", query);
  const columns = LIST_COLUMNS.map((key) => ({
    key, label: key.replaceAll("_", " "), numeric: key === "priority" || key === "running_seconds",
    render: key === "job_uid" ? (r) => jobLink(r.job_uid, params.at) : key.endsWith("_at") ? (r) => when(r[key]) : undefined,
  }));
  const pager = h("nav", { class: "pager", "aria-label": "Pages" },
    params.cursor ? h("button", { type: "button", onclick: () => history.back() }, "Previous page") : null,
    page.next_cursor ? h("button", { type: "button", onclick: () => go({ ...params, cursor: page.next_cursor }) }, "Next page") : null);
  return section("Jobs", filters(params, go), table({
    id: "jobs",
    caption: `Jobs, newest submission first${params.at ? `, as at ${when(params.at)}` : ""}`,
    columns, rows: page.items,
    csv: { path: "v1/jobs", params: { ...query, cursor: undefined }, filename: "jobs.csv" },
  }), pager);
}

function facts(job) {
  const keys = ["name", "status", "status_since", "workspace", "quota", "user", "priority",
    "billing_mode", "kind", "submitted_at", "running_seconds", "open_occupancies"];
  return h("dl", { class: "facts" }, keys.filter((k) => k in job).flatMap((k) =>
    [h("dt", {}, k.replaceAll("_", " ")), h("dd", {}, k.endsWith("_at") || k.endsWith("_since") ? when(job[k]) : String(job[k] ?? "–"))]));
}

function estimateText(estimate) {
  if (!estimate) return "unknown (no estimate)";
  if (!estimate.start) return estimate.basis === "never" ? "never, as configured" : `unknown (${estimate.basis})`;
  return `${when(estimate.start)} (${estimate.basis})`;
}

function whyPart(why) {
  const p = why.pending ?? {};
  const rows = [
    ["answer", why.answer], ["summary", why.summary],
    ["reason", p.reason_text ? `${p.reason}: ${p.reason_text}` : p.reason],
    ["queue position", p.position != null ? `${p.position} of ${p.queue_length}` : null],
    ["position in the cohort", p.cohort_position != null ? `${p.cohort_position} of ${p.cohort_length}` : null],
    ["waited", p.waited_seconds != null ? `${Math.round(p.waited_seconds)} s since ${when(p.queued_at)}` : null],
    ["estimated start", "estimate" in p ? estimateText(p.estimate) : null],
  ].filter(([, v]) => v !== undefined && v !== null && v !== "");
  const figures = (p.figures ?? []);
  const preemptions = (why.preemptions ?? []);
  const instant = why.now ? ` (at ${when(why.now)})` : "";
  return h("section", { "aria-label": "Why", id: "why" }, h("h3", {}, `Why: ${why.answer}${instant}`),
    h("dl", { class: "facts" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-key": k }, String(v))])),
    figures.length ? table({ caption: "What the job needs against what the quotas have", columns: columnsOf(figures), rows: figures }) : null,
    preemptions.length ? table({ caption: "Preemptions of this job", columns: columnsOf(preemptions), rows: preemptions }) : null);
}


export async function jobView({ path, params }) {
  const uid = decodeURIComponent(path[1] ?? "");
  const job = await getJson(`v1/jobs/${encodeURIComponent(uid)}`);
  const parts = [facts(job)];
  try {
    const why = await getJson(`v1/jobs/${encodeURIComponent(uid)}/why`, { at: params.at });
    // a finished job's answer is its admission: shown only when it was preempted on the way
    if (why.answer !== "finished" || (why.preemptions ?? []).length) parts.push(whyPart(why));
  } catch (error) {
    if (!(error instanceof ApiError) || error.status === 401) throw error;
    parts.push(h("p", { class: "warn" }, `Why it is ${job.status}: ${error.message}`));
  }
  const timeline = (job.timeline ?? []);
  parts.push(
    table({ caption: "Occupied resources (closed occupancies)", columns: columnsOf(job.occupied ?? []), rows: job.occupied ?? [] }),
    table({ caption: "Cost", columns: columnsOf(job.cost ?? []), rows: (job.cost ?? []) }),
    table({
      id: "timeline", caption: "Audit timeline (cluster time)", rows: timeline,
      columns: columnsOf(timeline).map((c) => (c.key === "occurred_at" ? { ...c, render: (r) => when(r.occurred_at) } : c)),
      // the job's own list route: the server's CSV of the same entries, every page
      csv: { path: `v1/jobs/${encodeURIComponent(job.job_uid)}/timeline`, params: {}, filename: `timeline-${job.job_uid}.csv` },
    }));
  return section(`Job ${job.name ?? uid}`, h("p", {}, h("a", { href: "#/jobs" }, "All jobs"), ` · uid ${uid}`), ...parts);
}
