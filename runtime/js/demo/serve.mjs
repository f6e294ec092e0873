#!/usr/bin/env node
// Serves the demo page with an export: open the printed URL in a browser.
//
//   NODE_PATH=.cache/js/node_modules node runtime/js/demo/serve.mjs EXPORT_DIR [--port 8000] [--host 127.0.0.1]
//
// Paths: / (index.html), /rnnx.mjs, /text.mjs and the contract tables they import (/contract.generated.mjs),
// /ort/<file> (onnxruntime-web's dist folder, found by Node's `require`), /text/tokenizers.mjs and /text/jinja.mjs
// (the ES module bundles of @huggingface/tokenizers and @huggingface/jinja), /export/<file> (the files of EXPORT_DIR). Nothing
// else is served; a path with a folder in it is refused.
// Any static server laid out the same way (or ?ort=<CDN URL of onnxruntime-web's dist/>) serves the page too.
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const TYPES = { '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.json': 'application/json', '.jinja': 'text/plain; charset=utf-8', '.wasm': 'application/wasm', '.onnx': 'application/octet-stream',
  '.data': 'application/octet-stream' };

/** The page's modules: rnnx.mjs, text.mjs and their sibling, the contract's generated tables. */
const MODULES = ['/rnnx.mjs', '/text.mjs', '/contract.generated.mjs'];
/** The text packages' ES module bundles: the path the page imports -> [package, file beside its main entry]. */
const TEXT_BUNDLES = {
  '/text/tokenizers.mjs': ['@huggingface/tokenizers', 'tokenizers.min.mjs'],
  '/text/jinja.mjs': ['@huggingface/jinja', 'index.js'],
};

/** A file in the folder of a package's main entry, the package found by Node's `require`. */
function packageFile(name, file) {
  return join(dirname(createRequire(import.meta.url).resolve(name)), file);
}

/** The folder of onnxruntime-web's dist files (ort.wasm.min.mjs and the .wasm binaries). */
export function ortWebDist() {
  return dirname(createRequire(import.meta.url).resolve('onnxruntime-web'));
}

/** A percent-decoded path segment, or null when it is not valid percent-encoded UTF-8 (/export/%E0). */
function decoded(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** The file a request path maps to, or null (unknown path, a name with a folder in it, a bad %-escape). */
export function route(path, exportDir, ortDir) {
  const folders = { '/ort/': ortDir, '/export/': exportDir };
  if (path === '/' || path === '/index.html') return join(HERE, 'index.html');
  if (MODULES.includes(path)) return join(HERE, '..', path.slice(1));
  if (TEXT_BUNDLES[path]) return packageFile(...TEXT_BUNDLES[path]);
  for (const [prefix, folder] of Object.entries(folders)) {
    if (path.startsWith(prefix)) {
      const name = decoded(path.slice(prefix.length));
      return name && name === basename(name) && !name.startsWith('.') ? join(folder, name) : null;
    }
  }
  return null;
}

/** Starts the server; resolves to {server, url} once it listens (port 0: a free port). */
export async function serve(exportDir, { port = 8000, host = '127.0.0.1' } = {}) {
  const root = resolve(exportDir);
  if (!(await stat(join(root, 'rnnx.json')).catch(() => null))) {
    throw new Error(`${join(root, 'rnnx.json')}: missing; EXPORT_DIR must be an rnnx export folder`);
  }
  const ortDir = ortWebDist();
  const server = createServer(async (request, response) => {
    try {
      const file = route(new URL(request.url, 'http://localhost').pathname, root, ortDir);
      const body = file && (await readFile(file).catch(() => null));
      if (!body) {
        response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      response.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch (error) { // one bad request answers 500; it never takes the server down
      if (!response.headersSent) response.writeHead(500, { 'content-type': 'text/plain' });
      response.end(`error: ${error.message}\n`);
    }
  });
  await new Promise((ready, fail) => server.once('error', fail).listen(port, host, ready));
  return { server, url: `http://${host}:${server.address().port}/` };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({ options: { port: { type: 'string', default: '8000' },
    host: { type: 'string', default: '127.0.0.1' } }, allowPositionals: true });
  if (positionals.length !== 1) {
    console.error('usage: serve.mjs EXPORT_DIR [--port 8000] [--host 127.0.0.1]');
    process.exit(2);
  }
  serve(positionals[0], { port: Number(values.port), host: values.host }).then(
    ({ url }) => console.log(`serving the demo page at ${url} (Ctrl-C stops)`),
    (error) => { console.error(`serve.mjs: ${error.message}`); process.exit(2); },
  );
}
