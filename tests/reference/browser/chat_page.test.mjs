// The chat page of `fornace serve` in Debian's headless Chromium, driven by puppeteer-core: send,
// streamed text, stop, reload, the API key prompt, --no-ui, a phone's viewport; screenshots go
// to FORNACE_ARTIFACTS. Needs FORNACE_BIN, FORNACE_MODELS and FORNACE_TOKENIZER_DIR as the
// OpenAI client tests do, and the chromium package (FORNACE_CHROMIUM overrides its path).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { modelId, startServer } from '../tiny_server.mjs';

let puppeteer;
try {
  ({ default: puppeteer } = await import('puppeteer-core'));
} catch (error) {
  console.error(
    `error: the npm package puppeteer-core is not installed (${error.message}); ` +
      'run scripts/get-test-packages.sh',
  );
  process.exit(1);
}
const chromium = process.env.FORNACE_CHROMIUM || '/usr/bin/chromium';
if (!existsSync(chromium)) {
  console.error(
    `error: no Chromium at ${chromium}; run scripts/setup.sh (Debian package chromium)`,
  );
  process.exit(1);
}
const artifacts = process.env.FORNACE_ARTIFACTS || 'build/test-artifacts/browser';
mkdirSync(artifacts, { recursive: true });

const apiKey = 'sk-browser-test';
const wait = { timeout: 20000 };
let browser;
const pageErrors = [];
let plain;
let keyed;
let noUi;

before(async () => {
  [plain, keyed, noUi] = await Promise.all([
    startServer(['--parallel', '2']),
    startServer(['--parallel', '1', '--api-key', apiKey]),
    startServer(['--parallel', '1', '--no-ui']),
  ]);
  // Root in a container has no user namespaces for Chromium's sandbox.
  const args = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: [...args, '--disable-dev-shm-usage'],
  });
});

after(async () => {
  await browser?.close();
  for (const server of [plain, keyed, noUi]) {
    if (!server) continue;
    server.child.kill('SIGTERM');
    const { code } = await server.exited;
    assert.equal(code, 0, 'fornace serve stops cleanly');
  }
});

// A page in a fresh profile (its own localStorage), recording every URL it asks for.
async function openPage(server, viewport = { width: 1200, height: 800 }) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  page.requested = [];
  page.on('request', (request) => page.requested.push(request.url()));
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.setViewport(viewport);
  const response = await page.goto(`${server.url}/`);
  assert.equal(response.status(), 200);
  return { context, page };
}

async function setField(page, selector, value) {
  await page.$eval(selector, (input) => {
    input.value = '';
  });
  await page.type(selector, String(value));
}

async function setSettings(page, settings) {
  if (await page.$eval('#settings', (section) => section.hidden))
    await page.click('#toggle-settings');
  if ('system' in settings) await setField(page, '#system-prompt', settings.system);
  await setField(page, '#temperature', settings.temperature);
  await setField(page, '#top-p', settings.top_p);
  await setField(page, '#max-tokens', settings.max_tokens);
  await setField(page, '#seed', settings.seed);
}

// Sends `text` and resolves to the body of the chat request the page made.
async function sendMessage(page, text) {
  const request = page.waitForRequest(
    (r) => r.url().endsWith('/v1/chat/completions') && r.method() === 'POST',
    wait,
  );
  await setField(page, '#prompt', text);
  await page.keyboard.press('Enter');
  return JSON.parse((await request).postData());
}

async function waitForAnswerEnd(page) {
  await page.waitForFunction(
    () =>
      !document.querySelector('.message.streaming') &&
      !document.getElementById('send').hidden &&
      document.getElementById('stop').hidden,
    wait,
  );
}

const lastAnswer = (page) =>
  page.$eval('.message.assistant:last-of-type', (article) => ({
    text: article.querySelector('.text').textContent,
    stats: article.querySelector('.stats').textContent,
    elementChildren: article.querySelector('.text').children.length,
  }));

// The same request, not streamed, through the API.
async function completeWithApi(server, body, headers = {}) {
  const { stream, stream_options: streamOptions, ...rest } = body;
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(rest),
  });
  assert.equal(response.status, 200);
  return response.json();
}

let session; // The page that the send, stop and reload tests share.
let firstAnswer;

