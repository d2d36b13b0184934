// The page on a hybrid model (tiny-granitehybrid: Mamba-2 layers with a recurrent state, and attention)
// and a sliding-window one (tiny-gemma3): the strip has a row per layer group, the recurrent state and
// its checkpoints appear as what they are, pages outside the window as released, and chat reuses.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { T, api, launch, model, openPage, shotPath, startServer, state, until } from './lib/harness.mjs';

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

// A prompt of a few hundred tokens: past tiny-gemma3's window, several pages of 16 tokens.
const PROMPT = 'Once upon a time there was a little cat who liked to sit in the sun. '.repeat(12);

async function check(name, t) {
  const path = model(name);
  if (!existsSync(path)) return t.skip(`${path} is absent`);
  const server = await startServer(['-m', path, '--page-tokens', '16']);
  const p = await openPage(browser, `${server.url}/`);
  try {
    await p.page.waitForSelector('#conn.live', { timeout: T(5000) });
    const ctx = (await api(server.url, '/v1/contexts', { body: { prompt: PROMPT } })).json;
    const fork = (await api(server.url, `/v1/contexts/${ctx.id}/fork?n=1`, { method: 'POST' })).json;
    const child = fork.branches[0].id;
    await p.page.click(`.ctx-row[data-id="${child}"]`, { timeout: T(2000) });
    await p.page.waitForSelector(`.ctx-row.selected[data-id="${child}"]`, { timeout: T(2000) });
    const want = (await api(server.url, `/v1/contexts/${child}/pages`)).json;
    await p.page.waitForSelector('#strip-body .group');
    const groups = await p.page.$$eval('#strip-body .group:not(.recurrent)', (gs) => gs.map((g) => ({
      cells: g.querySelectorAll('.cell').length,
      released: g.querySelectorAll('.cell.released').length,
    })));
    assert.deepEqual(groups, want.groups.map((g) => ({ cells: (g.first_page ?? 0) + g.pages.length, released: g.first_page ?? 0 })));
    const st = await state(server.url);
    const attention = st.server.layer_groups.filter((g) => g.kind !== 'recurrent');
    assert.equal(groups.length, attention.length, 'a strip row per attention layer group');
    if (want.recurrent) {
      const rec = await p.page.waitForSelector('#strip-body .group.recurrent');
      assert.equal((await rec.$$('.ckpt')).length, want.recurrent.checkpoints.length);
      assert.match(await rec.textContent(), new RegExp(`recurrent state at ${want.recurrent.state_position}`));
    }
    // The next turn on the fork reuses what it holds.
    await p.page.fill('#prompt', 'And then?');
    await p.page.press('#prompt', 'Enter');
    const stats = await p.page.waitForSelector('.turn:not(.pending) .turn-stats', { timeout: T(30000) });
    assert.ok(Number(await stats.getAttribute('data-reused')) > 0, await stats.textContent());
    assert.equal(await p.page.textContent('#chat-ctx'), child, 'the turn went to the selected fork');
    assert.equal(await p.page.$('.turn .error'), null, 'the turn ended without an error');
    const held = (await state(server.url)).contexts.find((c) => c.id === child);
    assert.ok(held?.tokens > ctx.tokens, `the server holds the grown fork: ${JSON.stringify(held)}`);
    try {
      await until('the grown context in the tree', async () =>
        Number((await p.page.textContent(`.ctx-row[data-id="${child}"] .ctx-tokens`)).replace(/,/g, '')) > ctx.tokens);
    } catch (e) {
      // What the page saw, for a failure that does not show here: its rows and its latest events.
      const rows = await p.page.$$eval('.ctx-row', (rs) => rs.map((r) => r.textContent).join(' | '));
      const log = await p.page.$$eval('#event-log li', (ls) => ls.slice(0, 12).map((l) => l.textContent).join(' | '));
      e.message += `\nrows: ${rows}\nevents: ${log}\nconnection: ${await p.page.textContent('#conn')}`;
      throw e;
    }
    await p.page.screenshot({ path: shotPath(`webui-${name}.png`), fullPage: true });
    assert.deepEqual(p.record.errors, []);
    return { want, st };
  } finally {
    await p.context.close();
    assert.equal(await server.stop(), 0);
  }
}

test('a hybrid model: pages per attention group, the recurrent state and its checkpoints', async (t) => {
  const r = await check('tiny-granitehybrid-f32', t);
  if (r) assert.ok(r.want.recurrent, 'the hybrid model reports its recurrent state');
});

test('a sliding-window model: a row per group, pages outside the window released', async (t) => {
  const r = await check('tiny-gemma3-f32', t);
  if (r) assert.ok(r.want.groups.some((g) => g.window > 0), 'gemma3 has a windowed group');
});
