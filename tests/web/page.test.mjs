// The built-in page (web/) in Debian's chromium against `llamay serve` on the demo model: what the issue
// asks of it, through the page as a person would use it, checked against what the API reports.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { T, api, cellText, launch, memPages, openPage, rowIds, shotPath, startServer, state, until } from './lib/harness.mjs';
import { startProxy } from './lib/proxy.mjs';

const SYSTEM = 'You are the test assistant of the llamay page. Answer in one short sentence, and mind the pages. ';
let server;
let browser;
let ui; // { page, record, response }

before(async () => {
  // LLAMAY_WEB_SERVE_ARGS: more `llamay serve` arguments, e.g. a real tiny model for a readable screenshot
  // ("-m ../shared/ref/models/stories260K.gguf -c 4096"; docs/webui.png is made that way).
  const extra = (process.env.LLAMAY_WEB_SERVE_ARGS ?? '').split(' ').filter(Boolean);
  [server, browser] = await Promise.all([startServer(['--page-tokens', '16', ...extra]), launch()]);
  ui = await openPage(browser, `${server.url}/`);
});

after(async () => {
  await browser?.close();
  const code = await server?.stop();
  assert.equal(code, 0, 'the server exits cleanly');
});

const page = () => ui.page;
const live = () => page().waitForSelector('#conn.live', { timeout: T(5000) });
const row = (id) => page().waitForSelector(`.ctx-row[data-id="${id}"]`, { timeout: T(2000) });
const select = async (id) => {
  await page().locator(`.ctx-row[data-id="${id}"]`).click({ timeout: T(2000) });
  await page().waitForSelector(`.ctx-row.selected[data-id="${id}"]`);
};
async function create(prompt) {
  const r = await api(server.url, '/v1/contexts', { body: { prompt } });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

test('the page loads with no console error, no request off loopback, and a CSP header', async () => {
  const headers = ui.response.headers();
  assert.equal(ui.response.status(), 200);
  assert.match(headers['content-security-policy'] ?? '', /default-src 'self'/);
  assert.equal(headers['x-content-type-options'], 'nosniff');
  await live();
  await page().waitForSelector('#info-list dd');
  assert.deepEqual(ui.record.errors, []);
  const off = ui.record.requests.filter((u) => new URL(u).hostname !== '127.0.0.1');
  assert.deepEqual(off, []);
  assert.equal(await page().getAttribute('#metrics-link', 'href'), '/metrics');
});

test('a fork made through the API appears in the tree within 2 s, with the shared pages the API reports', async () => {
  const parent = await create(`${SYSTEM}A parent context long enough to hold several pages of sixteen tokens each.`);
  await row(parent.id);
  const t0 = Date.now();
  const fork = await api(server.url, `/v1/contexts/${parent.id}/fork?n=1`, { method: 'POST' });
  const child = fork.json.branches[0].id;
  await row(child);
  const st = await state(server.url);
  const want = st.contexts.find((c) => c.id === child);
  assert.ok(want.pages_shared > 0, 'a fork shares its parent pages');
  await until('the shared-page count of the API', async () => (await cellText(page(), child, 'ctx-shared')) === String(want.pages_shared), T(2000) - (Date.now() - t0));
  assert.ok(Date.now() - t0 <= T(2000), `${Date.now() - t0} ms`);
  // The strip of the child: one cell per page, each shared with the parent, who is named on hover.
  await select(child);
  // The strip loads its pages after the selection ("loading…" until then): wait for its cells.
  await page().waitForSelector('#strip-body .group .cell', { timeout: T(2000) });
  const pages = (await api(server.url, `/v1/contexts/${child}/pages`)).json;
  const cells = await page().$$eval('#strip-body .group:not(.recurrent)', (gs) => gs.map((g) => [...g.querySelectorAll('.cell')].map((c) => Number(c.dataset.refs))));
  assert.deepEqual(cells, pages.groups.map((g) => [...Array(g.first_page ?? 0).fill(0), ...g.pages.map((p) => p.refs)]));
  await page().hover('#strip-body .cell');
  assert.match(await page().textContent('#strip-hover'), new RegExp(parent.id));
  // A live update redraws the strip under the pointer (here another holder of the child's pages): the hover
  // text stays, now naming the new holder too.
  const refs = await page().getAttribute('#strip-body .cell', 'data-refs');
  const again = (await api(server.url, `/v1/contexts/${child}/fork?n=1`, { method: 'POST' })).json.branches[0].id;
  await until('the strip redrawn', async () => (await page().getAttribute('#strip-body .cell', 'data-refs')) !== refs);
  const hover = await page().textContent('#strip-hover');
  assert.match(hover, new RegExp(parent.id));
  assert.match(hover, new RegExp(again));
  assert.deepEqual(ui.record.errors, []);
});

test("the page's Fork button with n=2 adds two children", async () => {
  const parent = await create(`${SYSTEM}Fork me twice.`);
  await select(parent.id);
  const before = (await state(server.url)).contexts.length;
  await page().fill('#fork-n', '2');
  await page().click('#fork-btn');
  const st = await until('two children', async () => {
    const s = await state(server.url);
    return s.contexts.filter((c) => c.parent === parent.id).length === 2 && s;
  });
  assert.equal(st.contexts.length, before + 2);
  for (const c of st.contexts.filter((x) => x.parent === parent.id)) await row(c.id);
});

let snapshotFile;
let restored;
test('a snapshot downloaded from the page is byte-identical to GET .../snapshot', async () => {
  const ctx = await create(`${SYSTEM}Snapshot me.`);
  await select(ctx.id);
  const [download] = await Promise.all([page().waitForEvent('download'), page().click('#snapshot-btn')]);
  snapshotFile = await download.path();
  const fromPage = readFileSync(snapshotFile);
  const fromApi = await api(server.url, `/v1/contexts/${ctx.id}/snapshot`, { raw: true });
  assert.equal(fromApi.status, 200);
  assert.ok(fromPage.length > 0);
  assert.ok(Buffer.from(fromApi.bytes).equals(fromPage), `page ${fromPage.length} bytes, API ${fromApi.bytes.length}`);
  assert.equal(download.suggestedFilename(), `${ctx.id}.llamayctx`);
});

test('a restore through the file input grows the tree, and the next chat turn reuses its tokens', async () => {
  const before = await rowIds(page());
  await page().setInputFiles('#restore-file', snapshotFile);
  const added = await until('a new row', async () => (await rowIds(page())).find((id) => !before.includes(id)));
  await page().waitForSelector(`.ctx-row.selected[data-id="${added}"]`);
  restored = added;
  await page().fill('#prompt', 'What did I say?');
  await page().press('#prompt', 'Enter');
  const stats = await page().waitForSelector('.turn:not(.pending) .turn-stats', { timeout: T(30000) });
  assert.ok(Number(await stats.getAttribute('data-reused')) > 0, await stats.textContent());
  // Fork here: two branches of this turn, the next message answered in both, side by side.
  await page().fill('#branch-n', '2');
  await page().click('#fork-here');
  await page().waitForSelector('.columns .column:nth-child(2)');
  await page().fill('#prompt', 'And then?');
  await page().press('#prompt', 'Enter');
  await until('both branches answered', async () => (await page().$$('.column .turn:not(.pending) .turn-stats')).length === 2, T(30000));
  const reused = await page().$$eval('.column .turn-stats', (els) => els.map((e) => Number(e.dataset.reused)));
  assert.ok(reused.every((r) => r > 0), `reused ${reused}`);
  await page().click('#single-view');
});

test('a delete frees pages in the memory bar', async () => {
  const ctx = await create(`${SYSTEM}Delete me: ${'a unique tail that nothing else holds. '.repeat(6)}`);
  await select(ctx.id);
  const held = (m) => m.unique + m.shared;
  const beforeBar = await until('the bar counts the context', async () => {
    const m = await memPages(page());
    const p = (await state(server.url)).pool.pages;
    return held(m) === p.unique + p.shared && m;
  });
  await page().click('#delete-btn');
  await until('the row to go', async () => !(await rowIds(page())).includes(ctx.id), T(2000));
  const st = await state(server.url);
  assert.ok(!st.contexts.some((c) => c.id === ctx.id));
  await until('fewer pages held by contexts in the bar', async () => held(await memPages(page())) < held(beforeBar), T(2000));
  const bar = await memPages(page());
  const pool = (await state(server.url)).pool.pages;
  assert.equal(held(bar), pool.unique + pool.shared);
});

test('two requests that share a system prompt show a prefix node with hits', async () => {
  const system = `${SYSTEM}This system prompt is shared by two requests, so the second one finds it in the prefix tree.`;
  for (const user of ['first question', 'second question']) {
    const r = await api(server.url, '/v1/chat/completions', {
      body: { messages: [{ role: 'system', content: system }, { role: 'user', content: user }], max_tokens: 2 },
    });
    assert.equal(r.status, 200, r.text);
  }
  const hit = await until('a prefix node with hits', async () => {
    const rows = await page().$$eval('.prefix-row', (rs) => rs.map((r) => ({ hits: Number(r.dataset.hits), text: r.querySelector('.prefix-text').title })));
    return rows.find((r) => r.hits > 0 && r.text.length > 0);
  }, T(3000));
  assert.ok(hit.hits >= 1);
  assert.notEqual(await page().textContent('#prefix-top'), 'none yet');
});

test('a full-page screenshot', async () => {
  // A scene for a person: the restored conversation forked here into two branches answered side by side,
  // the strip of one branch with its divergence point, a page hovered.
  await select(restored);
  await page().click('#fork-here');
  await page().waitForSelector('.columns .column:nth-child(2)');
  await page().fill('#prompt', 'Tell me a story.');
  await page().press('#prompt', 'Enter');
  await until('both branches answered', async () => (await page().$$('.column .turn:not(.pending) .turn-stats')).length === 2, T(30000));
  await page().waitForSelector('#strip-body .divergence', { timeout: T(3000) });
  await page().hover('#strip-body .cell');
  await page().waitForTimeout(1200); // a stats tick or two for the sparkline
  const file = shotPath('webui.png');
  await page().screenshot({ path: file, fullPage: true });
  console.log(`screenshot: ${file}`);
  assert.deepEqual(ui.record.errors, []);
});

test('a /v1/state answer that raced a fork neither drops the new child from the tree nor moves the selection off it', async () => {
  const p = await openPage(browser, `${server.url}/`);
  try {
    await p.page.waitForSelector('#conn.live', { timeout: T(5000) });
    // The next /v1/state is read from the server at once but handed to the page only once the fork's event
    // has been applied and the child selected: an answer older than what the page shows.
    let release;
    const held = new Promise((r) => (release = r));
    let reads = 0;
    let read = false;
    let second = false;
    await p.page.route('**/v1/state', async (route) => {
      ++reads;
      // The answer after the stale one comes late, so that the page draws (once a second at least) while
      // it waits for it.
      if (reads === 2) {
        await new Promise((r) => setTimeout(r, 1500));
        await route.continue();
        second = true;
        return;
      }
      if (reads > 2) return route.continue();
      const answer = await route.fetch();
      read = true;
      await held;
      await route.fulfill({ response: answer });
    });
    const parent = await create(`${SYSTEM}A parent whose fork races a reload.`);
    await until('the held /v1/state read', async () => read);
    const child = (await api(server.url, `/v1/contexts/${parent.id}/fork?n=1`, { method: 'POST' })).json.branches[0].id;
    await p.page.locator(`.ctx-row[data-id="${child}"]`).click({ timeout: T(2000) });
    await p.page.waitForSelector(`.ctx-row.selected[data-id="${child}"]`);
    // Whether the child's row ever leaves the tree: the stale answer is not applied, so it must not (a row
    // that vanishes for a frame loses a click on it).
    await p.page.evaluate((id) => {
      window.rowLost = false;
      const rows = document.querySelector('#ctx-rows');
      new MutationObserver(() => {
        if (!rows.querySelector(`.ctx-row[data-id="${id}"]`)) window.rowLost = true;
      }).observe(rows, { childList: true });
    }, child);
    release();
    // The stale answer makes the page read /v1/state again; after that one the child is still selected.
    await until('the answer after the stale one', async () => second);
    await p.page.waitForSelector('#strip-body .group .cell', { timeout: T(2000) });
    assert.equal(await p.page.textContent('#strip-id'), child);
    assert.equal(await p.page.getAttribute('.ctx-row.selected', 'data-id'), child);
    assert.equal(await p.page.evaluate(() => window.rowLost), false, 'the fork stayed in the tree throughout');
    assert.deepEqual(p.record.errors, []);
  } finally {
    await p.context.close();
  }
});

test('when the event stream drops, the page re-syncs: polls /v1/state, then resumes the stream', async () => {
  const proxy = await startProxy(server.url);
  const p = await openPage(browser, `${proxy.url}/`);
  try {
    await p.page.waitForSelector('#conn.live', { timeout: T(5000) });
    proxy.cut(3000);
    await p.page.waitForSelector('#conn.polling', { timeout: T(2000) });
    // A change while the stream is down comes in by polling.
    const a = await create(`${SYSTEM}Made while the stream was down.`);
    await p.page.waitForSelector(`.ctx-row[data-id="${a.id}"]`, { timeout: T(3000) });
    // The stream comes back by itself, and changes arrive through it again.
    await p.page.waitForSelector('#conn.live', { timeout: T(6000) });
    const f = await api(server.url, `/v1/contexts/${a.id}/fork?n=1`, { method: 'POST' });
    await p.page.waitForSelector(`.ctx-row[data-id="${f.json.branches[0].id}"]`, { timeout: T(1500) });
    assert.equal(proxy.openStreams(), 1);
    // A restart: another server run behind the same address, its event ids from 1 again. The page's
    // Last-Event-ID is beyond them, so the server answers `resync`, and the page shows the new run's
    // contexts only.
    const other = await startServer(['--page-tokens', '16']);
    try {
      await api(other.url, '/v1/contexts', { body: { prompt: 'On the restarted server.' } });
      const want = JSON.stringify((await state(other.url)).contexts.map((c) => c.id).sort());
      proxy.retarget(other.url);
      proxy.cut(0);
      await until('the contexts of the new run only', async () => JSON.stringify((await rowIds(p.page)).sort()) === want, T(5000));
      await p.page.waitForSelector('#event-log li[data-type="resync"]', { timeout: T(5000) });
      await p.page.waitForSelector('#conn.live', { timeout: T(5000) });
    } finally {
      await other.stop();
    }
  } finally {
    await p.context.close();
    await proxy.close();
  }
});

test('with --api-key the page asks for the key once and uses it for every request and the stream', async () => {
  const keyed = await startServer(['--api-key', 'web-test-key']);
  const p = await openPage(browser, `${keyed.url}/`);
  try {
    await p.page.waitForSelector('#key-dialog[open]', { timeout: T(5000) });
    await p.page.fill('#key-input', 'web-test-key');
    await p.page.press('#key-input', 'Enter');
    await p.page.waitForSelector('#conn.live', { timeout: T(5000) });
    const r = await api(keyed.url, '/v1/contexts', { body: { prompt: 'keyed' }, key: 'web-test-key' });
    await p.page.waitForSelector(`.ctx-row[data-id="${r.json.id}"]`, { timeout: T(2000) });
    await p.page.click(`.ctx-row[data-id="${r.json.id}"]`);
    await p.page.click('#fork-btn');
    await until('a fork made with the key', async () =>
      (await state(keyed.url, 'web-test-key')).contexts.some((c) => c.parent === r.json.id));
    const [download] = await Promise.all([p.page.waitForEvent('download'), p.page.click('#snapshot-btn')]);
    const fromApi = await api(keyed.url, `/v1/contexts/${r.json.id}/snapshot`, { raw: true, key: 'web-test-key' });
    assert.ok(Buffer.from(fromApi.bytes).equals(readFileSync(await download.path())));
    assert.equal(await p.page.evaluate(() => sessionStorage.getItem('llamay.apiKey')), 'web-test-key');
    // A reload does not ask again: the key stays for the tab.
    await p.page.reload();
    await p.page.waitForSelector('#conn.live', { timeout: T(5000) });
    assert.equal(await p.page.$('#key-dialog[open]'), null);
  } finally {
    await p.context.close();
    assert.equal(await keyed.stop(), 0);
  }
});