test('a message streams in and its answer equals the same request through the API', async () => {
  session = await openPage(plain);
  const { page } = session;
  await page.waitForFunction(
    (id) => document.getElementById('model-name').textContent === id,
    wait,
    modelId,
  );
  // 240 tokens: at a few thousand tokens a second, 40 had come in one read of the stream (one
  // change of the text) in one CI run; this answer spans many.
  await setSettings(page, {
    system: 'You answer briefly.',
    temperature: 0,
    top_p: 1,
    max_tokens: 240,
    seed: 11,
  });
  // Every change of the last answer's text, as the page makes it.
  await page.evaluate(() => {
    window.observed = [];
    const box = document.getElementById('messages');
    new MutationObserver(() => {
      const answer = [...box.querySelectorAll('.message.assistant')].pop();
      if (answer) {
        window.observed.push({
          length: answer.querySelector('.text').textContent.length,
          streaming: answer.classList.contains('streaming'),
        });
      }
    }).observe(box, { childList: true, characterData: true, subtree: true });
  });
  const question = 'Tell me about <b>bold</b> & "quotes"';
  const body = await sendMessage(page, question);
  await waitForAnswerEnd(page);

  assert.deepEqual(body.messages, [
    { role: 'system', content: 'You answer briefly.' },
    { role: 'user', content: question },
  ]);
  assert.equal(body.model, modelId);
  assert.equal(body.stream, true);
  assert.deepEqual(body.stream_options, { include_usage: true });
  assert.equal(body.temperature, 0);
  assert.equal(body.top_p, 1);
  assert.equal(body.max_tokens, 240);
  assert.equal(body.seed, 11);

  const answer = await lastAnswer(page);
  const observed = await page.evaluate(() => window.observed);
  const whileStreaming = [
    ...new Set(observed.filter((o) => o.streaming && o.length > 0).map((o) => o.length)),
  ];
  assert.ok(
    whileStreaming.length >= 2,
    `the answer grew in steps while streaming: ${JSON.stringify(observed)}`,
  );
  assert.deepEqual(
    whileStreaming,
    [...whileStreaming].sort((a, b) => a - b),
    'the answer only grows',
  );
  assert.ok(
    whileStreaming[0] < answer.text.length,
    'the first text seen is less than the whole answer',
  );

  const reference = await completeWithApi(plain, body);
  assert.equal(answer.text, reference.choices[0].message.content);
  assert.ok(answer.text.length > 0);
  assert.equal(answer.elementChildren, 0, 'model text is text, not markup');
  const stats = /^(\d+) tokens? · ([\d.]+) tokens\/s · first token (\d+) ms/.exec(answer.stats);
  assert.ok(stats, `tokens and speed under the answer: "${answer.stats}"`);
  assert.equal(Number(stats[1]), reference.usage.completion_tokens);
  assert.ok(Number(stats[2]) > 0);

  const asked = await page.$eval('.message.user .text', (text) => ({
    text: text.textContent,
    children: text.children.length,
  }));
  assert.deepEqual(asked, { text: question, children: 0 });
  assert.deepEqual(
    await page.$$eval('.message button.copy', (buttons) =>
      buttons.map((b) => b.getAttribute('aria-label')),
    ),
    ['Copy the message', 'Copy the answer'],
  );
  assert.equal(
    await page.$eval('#conversation-list', (list) =>
      list.textContent.includes('Tell me about <b>bold</b>'),
    ),
    true,
  );
  await session.context.overridePermissions(plain.url, [
    'clipboard-read',
    'clipboard-write',
    'clipboard-sanitized-write',
  ]);
  await page.click('.message.assistant button.copy');
  await page.waitForFunction(
    () => document.querySelector('.message.assistant button.copy').textContent === 'Copied',
    wait,
  );
  assert.equal(
    await page.evaluate(() => navigator.clipboard.readText()),
    answer.text,
    'Copy puts the answer on the clipboard',
  );
  const foreign = page.requested.filter((url) => !url.startsWith(`${plain.url}/`));
  assert.deepEqual(foreign, [], 'the page loads nothing from elsewhere');
  firstAnswer = answer;
  await page.screenshot({ path: `${artifacts}/desktop.png` });
});

async function metric(server, name) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line.split(' ')[1]);
}

