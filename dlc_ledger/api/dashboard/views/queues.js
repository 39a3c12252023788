// #/queues/<quota>?at&from&to: a quota's pending queue in dispatch order (its subtree's,
// for an inner node) and its depth per flavor, now or at an instant; the waits and
// preemptions reports over a window.

import { getAll, getJson } from "../api.js";
import { columnsOf, fromInput, h, section, selectField, table, timeField, when } from "../dom.js";

function jobLink(uid, at) {
  const query = at ? `?at=${encodeURIComponent(at)}` : "";
  return h("a", { href: `#/job/${encodeURIComponent(uid)}${query}` }, uid);
}

function controls(quotas, quota, params, go) {
  const form = h("form", { class: "controls", "aria-label": "Quota, instant and window" },
    selectField("w-quota", "Queue of", quotas, quota),
    timeField("w-at", "At", params.at),
    timeField("w-from", "Waits and preemptions from", params.from),
    timeField("w-to", "to", params.to),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    go({ at: fromInput(e["w-at"].value), from: fromInput(e["w-from"].value), to: fromInput(e["w-to"].value) },
      `queues/${encodeURIComponent(e["w-quota"].value)}`);
  });
  return form;
}

/** Columns of a report's rows, job uids linked to their pages. */
function linked(rows, keys, at) {
  return columnsOf(rows).map((c) => (keys.includes(c.key) ? { ...c, render: (r) => (r[c.key] ? jobLink(r[c.key], at) : "–") } : c));
}

export async function queuesView({ path, params, go }) {
  const at = params.at;
  const { items: nodes, body: tree } = await getAll("v1/quotas/tree", { at });
  const quotas = [...new Set(nodes.map((r) => r.quota))];
  const quota = decodeURIComponent(path[1] ?? quotas[0] ?? "");
  const parts = [controls(quotas, quota, params, go)];
  if (quota) {
    const depth = nodes.filter((r) => r.quota === quota);
    const instant = tree.at ? when(tree.at) : "now";
    parts.push(h("h3", {}, `Queue depth of ${quota} at ${instant}`), table({
      id: "queue-depth",
      caption: `Queued demand and pending jobs of ${quota} per flavor`,
      columns: [{ key: "flavor", label: "flavor" }, { key: "queued", label: "queued", numeric: true },
        { key: "pending_jobs", label: "pending jobs", numeric: true }, { key: "unit", label: "unit" }],
      rows: depth,
      csv: { path: "v1/quotas/tree", params: { at }, filename: "quotas-tree.csv" },
    }));
    const queue = await getJson(`v1/queues/${encodeURIComponent(quota)}`, { at, limit: 100 });
    parts.push(h("h3", {}, `Queue of ${quota}`), table({
      id: "queue",
      caption: `Pending jobs of ${quota} in queue order${queue.next_cursor ? " (the first 100)" : ""}`,
      columns: linked(queue.items, ["job_uid"], at),
      rows: queue.items,
      csv: { path: `v1/queues/${encodeURIComponent(quota)}`, params: { at }, filename: `queue-${quota}.csv` },
      empty: "No job waits in this queue.",
    }));
  }
  const windowParams = { from: params.from, to: params.to };
  const [waits, preemptions] = await Promise.all([
    getAll("v1/waits", windowParams),
    getAll("v1/preemptions", windowParams),
  ]);
  parts.push(h("h3", {}, "Waits"), table({
    id: "waits",
    caption: "Waits from submission (or preemption) to admission, per quota and priority (seconds)",
    columns: columnsOf(waits.items),
    rows: waits.items,
    csv: { path: "v1/waits", params: windowParams, filename: "waits.csv" },
  }), h("h3", {}, "Preemptions"), table({
    id: "preemptions",
    caption: "Who preempted whom, why, and what it lost",
    columns: linked(preemptions.items, ["victim_uid", "preemptor_uid"]).filter((c) => !c.key.endsWith("_minor_precise")),
    rows: preemptions.items,
    csv: { path: "v1/preemptions", params: windowParams, filename: "preemptions.csv" },
    empty: "No preemption in this window.",
  }));
  return section(`Queues and waits${quota ? `: ${quota}` : ""}`, ...parts);
}
