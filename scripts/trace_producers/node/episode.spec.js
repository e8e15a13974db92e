// One demo episode under @playwright/test, as python_episode.py plays it: the runner traces the
// test (trace: 'on'); the agent's steps, then the official evaluator's page calls (served over a
// loopback socket to make_trace_corpus.py), all inside the test, so the trace holds both.
const fs = require('fs');
const net = require('net');
const readline = require('readline');
const { test } = require('@playwright/test');

const job = JSON.parse(fs.readFileSync(process.env.TRACE_JOB, 'utf8'));

async function act(page, [verb, ...args]) {
  if (verb === 'goto') await page.goto(job.base_url + args[0]);
  else if (verb === 'click') await page.click(args[0]);
  else if (verb === 'fill') await page.fill(args[0], args[1]);
  else if (verb === 'select') await page.selectOption(args[0], args[1]);
  else if (verb === 'press') await page.press(args[0], args[1]);
  else if (verb === 'go_back') await page.goBack();
  else if (verb === 'noop') await page.waitForTimeout(0);
  else throw new Error(`verb ${verb} is not played by trace producers`);
}

async function serveEvaluator(agentPage) {
  const pages = [agentPage];
  const socket = net.createConnection({ host: '127.0.0.1', port: job.evaluator_port });
  await new Promise((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
  const send = (message) => socket.write(JSON.stringify(message) + '\n');
  send({ ready: true });
  for await (const line of readline.createInterface({ input: socket })) {
    const request = JSON.parse(line);
    if (request.op === 'done') break;
    const page = pages[request.page || 0];
    try {
      if (request.op === 'url') send({ ok: page.url() });
      else if (request.op === 'new_page') { pages.push(await page.context().newPage()); send({ ok: pages.length - 1 }); }
      else if (request.op === 'goto') { await page.goto(request.url); send({ ok: null }); }
      else if (request.op === 'content') send({ ok: await page.content() });
      else if (request.op === 'evaluate') send({ ok: (await page.evaluate(`(${request.expression})()`)) ?? null });  // a string is an expression in Node
      else if (request.op === 'close') { await page.close(); send({ ok: null }); }
      else send({ error: `unknown op ${request.op}` });
    } catch (error) {
      send({ error: `${error.name}: ${error.message}` });
    }
  }
  socket.end();
}

test(job.test_name, async ({ page }) => {
  await page.goto(job.start_url);
  for (const step of job.steps) await act(page, step);
  await serveEvaluator(page);
});
