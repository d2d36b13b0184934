// Helpers for the JavaScript end-to-end tests: HTTP with a record of every status seen (so a test can
// assert that no 5xx was ever returned), and extra `llamay serve` processes on free loopback ports,
// stopped when the test process exits. run.sh starts the main server and exports LLAMAY_URL.
import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';

export const BIN = process.env.LLAMAY_BIN;
export const URL_MAIN = process.env.LLAMAY_URL;
export const SHARED = process.env.LLAMAY_SHARED ?? '';
export const TMP = process.env.LLAMAY_E2E_TMP;
if (!BIN || !URL_MAIN || !TMP) {
  console.error('run this through tests/e2e/run.sh (ctest -L e2e): LLAMAY_BIN, LLAMAY_URL and LLAMAY_E2E_TMP are unset');
  process.exit(2);
}

// A client's limit for one request: ms, stretched by E2E_TIME_SCALE (10 under the sanitizer presets, whose
// prefill runs 10-40x slower) up to 300 s, as lib.sh's E2E_MAX_TIME for the bash tests.
export const requestTimeout = (ms) => Math.max(ms, Math.min(ms * (Number(process.env.E2E_TIME_SCALE) || 1), 300000));

// Every HTTP status this process received, by status code, and the requests that got a 5xx.
export const seen = new Map();
export const serverErrors = [];
export function record(method, url, status) {
  seen.set(status, (seen.get(status) ?? 0) + 1);
  if (status >= 500) serverErrors.push(`${method} ${url} -> ${status}`);
}

// fetch for the openai client, recording every status (so a test can assert that none was a 5xx).
export async function recordingFetch(url, init) {
  const res = await fetch(url, init);
  record(init?.method ?? 'GET', String(url), res.status);
  return res;
}

// fetch, recorded. Returns { status, headers, text, json (parsed or undefined), bytes (when opts.binary) }.
export async function http(url, opts = {}) {
  const method = opts.method ?? (opts.body !== undefined ? 'POST' : 'GET');
  let body = opts.body;
  const headers = { ...(opts.headers ?? {}) };
  if (body !== undefined && typeof body === 'object' && !(body instanceof Uint8Array) && !(body instanceof ReadableStream)) {
    body = JSON.stringify(body);
    headers['content-type'] ??= 'application/json';
  }
  const init = { method, body, headers, signal: opts.signal };
  if (body instanceof ReadableStream) init.duplex = 'half';
  const res = await fetch(url, init);
  record(method, url, res.status);
  const out = { status: res.status, headers: res.headers };
  if (opts.binary) {
    out.bytes = new Uint8Array(await res.arrayBuffer());
    return out;
  }
  out.text = await res.text();
  try {
    out.json = JSON.parse(out.text);
  } catch {
    out.json = undefined;
  }
  return out;
}

const children = new Set();
function killAll() {
  for (const c of children) {
    try {
      c.kill('SIGKILL');
    } catch {}
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(sig === 'SIGINT' ? 130 : 143));

// Starts `llamay serve --port 0 ARGS`; resolves to { url, pid, log(), stop() } once /health answers.
export async function startServer(args = [], { timeoutMs = 30000 } = {}) {
  const child = spawn(BIN, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  // A server left running (a test failed before stopping it) must not keep this process alive: it is
  // killed on exit instead.
  child.unref();
  child.stdout.unref();
  child.stderr.unref();
  if (process.env.LLAMAY_E2E_PIDS) appendFileSync(process.env.LLAMAY_E2E_PIDS, `${child.pid}\n`);
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`llamay serve ${args.join(' ')} printed no port in ${timeoutMs} ms:\n${log}`)), timeoutMs);
    const check = () => {
      const m = log.match(/ on http:\/\/127\.0\.0\.1:(\d+) /);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stderr.on('data', check);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`llamay serve ${args.join(' ')} exited (${code ?? signal}) before listening:\n${log}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch (e) {
      if (i > 100) throw e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    pid: child.pid,
    log: () => log,
    alive: () => child.exitCode === null && child.signalCode === null,
    // SIGTERM and wait; resolves to { code, signal } (code 0: a clean shutdown).
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
      const r = await exited;
      clearTimeout(timer);
      children.delete(child);
      return r;
    },
  };
}

// Resident set size of a process in KiB (VmRSS in /proc/PID/status), or NaN once it is gone.
export function rssKiB(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
