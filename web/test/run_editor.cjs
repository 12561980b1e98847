// Opens Weft's editor page in headless Chromium and drives it through its
// test hook (`window.weft_editor`, `window.weft_commands`, web/src/web.rs
// and web/src/editor.rs), as tests/tests/web.rs does:
//
//   node web/test/run_editor.cjs DIR QUERY OUT PLAN [SCREENSHOT]
//
// DIR: the web build (web/build.sh); QUERY: the page's query string
// (graph=heat); OUT: a folder for the results; PLAN: JSON {"code": NODE,
// "set": [{node, param, value}], "frames": N, "read": [FIELD], "open":
// [GRAPH, NPY...]}. The page is opened and waited for until its first
// frames played; OUT/opened.json is its report then (nodes, problems,
// panels). Then NODE's code editor is opened (SCREENSHOT taken), the edits
// made, the graph reset and run to frame N, the fields read back
// (OUT/NAME.bin, little-endian u32 words; OUT/ran.json the report then)
// and the graph saved through File > Save As, which downloads it into
// OUT/download/. Then GRAPH is opened through File > Open (the page's file
// picker, its .npy files picked with it) and run for two frames
// (OUT/reopened.json). OUT/result.json is the last report. Serves DIR on
// 127.0.0.1, prints the browser's console, exits 1 on any failure.
// WEFT_CHROMIUM overrides the browser.
"use strict";
const http = require("http");
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [dir, query, out, planText, shot] = process.argv.slice(2);
if (!dir || !query || !out || !planText) {
  console.error("usage: run_editor.cjs DIR QUERY OUT PLAN [SCREENSHOT]");
  process.exit(2);
}
const plan = JSON.parse(planText);
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

const report = (page) => page.evaluate(() => window.weft_editor);

async function until(page, what, pred) {
  const t0 = Date.now();
  for (;;) {
    const r = await report(page);
    if (r && r.errors && r.errors.length) throw new Error(`the hook reported: ${r.errors.join("; ")}`);
    if (r && (r.error || r.fault) && !what.startsWith("any")) {
      throw new Error(`the viewport failed while waiting for ${what}: ${r.error || r.fault}`);
    }
    if (r && pred(r)) return r;
    if (Date.now() - t0 > TIMEOUT_MS) {
      throw new Error(`timed out waiting for ${what}; last report: ${JSON.stringify(r)}`);
    }
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

const send = (page, cmds) => page.evaluate((c) => {
  window.weft_commands = (window.weft_commands || []).concat(c);
}, cmds);

(async () => {
  const server = await serve(path.resolve(dir));
  const port = server.address().port;
  const browser = await puppeteer.launch({
    executablePath: process.env.WEFT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    protocolTimeout: TIMEOUT_MS + 60000,
    args: ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader", "--enable-features=Vulkan",
      "--use-angle=swiftshader", "--use-webgpu-adapter=swiftshader", "--window-size=1400,860"],
  });
  let failed = false;
  let page;
  try {
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 860 });
    page.on("console", (m) => console.log(`[browser ${m.type()}] ${m.text()}`));
    page.on("pageerror", (e) => console.log(`[browser pageerror] ${e.message}`));
    const downloads = path.resolve(out, "download");
    fs.mkdirSync(downloads, { recursive: true });
    const cdp = await page.createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
    const url = `http://127.0.0.1:${port}/index.html?${query}`;
    console.log(`opening ${url}`);
    const t0 = Date.now();
    await page.goto(url, { waitUntil: "load" });
    const opened = await until(page, "the first frames", (r) => r.backend && !r.compiling && r.frame >= 2);
    console.log(`editor up in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(opened)}`);
    fs.writeFileSync(path.join(out, "opened.json"), JSON.stringify(opened, null, 2));

    if (plan.code) {
      await send(page, [{ op: "code", node: plan.code }]);
      await until(page, "the code editor", (r) => r.code_window);
      await new Promise((ok) => setTimeout(ok, 700));
      if (shot) await page.screenshot({ path: shot });
    }
    const edits = (plan.set || []).map((s) => ({ op: "set", node: s.node, param: s.param, value: s.value }));
    await send(page, edits.concat([{ op: "run", frames: plan.frames }]));
    await until(page, `frame ${plan.frames}`, (r) => r.running_to === null && !r.playing && r.frame === plan.frames);
    await send(page, [{ op: "read", fields: plan.read || [] }]);
    const done = await until(page, "the fields", (r) => r.fields.length >= (plan.read || []).length);
    for (const f of done.fields) {
      fs.writeFileSync(path.join(out, f.name.replace(/\//g, "__") + ".bin"), Buffer.from(f.base64, "base64"));
      delete f.base64;
    }
    fs.writeFileSync(path.join(out, "ran.json"), JSON.stringify(done, null, 2));
    await send(page, [{ op: "save" }]);
    const t1 = Date.now();
    let saved = [];
    while (Date.now() - t1 < 30000) {
      saved = fs.readdirSync(downloads).filter((f) => f.endsWith(".json"));
      if (saved.length) break;
      await new Promise((ok) => setTimeout(ok, 200));
    }
    if (!saved.length) throw new Error("Save As downloaded no graph");
    if (plan.open) {
      // A browser shows a file picker only just after a user's click: one
      // on the status line, then File > Open through the hook.
      await page.mouse.click(700, 737);
      const [chooser] = await Promise.all([
        page.waitForFileChooser({ timeout: 30000 }),
        send(page, [{ op: "open" }]),
      ]);
      const files = [].concat(plan.open).map((f) => path.resolve(f));
      await chooser.accept(files);
      const name = path.basename(files[0]);
      await until(page, `${name} to open`, (r) => r.title.endsWith(name) && r.backend && !r.compiling);
      // Paused as the last graph was: play two frames.
      await send(page, [{ op: "frames", n: 2 }]);
      const reopened = await until(page, `${name} to run`,
        (r) => r.title.endsWith(name) && r.frame >= 2 && r.laid_out === r.nodes);
      fs.writeFileSync(path.join(out, "reopened.json"), JSON.stringify(reopened, null, 2));
      // The tab is named after the open graph (no dot: nothing unsaved).
      const tab = await page.title();
      if (tab !== `${name} — Weft`) throw new Error(`page title ${JSON.stringify(tab)}, not "${name} — Weft"`);
    }
    const last = await report(page);
    last.fields = done.fields;
    last.saved = saved.map((f) => path.join(downloads, f));
    fs.writeFileSync(path.join(out, "result.json"), JSON.stringify(last, null, 2));
    console.log(`done in ${((Date.now() - t0) / 1000).toFixed(1)} s: saved ${saved.join(", ")}`);
  } catch (e) {
    console.error(`error: ${e.message}`);
    try {
      if (page && shot) await page.screenshot({ path: shot });
    } catch (e2) {
      console.error(`no screenshot: ${e2.message}`);
    }
    failed = true;
  } finally {
    await browser.close();
    server.close();
  }
  process.exit(failed ? 1 : 0);
})();
