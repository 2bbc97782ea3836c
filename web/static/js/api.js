// The dashboard's only way to the network: same-origin GETs to the agent's /api/v1.
//
// A 401 means the agent wants its token and the `proctor_token` cookie is missing or stale
// (the agent restarted with another token, say). Fetch sends same-origin cookies on its own,
// so the fix is to set the cookie again and retry; `onUnauthorized` lets the page ask for it.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = { unauthorized: [], reachable: [], unreachable: [] };

export function on(event, fn) {
  listeners[event].push(fn);
}

function emit(event, detail) {
  for (const fn of listeners[event]) fn(detail);
}

/** GET `path` and parse JSON; throws ApiError with the server's code and message. */
export async function get(path, { signal } = {}) {
  let resp;
  try {
    resp = await fetch(path, { credentials: "same-origin", cache: "no-store", signal });
  } catch (e) {
    // Cancelled or timed out by the caller's signal: the caller says what that means.
    if (e.name === "AbortError" || e.name === "TimeoutError") throw e;
    emit("unreachable", e);
    throw new ApiError(0, "unreachable", "the agent does not answer");
  }
  emit("reachable");
  if (resp.status === 401) {
    emit("unauthorized");
    throw new ApiError(401, "unauthorized", "the agent wants its token");
  }
  if (!resp.ok) {
    let code = "http_" + resp.status;
    let message = resp.statusText;
    try {
      const body = await resp.json();
      code = body.error?.code ?? code;
      message = body.error?.message ?? message;
    } catch {
      // Not JSON: keep the status line.
    }
    throw new ApiError(resp.status, code, message);
  }
  return resp.json();
}

/** Stores the token the way the agent's sign-in page does: a same-site cookie for this path. */
export function setToken(token) {
  document.cookie = `proctor_token=${encodeURIComponent(token)}; SameSite=Strict; path=/`;
}

/** Builds `path?k=v&…`, leaving out null and undefined values. */
export function url(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined) q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}
