// #/jobs: the jobs list (a name search, filters, a page at a time) naming each job, its
// user, quota, GPU request and model, GPU-hours and cost; and #/job/<uid>: one job with
// its facts, occupied resources, cost and audit timeline, and for a job that waits or was
// preempted, why (queue position, reason, estimated start).

import { ApiError, getJson } from "../api.js";
import { h, live, section, selectField, table, timeField, readTimes, when } from "../dom.js";
import { count, duration, hours, instant, money, quantity, unitHours, unitName, unitOfKey } from "../format.js";

const STATUSES = ["", "Creating", "Queuing", "Admitted", "Running", "Restarting", "Preempted",
  "Stopping", "Succeeded", "Failed", "Stopped"];

function jobLink(job, at) {
  const query = at ? `?at=${encodeURIComponent(at)}` : "";
  return h("a", { href: `#/job/${encodeURIComponent(job.job_uid)}${query}`, title: `uid ${job.job_uid}` },
    job.name || job.job_uid);
}

/** The columns every job table shares (the jobs list, the top jobs by cost); `uidKey`
 *  names the job's uid. A row that is no job (the top list's "(rounding)" and
 *  "(subscriptions)": cost posted without one) is named, not linked. */
export function jobColumns(at, uidKey = "job_uid") {
  const named = (r) => (uidKey === "job_uid" || r.status ? jobLink({ job_uid: r[uidKey], name: r.name }, at) : r[uidKey]);
  const gpus = (r) => (r.gpu_request_mgpu === undefined || r.gpu_request_mgpu === null ? "–" : quantity(r.gpu_request_mgpu, "mGPU"));
  return [
    { key: "name", label: "job", render: named },
    { key: "user", label: "user" },
    { key: "quota", label: "quota" },
    { key: "workspace", label: "workspace" },
    { key: "gpu_request", label: "GPUs", numeric: true, render: gpus },
    { key: "gpu_model", label: "GPU model" },
    { key: "status", label: "status" },
    { key: "gpu_hours", label: "GPU-hours", numeric: true, render: (r) => hours(r.gpu_hours) },
    { key: "cost", label: "cost", numeric: true, render: (r) => money(r) },
  ];
}

function filters(params, go) {
  const form = h("form", { class: "controls", "aria-label": "Job filters", noValidate: true },
    h("label", { for: "j-q" }, "Name contains ", h("input", { id: "j-q", type: "search", value: params.q ?? "", placeholder: "part of a job name" })),
    h("label", { for: "j-workspace" }, "Workspace ", h("input", { id: "j-workspace", value: params.workspace ?? "", size: 12 })),
    selectField("j-status", "Status", STATUSES.map((s) => [s, s || "any"]), params.status ?? ""),
    timeField("j-at", "As at", params.at, "now"),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    const times = readTimes(form, ["j-at"]);
    if (!times) return;
    go({ q: e["j-q"].value.trim(), workspace: e["j-workspace"].value.trim(), status: e["j-status"].value, at: times["j-at"] });
  });
  return form;
}

export async function jobsView({ params, go }) {
  const query = { q: params.q, workspace: params.workspace, status: params.status, at: params.at, limit: 50, cursor: params.cursor };
  const page = await getJson("v1/jobs", query);
  const columns = [
    ...jobColumns(params.at),
    { key: "submitted_at", label: "submitted", render: (r) => when(r.submitted_at) },
    { key: "running_seconds", label: "ran", numeric: true, render: (r) => duration(r.running_seconds) },
  ];
  const pager = h("nav", { class: "pager", "aria-label": "Pages", "data-next": page.next_cursor ?? "" },
    params.cursor ? h("button", { type: "button", onclick: () => history.back() }, "Previous page") : null,
    page.next_cursor ? h("button", { type: "button", onclick: () => go({ ...params, cursor: page.next_cursor }) }, "Next page") : null);
  const matching = params.q ? ` whose name contains “${params.q}”` : "";
  return section("Jobs", filters(params, go), live("jobs", table({
    id: "jobs",
    caption: `Jobs${matching}, newest submission first${params.at ? `, as at ${instant(params.at)}` : ""}`,
    columns, rows: page.items,
    csv: { path: "v1/jobs", params: { ...query, cursor: undefined }, filename: "jobs.csv" },
    empty: params.q ? `No job's name contains “${params.q}”.` : "No job.",
  }), pager));
}

function gpuRequest(job) {
  if (job.gpu_request_mgpu !== undefined && job.gpu_request_mgpu !== null) return job.gpu_request_mgpu;
  return (job.replicas ?? []).reduce((s, r) => s + (r.count ?? 1) * (r.mgpu ?? 0), 0);
}

function facts(job) {
  const rows = [
    ["name", job.name], ["uid", job.job_uid], ["status", job.status], ["since", when(job.status_since)],
    ["workspace", job.workspace], ["quota", job.quota], ["user", job.user], ["priority", job.priority],
    ["billing mode", job.billing_mode], ["kind", job.kind],
    ["GPUs requested", `${quantity(gpuRequest(job), "mGPU")}${job.gpu_model ? ` × ${job.gpu_model}` : ""}`],
    ["submitted", when(job.submitted_at)], ["ended", when(job.ended_at)],
    ["ran", duration(job.running_seconds)], ["restarts", count(job.restarts)], ["preemptions", count(job.preemptions)],
    ["goodput", job.goodput === null || job.goodput === undefined ? "–" : `${Math.round(job.goodput * 100)}%`],
    ["GPU-hours", job.gpu_hours !== undefined ? hours(job.gpu_hours) : undefined],
    ["cost", job.cost_display ?? undefined],
    ["open occupancies", count(job.open_occupancies)],
  ].filter(([, v]) => v !== undefined);
  return h("dl", { class: "facts" }, rows.flatMap(([k, v]) =>
    [h("dt", {}, k), h("dd", { "data-key": k }, v === null || v === "" ? "–" : v)]));
}

