// Helpers of the browser tests: the llamay binary and models, `llamay serve` on a free loopback port,
// Debian's chromium driven by playwright-core (never a downloaded browser), and a page that records every
// console error and every request it makes.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
// ctest passes the binary it built; by hand, the usual build folders are tried.
export const BIN = process.env.LLAMAY_BIN ??
  ['build/web/bin/llamay', 'build/release/bin/llamay'].map((p) => join(ROOT, p)).find((p) => existsSync(p));
export const SHARED = process.env.LLAMAY_SHARED ?? join(ROOT, '../shared');
export const CHROMIUM = process.env.LLAMAY_CHROMIUM ?? '/usr/bin/chromium';
// Where screenshots go: a folder a person looks at (ctest gives one under the build folder).
export const SHOTS = process.env.LLAMAY_WEB_SCREENSHOTS ?? join(ROOT, 'build/web-screenshots');
export const model = (name) => join(SHARED, 'ref/models', `${name}.gguf`);

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Time limits scale with E2E_TIME_SCALE (10 under the sanitizer presets, whose servers run many times
// slower), as the e2e tests' do; 1 otherwise, where the limits are the issue's (a fork in the tree in 2 s).
export const T = (ms) => ms * (Number(process.env.E2E_TIME_SCALE) || 1);

const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

// Starts `llamay serve --port 0 ARGS`; resolves to { url, log(), stop() } once /health answers.
export async function startServer(args = []) {
  if (!BIN || !existsSync(BIN)) throw new Error(`no llamay binary (set LLAMAY_BIN or build it): ${BIN}`);
  // LLAMAY_WEBUI_DIR: the page from a folder instead of the copy built into the binary (developing it).
  if (process.env.LLAMAY_WEBUI_DIR) args = ['--webui-dir', process.env.LLAMAY_WEBUI_DIR, ...args];
  const child = spawn(BIN, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const port = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`llamay serve printed no port in 30 s:\n${log}`)), 30000);
    child.stderr.on('data', () => {
      const m = log.match(/ on http:\/\/127\.0\.0\.1:(\d+) /);
      if (m) {
        clearTimeout(timer);
        res(Number(m[1]));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`llamay serve exited (${code}) before listening:\n${log}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; !(await fetch(`${url}/health`).then((r) => r.ok, () => false)); i++) {
    if (i > 100) throw new Error(`llamay serve does not answer /health:\n${log}`);
    await sleep(100);
  }
  return {
    url,
    log: () => log,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
      children.delete(child);
      return child.exitCode;
    },
  };
}

// JSON over HTTP from the test itself (not the page): { status, json, text }. Throws on a 5xx.
export async function api(base, path, { method, body, key, raw } = {}) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  let payload = body;
  if (body !== undefined && !(body instanceof Uint8Array)) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(base + path, { method: method ?? (body !== undefined ? 'POST' : 'GET'), body: payload, headers });
  if (res.status >= 500) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  if (raw) return { status: res.status, bytes: new Uint8Array(await res.arrayBuffer()) };
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, text };
}

export const state = async (base, key) => (await api(base, '/v1/state', { key })).json;

export async function launch() {
  if (!existsSync(CHROMIUM)) throw new Error(`no chromium at ${CHROMIUM}: run scripts/setup (it installs Debian's chromium)`);
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

// A new page that records console errors, uncaught exceptions and the URL of every request.
export async function openPage(browser, url) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  // Playwright's own waits (30 s unless told) scale too: a sanitizer build's server answers slowly.
  page.setDefaultTimeout(T(30000));
  const record = { errors: [], requests: [] };
  // Not an error: the strip's page map of a context that a request (the page's own, or another client's)
  // holds at that moment answers 409, which the page expects and waits out (web/js/main.js, loadStrip); the
  // browser still logs the status.
  const busyStrip = (m) => /status of 409/.test(m.text()) && /\/v1\/contexts\/[^/]+\/pages$/.test(m.location()?.url ?? '');
  page.on('console', (m) => m.type() === 'error' && !busyStrip(m) && record.errors.push(m.text()));
  page.on('pageerror', (e) => record.errors.push(`uncaught: ${e.message}`));
  page.on('request', (r) => record.requests.push(r.url()));
  const response = await page.goto(url);
  return { page, context, response, record };
}

// Polls fn until it returns a truthy value; throws with `what` after ms.
export async function until(what, fn, ms = T(5000)) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${last})`);
    await sleep(50);
  }
}

export function shotPath(name) {
  mkdirSync(SHOTS, { recursive: true });
  return join(SHOTS, name);
}

// The page's figures, read from the DOM.
export const rowIds = (page) => page.$$eval('.ctx-row', (rows) => rows.map((r) => r.dataset.id));
export const cellText = (page, id, cls) => page.$eval(`.ctx-row[data-id="${id}"] .${cls}`, (e) => e.textContent).catch(() => null);
export const memPages = (page) => page.$$eval('#memlegend [data-pages]',
  (els) => Object.fromEntries(els.map((e) => [e.className.replace('mem-', ''), Number(e.dataset.pages)])));
