// Compiles WGSL modules with the browser's own shader compiler (Tint, in
// Chromium's WebGPU on SwiftShader): each module is given to
// `device.createShaderModule` and its `getCompilationInfo()` errors are
// collected (Tint's whole front end: parsing, types, constant evaluation,
// uniformity). No pipeline is made: SwiftShader's own compile of the
// largest corpus kernels outlasts the GPU process's watchdog, and what it
// would add is SwiftShader's verdict, not the browser's.
// Used by tests/tests/web.rs, which writes every kernel's WGSL (examples,
// their views, the language corpus) the way the page's wgpu hands it to
// WebGPU.
//
//   node web/test/compile_wgsl.cjs DIR OUT
//
// DIR: a folder with list.json ([{name, file}]) and the .wgsl files it
// names; OUT: the verdicts file to write ([{name, errors: [..]}], one
// entry per module, `errors` empty when the browser accepted it). Serves
// DIR on 127.0.0.1 (WebGPU needs a secure context: localhost is one),
// prints the browser's console, exits 1 when the page could not run (no
// WebGPU adapter, a browser crash); refused modules are the test's to
// report. WEFT_CHROMIUM overrides the browser (default /usr/bin/chromium).
"use strict";
const http = require("http");
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [dir, out] = process.argv.slice(2);
if (!dir || !out) {
  console.error("usage: compile_wgsl.cjs DIR OUT");
  process.exit(2);
}
const TIMEOUT_MS = Number(process.env.WEFT_WEB_TIMEOUT_MS || 600000);

function serve(root) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.pathname === "/") {
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end("<!doctype html><title>weft wgsl</title><p>compiling</p>");
      return;
    }
    const file = path.join(root, decodeURIComponent(url.pathname));
    if (!file.startsWith(path.resolve(root)) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404);
      res.end("not found");
      return;
    }
    res.writeHead(200, { "Content-Type": "text/plain" });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

// Runs in the page: compiles every module of list.json, one at a time.
async function compileAll() {
  const list = await (await fetch("/list.json")).json();
  if (!navigator.gpu) throw new Error("no navigator.gpu (WebGPU is off)");
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error("no WebGPU adapter");
  const device = await adapter.requestDevice();
  const info = adapter.info || {};
  const verdicts = [];
  for (const { name, file } of list) {
    if (window.weft_wgsl_verbose) console.log(`compiling ${name}`);
    const code = await (await fetch("/" + file)).text();
    const errors = [];
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code, label: name });
    const ci = await module.getCompilationInfo();
    for (const m of ci.messages) {
      if (m.type === "error") errors.push(`${m.lineNum}:${m.linePos}: ${m.message}`);
    }
    const moduleError = await device.popErrorScope();
    if (moduleError && errors.length === 0) errors.push(moduleError.message);
    verdicts.push({ name, errors });
  }
  return { device: `${info.vendor || "?"} ${info.architecture || ""} ${info.description || ""}`.trim(), verdicts };
}

(async () => {
  const server = await serve(path.resolve(dir));
  const port = server.address().port;
  const browser = await puppeteer.launch({
    executablePath: process.env.WEFT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    protocolTimeout: TIMEOUT_MS + 60000,
    args: ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader", "--enable-features=Vulkan",
      "--use-angle=swiftshader", "--use-webgpu-adapter=swiftshader"],
  });
  let failed = false;
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(TIMEOUT_MS);
    page.on("console", (m) => console.log(`[browser ${m.type()}] ${m.text()}`));
    page.on("pageerror", (e) => console.log(`[browser pageerror] ${e.message}`));
    await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: "load" });
    if (process.env.WEFT_WGSL_VERBOSE) await page.evaluate(() => { window.weft_wgsl_verbose = true; });
    const t0 = Date.now();
    const r = await page.evaluate(compileAll);
    const refused = r.verdicts.filter((v) => v.errors.length > 0).length;
    console.log(`compiled ${r.verdicts.length} modules on ${r.device} in ` +
      `${((Date.now() - t0) / 1000).toFixed(1)} s: ${refused} refused`);
    fs.writeFileSync(out, JSON.stringify(r.verdicts, null, 2));
  } catch (e) {
    console.error(`error: ${e.message}`);
    failed = true;
  } finally {
    await browser.close();
    server.close();
  }
  process.exit(failed ? 1 : 0);
})();
