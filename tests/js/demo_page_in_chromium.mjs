// Opens runtime/js/demo/index.html in headless Chromium (@sparticuz/chromium's build, driven by puppeteer-core),
// served with an export by runtime/js/demo/serve.mjs, once per case; prints {"runs": [{tokens, error, status}]}.
// Used by tests/test_js_runtime.py: one browser launch for every case.
//
//   NODE_PATH=.cache/js/node_modules node tests/js/demo_page_in_chromium.mjs EXPORT_DIR CASES_JSON
//
// CASES_JSON: a list of query-string objects ({"prompt": "1,2,3", "max": "8", "temperature": "0", "ep": "webgpu"}).
import { createRequire } from 'node:module';

import { serve } from '../../runtime/js/demo/serve.mjs';

const require = createRequire(import.meta.url);
const chromium = require('@sparticuz/chromium').default ?? require('@sparticuz/chromium');
const puppeteer = require('puppeteer-core');

const [exportDir, casesJson] = process.argv.slice(2);
const cases = JSON.parse(casesJson);
const { server, url } = await serve(exportDir, { port: 0 });
// WebGPU on SwiftShader's software Vulkan (no GPU here): the page's webgpu runs check results, not speed.
const WEBGPU_ON_SWIFTSHADER = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader', '--enable-unsafe-swiftshader', '--use-angle=swiftshader'];
const browser = await puppeteer.launch({
  args: [...chromium.args, ...WEBGPU_ON_SWIFTSHADER],
  executablePath: await chromium.executablePath(),
  headless: 'shell',
});
try {
  const page = await browser.newPage();
  const console_ = [];
  page.on('console', (message) => console_.push(message.text()));
  page.on('pageerror', (error) => console_.push(String(error)));
  const runs = [];
  for (const query of cases) {
    await page.goto(`${url}?${new URLSearchParams({ ...query, autorun: '1' })}`);
    await page.waitForFunction(() => window.rnnxDemo?.done === true, { timeout: 60000 });
    runs.push(await page.evaluate(() => ({ ...window.rnnxDemo, status: document.getElementById('status').textContent })));
  }
  console.log(JSON.stringify({ runs, console: console_ }));
} finally {
  await browser.close();
  server.close();
}