function estimateText(estimate) {
  if (!estimate) return "unknown (no estimate)";
  if (!estimate.start) return estimate.basis === "never" ? "never, as configured" : `unknown (${estimate.basis})`;
  return `${instant(estimate.start)} (${estimate.basis})`;
}

function whyPart(why) {
  const p = why.pending ?? {};
  const rows = [
    ["answer", why.answer], ["summary", why.summary],
    ["reason", p.reason_text ? `${p.reason}: ${p.reason_text}` : p.reason],
    ["queue position", p.position != null ? `${p.position} of ${p.queue_length}` : null],
    ["position in the cohort", p.cohort_position != null ? `${p.cohort_position} of ${p.cohort_length}` : null],
    ["waited", p.waited_seconds != null ? `${duration(p.waited_seconds)} since ${instant(p.queued_at)}` : null],
    ["estimated start", "estimate" in p ? estimateText(p.estimate) : null],
  ].filter(([, v]) => v !== undefined && v !== null && v !== "");
  const figures = p.figures ?? [];
  const q = (key) => (r) => quantity(r[key], unitOfKey(r.key));
  const figureColumns = [
    { key: "quota", label: "quota" }, { key: "key", label: "resource", render: (r) => `${r.key} (${unitName(unitOfKey(r.key))})` },
    ...["request", "min", "max", "used", "available", "capacity"].map((key) => ({ key, label: key, numeric: true, render: q(key) })),
    { key: "short", label: "short", render: (r) => (r.short ? "yes" : "no") },
  ];
  const preemptions = why.preemptions ?? [];
  const preemptionColumns = [
    { key: "decided_at", label: "decided", render: (r) => when(r.decided_at) },
    { key: "preemptor", label: "by", render: (r) => h("a", { href: `#/job/${encodeURIComponent(r.preemptor)}` }, r.preemptor_name ?? r.preemptor) },
    { key: "preemptor_quota", label: "their quota" },
    { key: "rule", label: "rule", render: (r) => (r.rule_text ? `${r.rule}: ${r.rule_text}` : r.rule) },
    { key: "lost", label: "work lost", numeric: true, render: (r) => duration(r.lost_seconds) },
    { key: "lost_gpu_hours", label: "GPU-hours lost", numeric: true, render: (r) => hours(r.lost_gpu_hours) },
  ];
  const asOf = why.now ? ` (at ${instant(why.now)})` : "";
  return h("section", { "aria-label": "Why", id: "why" }, h("h3", {}, `Why: ${why.answer}${asOf}`),
    h("dl", { class: "facts" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-key": k }, String(v))])),
    figures.length ? table({ caption: "What the job needs against what the quotas have", columns: figureColumns, rows: figures }) : null,
    preemptions.length ? table({ caption: "Preemptions of this job", columns: preemptionColumns, rows: preemptions }) : null);
}

const OCCUPIED = [
  { key: "flavor", label: "flavor" },
  { key: "gpu_hours", label: "GPU-hours", numeric: true, render: (r) => unitHours(r.mgpu_seconds, "mGPU") },
  { key: "core_hours", label: "core-hours", numeric: true, render: (r) => unitHours(r.cpu_milli_seconds, "milli-cores") },
  { key: "gib_hours", label: "GiB-hours", numeric: true, render: (r) => unitHours(r.memory_mib_seconds, "MiB") },
  { key: "occupancies", label: "occupancies", numeric: true, render: (r) => count(r.occupancies) },
];
const COST = [
  { key: "flavor", label: "flavor" }, { key: "billing_mode", label: "billing mode" },
  { key: "posted", label: "posted", numeric: true, render: (r) => money(r, "posted") },
  { key: "rated", label: "rated now", numeric: true, render: (r) => money(r, "rated") },
];
const TIMELINE = [
  { key: "occurred_at", label: "occurred", render: (r) => when(r.occurred_at) },
  { key: "type", label: "type" }, { key: "summary", label: "summary" }, { key: "by", label: "by" },
  { key: "reason", label: "reason" }, { key: "source", label: "source" },
  { key: "late", label: "late", render: (r) => (r.late ? "yes" : "") },
];

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
  const timeline = job.timeline ?? [];
  parts.push(
    table({ caption: "Occupied resources (closed occupancies)", columns: OCCUPIED, rows: job.occupied ?? [] }),
    table({ id: "job-cost", caption: "Cost", columns: COST, rows: job.cost ?? [] }),
    table({
      id: "timeline", caption: "Audit timeline (cluster time)", rows: timeline, columns: TIMELINE,
      // the job's own list route: the server's CSV of the same entries, every page
      csv: { path: `v1/jobs/${encodeURIComponent(job.job_uid)}/timeline`, params: {}, filename: `timeline-${job.job_uid}.csv` },
    }));
  // a service or notebook has its own page: its replicas and cost over time
  const workload = job.framework === "service" || job.framework === "notebook"
    ? [" · ", h("a", { href: `#/services/${encodeURIComponent(job.job_uid)}` }, `its ${job.framework} page (replicas and cost over time)`)]
    : [];
  return section(`Job ${job.name ?? uid}`, live("job", h("p", {}, h("a", { href: "#/jobs" }, "All jobs"), ...workload, ` · uid ${uid}`), ...parts));
}
