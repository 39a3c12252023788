// #/queues/<quota>: a quota's pending queue in order (its subtree's, for an inner node),
// its depth per flavor from the tree, and the waits report over a window.

import { getJson } from "../api.js";
import { columnsOf, fromInput, h, section, selectField, table, timeField } from "../dom.js";

function jobLink(uid) {
  return h("a", { href: `#/job/${encodeURIComponent(uid)}` }, uid);
}

function controls(quotas, quota, params, go) {
  const form = h("form", { class: "controls", "aria-label": "Quota and waits window" },
    selectField("w-quota", "Queue of", quotas, quota),
    timeField("w-from", "Waits from", params.from),
    timeField("w-to", "to", params.to),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    go({ from: fromInput(e["w-from"].value), to: fromInput(e["w-to"].value) },
      `queues/${encodeURIComponent(e["w-quota"].value)}`);
  });
  return form;
}

export async function queuesView({ path, params, go }) {
  const tree = await getJson("v1/quotas/tree", {});
  const quotas = [...new Set(tree.items.map((r) => r.quota))];
  const quota = decodeURIComponent(path[1] ?? quotas[0] ?? "");
  const parts = [controls(quotas, quota, params, go)];
  if (quota) {
    const depth = tree.items.filter((r) => r.quota === quota);
    parts.push(h("h3", {}, `Queue depth of ${quota}`), table({
      caption: `Queued demand and pending jobs of ${quota} per flavor, now`,
      columns: [{ key: "flavor", label: "flavor" }, { key: "queued", label: "queued", numeric: true },
        { key: "pending_jobs", label: "pending jobs", numeric: true }, { key: "unit", label: "unit" }],
      rows: depth,
    }));
    const queue = await getJson(`v1/queues/${encodeURIComponent(quota)}`, { limit: 100 });
    const columns = columnsOf(queue.items).map((c) =>
      c.key === "job_uid" ? { ...c, render: (r) => jobLink(r.job_uid) } : c);
    parts.push(h("h3", {}, `Queue of ${quota}`), table({
      id: "queue",
      caption: `Pending jobs of ${quota} in queue order${queue.next_cursor ? " (first 100)" : ""}`,
      columns: columns.length ? columns : [{ key: "position" }],
      rows: queue.items,
      csv: { path: `v1/queues/${encodeURIComponent(quota)}`, params: {}, filename: `queue-${quota}.csv` },
      empty: "No job waits in this queue.",
    }));
  }
  const windowParams = { from: params.from, to: params.to };
  const waits = await getJson("v1/waits", windowParams);
  parts.push(h("h3", {}, "Waits"), table({
    id: "waits",
    caption: "Waits from submission (or preemption) to admission, per quota and priority",
    columns: columnsOf(waits.items),
    rows: waits.items,
    csv: { path: "v1/waits", params: windowParams, filename: "waits.csv" },
  }));
  return section(`Queues and waits${quota ? `: ${quota}` : ""}`, ...parts);
}