test('stop ends a long answer midway and the send button comes back', async () => {
  const { page } = session;
  await page.click('#new-chat');
  await setSettings(page, { temperature: 0, top_p: 1, max_tokens: 900, seed: 5 });
  const tokensBefore = await metric(plain, 'fornace_completion_tokens_total');
  const body = await sendMessage(page, 'Write a very long story.');
  await page.waitForFunction(
    () => {
      const answer = document.querySelector('.message.assistant.streaming .text');
      return answer && answer.textContent.length > 0;
    },
    { ...wait, polling: 'mutation' },
  );
  assert.equal(
    await page.$eval('#send', (button) => button.hidden),
    true,
    'no send while streaming',
  );
  await page.click('#stop');
  await waitForAnswerEnd(page);
  const stopped = await lastAnswer(page);
  assert.match(stopped.stats, /^stopped/);
  // The server ends the cancelled completion rather than running its 900 tokens.
  const deadline = Date.now() + 5000;
  while ((await metric(plain, 'fornace_active_slots')) !== 0) {
    assert.ok(Date.now() < deadline, 'the slot is freed after stop');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const generated = (await metric(plain, 'fornace_completion_tokens_total')) - tokensBefore;
  assert.ok(generated < 900, `the server stopped after ${generated} tokens`);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal((await lastAnswer(page)).text, stopped.text, 'no text after stop');
  await page.screenshot({ path: `${artifacts}/desktop-stopped.png` });
  // What arrived is the start of the answer that the same request, run further, gives.
  const longer = await completeWithApi(plain, { ...body, max_tokens: generated + 8 });
  const whole = longer.choices[0].message.content;
  assert.ok(
    stopped.text.length > 0 && stopped.text.length < whole.length,
    `stopped midway: ${stopped.text.length} of ${whole.length}`,
  );
  assert.ok(whole.startsWith(stopped.text));
  session.stoppedText = stopped.text;
});

test('a reload keeps the conversations, and stored text stays text', async () => {
  const { page } = session;
  // A stored conversation whose text is markup must show as text.
  await page.evaluate(() => {
    const conversations = JSON.parse(localStorage.getItem('fornace.conversations'));
    conversations.push({
      id: 'markup',
      title: '<img src=x>',
      messages: [
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: '<img src=x onerror="window.injected=1"><script>window.injected=2</script>',
        },
      ],
    });
    localStorage.setItem('fornace.conversations', JSON.stringify(conversations));
  });
  await page.reload();
  await page.waitForSelector('.conversation', wait);
  const titles = await page.$$eval('.conversation .open', (buttons) =>
    buttons.map((b) => b.textContent),
  );
  assert.deepEqual(titles, [
    'Write a very long story.',
    'Tell me about <b>bold</b> & "quotes"',
    '<img src=x>',
  ]);
  assert.equal((await lastAnswer(page)).text, session.stoppedText);
  assert.equal(
    await page.$eval('.conversation.current .open', (b) => b.getAttribute('aria-current')),
    'true',
  );

  await page.click('.conversation:nth-child(2) .open');
  assert.deepEqual(await lastAnswer(page), firstAnswer);
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
  await page.screenshot({ path: `${artifacts}/desktop-dark.png` });
  await page.emulateMediaFeatures([]);
  assert.deepEqual(await page.$$eval('.message .who', (names) => names.map((n) => n.textContent)), [
    'You',
    'Model',
  ]);

  await page.click('.conversation:nth-child(3) .open');
  const shown = await lastAnswer(page);
  assert.equal(
    shown.text,
    '<img src=x onerror="window.injected=1"><script>window.injected=2</script>',
  );
  assert.equal(shown.elementChildren, 0);
  assert.equal(await page.$$eval('#messages img, #messages script', (nodes) => nodes.length), 0);
  assert.equal(await page.evaluate(() => window.injected), undefined);
  await page.click('.conversation:nth-child(3) .delete');
  assert.equal(await page.$$eval('.conversation', (items) => items.length), 2);
});

