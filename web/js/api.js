// Requests to the llamay server, with the API key (kept in sessionStorage, asked once) as a Bearer token.

const KEY = 'llamay.apiKey';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const apiKey = {
  get: () => sessionStorage.getItem(KEY) ?? '',
  set: (k) => sessionStorage.setItem(KEY, k),
};

export function authHeaders(extra = {}) {
  const k = apiKey.get();
  return k ? { ...extra, Authorization: `Bearer ${k}` } : extra;
}

// fetch with the key; a non-2xx answer throws an ApiError with the server's message.
export async function request(path, { method = 'GET', json, body, headers, signal } = {}) {
  const h = authHeaders(headers);
  if (json !== undefined) {
    h['Content-Type'] = 'application/json';
    body = JSON.stringify(json);
  }
  const res = await fetch(path, { method, body, headers: h, signal });
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    try {
      msg = (await res.json()).error?.message ?? msg;
    } catch {}
    throw new ApiError(res.status, msg);
  }
  return res;
}

export const getJson = async (path) => (await request(path)).json();
export const postJson = async (path, json) => (await request(path, { method: 'POST', json })).json();
