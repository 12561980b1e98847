// Opens Weft's web build in headless Chromium, runs a graph for N frames
// through the page's test hook (`window.weft_test`, web/src/web.rs) and
// writes what came back. Used by tests/tests/web.rs.
//
//   node web/test/run_page.cjs DIR QUERY OUT [SCREENSHOT]
//   node web/test/run_page.cjs DIR @PLAN
//
// DIR: the web build (web/build.sh); QUERY: the page's query string
// (graph=heat&test=frames:3); OUT: a folder for result.json (status,
// backend, device, frames, fields' names and types) and one NAME.bin per
// field (little-endian u32 words). Serves DIR on 127.0.0.1, prints the
// browser's console, exits 1 on any failure. WEFT_CHROMIUM overrides the
// browser (default /usr/bin/chromium). The second form runs each entry of
// the JSON file PLAN ([{query, out, shot?}]) in one browser, a fresh page
// each (Chromium starts once: the whole set of examples runs in one go);
// an entry that fails is written (result.json's status and error, when
// the page got that far) and the rest still run; exits 1 if any failed.
"use strict";
const http = require("http");
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [dir, query, out, shot] = process.argv.slice(2);
if (!dir || !query || (!out && !query.startsWith("@"))) {
  console.error("usage: run_page.cjs DIR QUERY OUT [SCREENSHOT] | run_page.cjs DIR @PLAN");
  process.exit(2);
}
const plan = query.startsWith("@")
  ? JSON.parse(fs.readFileSync(query.slice(1), "utf8"))
  : [{ query, out, shot }];
const TIMEOUT_MS = Number(process.env.WEFT_WEB_TIMEOUT_MS || 240000);
const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm",
  ".json": "application/json", ".npy": "application/octet-stream" };

function serve(root) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    const file = path.join(root, decodeURIComponent(url.pathname));
    if (!file.startsWith(path.resolve(root)) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404);
      res.end("not found");
      return;
    }
    res.writeHead(200, { "Content-Type": types[path.extname(file)] || "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

// Runs one page; true when it finished with status "done".
async function runOne(browser, port, { query, out, shot }) {
  let page;
  try {
    page = await browser.newPage();
    await page.setViewport({ width: 1024, height: 700 });
    page.on("console", (m) => console.log(`[browser ${m.type()}] ${m.text()}`));
    page.on("pageerror", (e) => console.log(`[browser pageerror] ${e.message}`));
    const url = `http://127.0.0.1:${port}/index.html?${query}`;
    console.log(`opening ${url}`);
    const t0 = Date.now();
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(
      () => window.weft_test && window.weft_test.status !== "running",
      { timeout: TIMEOUT_MS, polling: 200 });
    const r = await page.evaluate(() => window.weft_test);
    console.log(`page finished in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${r.status}` +
      (r.error ? `: ${r.error}` : ` on ${r.backend} (${r.device}), ${r.frames} frames`));
    fs.mkdirSync(out, { recursive: true });
    const meta = { status: r.status, error: r.error, backend: r.backend, device: r.device,
      frames: r.frames, fields: [] };
    for (const f of r.fields || []) {
      const file = f.name.replace(/\//g, "__") + ".bin";
      fs.writeFileSync(path.join(out, file), Buffer.from(f.base64, "base64"));
      meta.fields.push({ name: f.name, float: f.float, file });
    }
    fs.writeFileSync(path.join(out, "result.json"), JSON.stringify(meta, null, 2));
    if (shot) {
      // Two more passes so the last frame's views are on screen.
      await new Promise((ok) => setTimeout(ok, 500));
      await page.screenshot({ path: shot });
    }
    return r.status === "done";
  } catch (e) {
    console.error(`error (${query}): ${e.message}`);
    try {
      const state = page ? await page.evaluate(() => window.weft_test) : null;
      console.error(`page state: ${JSON.stringify(state)}`);
      fs.mkdirSync(out, { recursive: true });
      fs.writeFileSync(path.join(out, "result.json"), JSON.stringify({
        status: "failed", error: `${e.message}; page state: ${JSON.stringify(state)}`, fields: [] }, null, 2));
      if (shot && page) await page.screenshot({ path: shot });
    } catch (e2) {
      console.error(`no page state: ${e2.message}`);
    }
    return false;
  } finally {
    if (page) await page.close().catch(() => {});
  }
}

(async () => {
  const server = await serve(path.resolve(dir));
  const port = server.address().port;
  const browser = await puppeteer.launch({
    executablePath: process.env.WEFT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    protocolTimeout: TIMEOUT_MS + 60000,
    args: ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader", "--enable-features=Vulkan",
      "--use-angle=swiftshader", "--use-webgpu-adapter=swiftshader", "--window-size=1024,700"],
  });
  let failed = false;
  try {
    for (const entry of plan) {
      if (!(await runOne(browser, port, entry))) failed = true;
    }
  } finally {
    await browser.close();
    server.close();
  }
  process.exit(failed ? 1 : 0);
})();