test('on a phone the page fits the screen and the conversations slide in', async () => {
  const page = await session.context.newPage();
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.setViewport({
    width: 390,
    height: 844,
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
  });
  await page.goto(`${plain.url}/`);
  await page.waitForFunction(
    (id) => document.getElementById('model-name').textContent === id,
    wait,
    modelId,
  );
  const layout = await page.evaluate(() => {
    const rect = (id) => {
      const { left, right, top, bottom, width } = document
        .getElementById(id)
        .getBoundingClientRect();
      return { left, right, top, bottom, width };
    };
    return {
      scrollWidth: document.documentElement.scrollWidth,
      width: window.innerWidth,
      sidebarRight: rect('sidebar').right,
      toggle: rect('toggle-sidebar').width,
      send: rect('send'),
      prompt: rect('prompt'),
      promptFont: parseFloat(getComputedStyle(document.getElementById('prompt')).fontSize),
      viewport: document.querySelector('meta[name=viewport]').content,
    };
  });
  assert.equal(layout.width, 390);
  assert.ok(layout.scrollWidth <= layout.width, `no sideways scrolling: ${layout.scrollWidth}`);
  assert.ok(layout.sidebarRight <= 0, 'the conversation list is off screen');
  assert.ok(layout.toggle > 0, 'a button shows the conversations');
  assert.ok(
    layout.send.width > 0 && layout.send.right <= 390 && layout.send.bottom <= 844,
    'the send button is on screen',
  );
  assert.ok(layout.prompt.width > 200, `the message box is wide enough: ${layout.prompt.width}`);
  assert.ok(layout.promptFont >= 16, 'a 16px message box (phones zoom into smaller ones)');
  assert.match(layout.viewport, /width=device-width/);
  assert.equal((await lastAnswer(page)).text, session.stoppedText);

  await page.tap('#toggle-sidebar');
  await page.waitForFunction(
    () => document.getElementById('sidebar').getBoundingClientRect().left >= 0,
    wait,
  );
  assert.equal(await page.$eval('#toggle-sidebar', (b) => b.getAttribute('aria-expanded')), 'true');
  await page.screenshot({ path: `${artifacts}/phone-conversations.png` });
  const sidebarClosed = () => document.getElementById('sidebar').getBoundingClientRect().right <= 0;
  await page.touchscreen.tap(370, 400);
  await page.waitForFunction(sidebarClosed, wait);
  await page.tap('#toggle-sidebar');
  await page.waitForFunction(
    () => document.getElementById('sidebar').getBoundingClientRect().left >= 0,
    wait,
  );
  await page.tap('.conversation:nth-child(2) .open');
  await page.waitForFunction(sidebarClosed, wait);
  assert.deepEqual(await lastAnswer(page), firstAnswer);
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  await page.screenshot({ path: `${artifacts}/phone.png` });
  await page.close();
  await session.context.close();
});

test('with --api-key the page asks for the key, keeps it and retries', async () => {
  const page0 = await fetch(`${keyed.url}/`);
  assert.equal(page0.status, 200, 'the page itself needs no key');
  assert.equal(page0.headers.get('content-type'), 'text/html; charset=utf-8');
  const { context, page } = await openPage(keyed);
  await page.waitForSelector('#key-dialog[open]', wait);
  assert.match(await page.$eval('#key-reason', (p) => p.textContent), /asks for an API key/);
  await page.screenshot({ path: `${artifacts}/api-key.png` });
  await page.type('#key-input', 'sk-wrong');
  await page.click('#key-save');
  await page.waitForFunction(
    () =>
      /refused/.test(document.getElementById('key-reason').textContent) &&
      document.getElementById('key-dialog').open,
    wait,
  );
  await setField(page, '#key-input', apiKey);
  await page.click('#key-save');
  await page.waitForFunction(
    (id) => document.getElementById('model-name').textContent === id,
    wait,
    modelId,
  );
  assert.equal(
    await page.evaluate(() => JSON.parse(localStorage.getItem('fornace.apiKey'))),
    apiKey,
  );

  await setSettings(page, { system: '', temperature: 0, top_p: 1, max_tokens: 6, seed: 3 });
  const body = await sendMessage(page, 'Hello');
  await waitForAnswerEnd(page);
  const answer = await lastAnswer(page);
  const reference = await completeWithApi(keyed, body, { Authorization: `Bearer ${apiKey}` });
  assert.equal(answer.text, reference.choices[0].message.content);
  assert.match(answer.stats, /^\d+ tokens/);

  await page.reload();
  await page.waitForFunction(
    (id) => document.getElementById('model-name').textContent === id,
    wait,
    modelId,
  );
  assert.equal(
    await page.$eval('#key-dialog', (dialog) => dialog.open),
    false,
    'the kept key is used',
  );

  // A setting the server refuses: its 400 message, naming the parameter, in place of an answer.
  await setSettings(page, { temperature: 9, top_p: 1, max_tokens: 6, seed: 3 });
  await sendMessage(page, 'Too hot');
  await page.waitForSelector('.message.error', wait);
  await waitForAnswerEnd(page);
  assert.match(
    await page.$eval('.message.error .text', (text) => text.textContent),
    /^400: .*'temperature'/,
  );
  assert.deepEqual(await page.$$eval('.message', (all) => all.map((m) => m.className)), [
    'message user',
    'message assistant',
    'message user',
    'message error',
  ]);
  await context.close();
});

test('--no-ui answers / with the 404 error object', async () => {
  const response = await fetch(`${noUi.url}/`);
  assert.equal(response.status, 404);
  assert.equal((await response.json()).error.code, 'unknown_url');
  const health = await fetch(`${noUi.url}/health`);
  assert.equal(health.status, 200, 'the API still runs');
});

test('no page raised a script error', () => {
  assert.deepEqual(pageErrors, []);
});
