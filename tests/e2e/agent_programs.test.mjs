// The agent programs themselves, installed from npm by scripts/setup (pinned in package-lock.json), end to
// end against `llamay serve` on loopback: Claude Code in print mode, twice, the second run reading at least
// 90% of its prompt from the prefix tree; `codex exec` completing a turn over the Responses API; and
// `opencode run` over Chat Completions (the AI SDK's OpenAI-compatible provider).
// Tiny models write nonsense: what is tested is the protocol. run.sh starts the server with a context large
// enough for their system prompts (-c 65536).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { URL_MAIN as U, TMP, http } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const claudeBin = path.join(here, 'node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs');
const codexBin = path.join(here, 'node_modules/@openai/codex/bin/codex.js');
const opencodeBin = path.join(here, 'node_modules/opencode-ai/bin/opencode.exe');
for (const bin of [claudeBin, codexBin, opencodeBin]) {
  if (!existsSync(bin)) {
    console.error(`FAIL: ${bin} is missing; run scripts/setup`);
    process.exit(1);
  }
}
const model = (await http(`${U}/v1/models`)).json.data[0].id;

// Runs a program to its end; resolves to { code, stdout, stderr }. Killed after `timeoutMs`.
function run(cmd, args, env, timeoutMs = 240000) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], cwd: TMP });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, stdout, stderr });
    });
  });
}

test('Claude Code: claude -p twice; the second run reads >= 90% of its prompt from the cache', async () => {
  const home = path.join(TMP, 'claude-home');
  mkdirSync(home, { recursive: true });
  const env = {
    HOME: home, CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
    ANTHROPIC_BASE_URL: U, ANTHROPIC_API_KEY: 'unused', ANTHROPIC_MODEL: model, ANTHROPIC_SMALL_FAST_MODEL: model,
    DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1', DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  };
  // Two tools keep the system prompt near 14k tokens (its full tool set is about 110k on a byte vocabulary).
  const args = [claudeBin, '-p', 'say hi', '--output-format', 'json', '--max-turns', '1', '--tools', 'Read', 'Bash'];
  const results = [];
  for (let i = 0; i < 2; ++i) {
    const r = await run(process.execPath, args, env);
    assert.equal(r.code, 0, `claude exited ${r.code}: ${r.stderr}\n${r.stdout}`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    assert.equal(out.type, 'result', r.stdout);
    assert.equal(out.is_error, false, r.stdout);
    results.push(out);
  }
  const u = results[1].usage;
  const prompt = u.input_tokens + u.cache_read_input_tokens;
  assert.ok(prompt > 1000, `a prompt of ${prompt} tokens is not Claude Code's`);
  assert.ok(u.cache_read_input_tokens >= 0.9 * prompt,
    `the second run read ${u.cache_read_input_tokens} of ${prompt} prompt tokens from the cache`);
});

test('Codex: codex exec completes a turn over the Responses API', async () => {
  const home = path.join(TMP, 'codex-home');
  mkdirSync(home, { recursive: true });
  writeFileSync(path.join(home, 'config.toml'), [
    `model = "${model}"`, 'model_provider = "llamay"', '',
    '[model_providers.llamay]', 'name = "llamay"', `base_url = "${U}/v1"`, 'wire_api = "responses"', '',
  ].join('\n'));
  const r = await run(process.execPath, [codexBin, 'exec', '--json', '--skip-git-repo-check', 'say hi'],
    { CODEX_HOME: home, HOME: home, RUST_LOG: 'error' });
  const events = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const types = events.map((e) => e.type);
  assert.equal(r.code, 0, `codex exited ${r.code}: ${r.stderr}\n${r.stdout}`);
  assert.ok(types.includes('turn.completed'), `no turn.completed: ${types.join(', ')}\n${r.stderr}`);
  assert.ok(!types.includes('turn.failed') && !types.includes('error'), r.stdout);
  const done = events.find((e) => e.type === 'turn.completed');
  assert.ok(done.usage.input_tokens > 1000, JSON.stringify(done.usage));
});

test('opencode: opencode run answers over Chat Completions', async () => {
  const home = path.join(TMP, 'opencode-home');
  const project = path.join(TMP, 'opencode-project');
  mkdirSync(path.join(home, '.config', 'opencode'), { recursive: true });
  mkdirSync(project, { recursive: true });
  const config = path.join(project, 'opencode.json');
  writeFileSync(config, JSON.stringify({
    provider: { llamay: { npm: '@ai-sdk/openai-compatible', name: 'llamay', options: { baseURL: `${U}/v1` },
      models: { [model]: { name: model } } } },
    model: `llamay/${model}`,
  }));
  const r = await new Promise((resolve) => {
    const child = spawn(opencodeBin, ['run', '-m', `llamay/${model}`, 'say hi'],
      { env: { ...process.env, HOME: home, OPENCODE_CONFIG: config }, cwd: project,
      stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 240000);
    child.on('close', (code, signal) => { clearTimeout(timer); resolve({ code: code ?? signal, stdout, stderr }); });
  });
  assert.equal(r.code, 0, `opencode exited ${r.code}: ${r.stderr}\n${r.stdout}`);
  assert.ok(r.stdout.trim().length > 0, `opencode printed no answer: ${r.stderr}`);
  assert.ok(!/error/i.test(r.stderr.replace(/\x1b\[[0-9;]*m/g, '')), r.stderr);
});
