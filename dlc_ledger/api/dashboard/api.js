// The public API as the page calls it: the viewer's token (sessionStorage), JSON GETs with
// `Authorization: Bearer`, problem JSON errors, and the server's CSV saved as a file.

const TOKEN_KEY = "dlc-ledger-token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** An error answer: RFC 9457 problem details when the server sent them. */
export class ApiError extends Error {
  constructor(status, problem, path) {
    const detail = problem?.detail ? `: ${problem.detail}` : "";
    super(`${problem?.title ?? "Error"} (${status})${detail}`);
    this.status = status;
    this.problem = problem;
    this.path = path;
  }
}

/** Listeners told of a 401 (the token is unknown, revoked or missing). */
const unauthorized = new Set();
export function onUnauthorized(listener) {
  unauthorized.add(listener);
}

/** "v1/x" + {a: 1, b: ""} -> "v1/x?a=1" (empty values left out; relative to the page). */
export function url(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const qs = query.toString();
  return qs ? `${path}?${qs}` : path;
}

async function request(path, params, accept) {
  const response = await fetch(url(path, params), {
    headers: { Authorization: `Bearer ${token() ?? ""}`, Accept: accept },
    credentials: "omit",
    cache: "no-store",
  });
  if (!response.ok) {
    let problem = null;
    try {
      problem = await response.json();
    } catch {
      problem = { title: response.statusText, status: response.status };
    }
    const error = new ApiError(response.status, problem, path);
    if (response.status === 401) for (const listener of unauthorized) listener(error);
    throw error;
  }
  return response;
}

/** GET a route's JSON. */
export async function getJson(path, params = {}) {
  return (await request(path, params, "application/json")).json();
}

/** Every item of a paginated list route (following next_cursor, at most `maxPages` pages
 *  of `params.limit`, default 1000): {items, complete, body} with `body` the first page's
 *  other fields (e.g. `at`). */
export async function getAll(path, params = {}, maxPages = 20) {
  const items = [];
  let cursor = null;
  let body = null;
  for (let page = 0; page < maxPages; page += 1) {
    const answer = await getJson(path, { limit: 1000, ...params, cursor });
    body = body ?? answer;
    items.push(...answer.items);
    cursor = answer.next_cursor;
    if (!cursor) return { items, complete: true, body };
  }
  return { items, complete: false, body };
}

function nextLink(response) {
  const header = response.headers.get("Link") ?? "";
  const match = header.match(/<([^>]+)>\s*;\s*rel="?next"?/);
  return match ? match[1] : null;
}

/** Save the server's CSV of a route (`?format=csv`) under `filename`: every page of it
 *  (the `Link: rel="next"` pages appended without their header row, at most `maxPages`). */
export async function downloadCsv(path, params, filename, maxPages = 50) {
  let response = await request(path, { limit: 1000, ...params, format: "csv" }, "text/csv");
  if (!(response.headers.get("Content-Type") ?? "").startsWith("text/csv")) {
    throw new ApiError(response.status, { title: "No CSV", detail: `${path} did not answer CSV` }, path);
  }
  const chunks = [await response.text()];
  for (let next = nextLink(response), page = 1; next && page < maxPages; page += 1) {
    const target = new URL(next, new URL(path, document.baseURI));
    response = await request(target.pathname.replace(/^\//, "") + target.search, {}, "text/csv");
    const text = await response.text();
    if (!chunks.at(-1).endsWith("\n")) chunks.push("\n");
    chunks.push(text.slice(text.indexOf("\n") + 1));
    next = nextLink(response);
  }
  const blob = new Blob(chunks, { type: "text/csv" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}
