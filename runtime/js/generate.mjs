#!/usr/bin/env node
// Generates from an rnnx export in Node.js with rnnx.mjs and onnxruntime-node (or onnxruntime-web's wasm build).
//
//   NODE_PATH=.cache/js/node_modules node runtime/js/generate.mjs EXPORT_DIR --prompt "1 2 3" [--prompt 4,5] \
//       [--max-new-tokens 32] [--temperature 0] [--top-k K] [--top-p P] [--seed S] [--stop T,...] \
//       [--threads N] [--ort node|web] [--vocab vocab.json] [--ids] [--chat] [--json]
//
// A prompt is token ids separated by spaces and/or commas ("1 2 3", 1,2,3: docs/embedding.md, "Prompts"). Prints
// each row's new tokens (and, with --vocab, a JSON list of V strings, their text); --json prints
// {"tokens": [[...], ...]} instead. An export that carries its checkpoint's tokenizer (rnnx.json "text") takes text
// prompts instead (--ids: token ids all the same; --chat: each prompt a user turn through the chat template), stops
// at the checkpoint's eos ids too, and prints each row's reply as text (--json adds "text": ["...", ...]); the text
// packages (@huggingface/tokenizers, @huggingface/jinja) are found like ONNX Runtime. ONNX Runtime is found by Node's `require` (NODE_PATH or a node_modules
// folder above this file). Exit status 2 for a bad argument or export, with one line on stderr.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

import { PROMPT_SYNTAX, RnnxError, RnnxModel, parsePrompt } from './rnnx.mjs';
import { RnnxText } from './text.mjs';

const OPTIONS = {
  prompt: { type: 'string', multiple: true },
  'max-new-tokens': { type: 'string', default: '32' },
  temperature: { type: 'string', default: '0' },
  'top-k': { type: 'string' },
  'top-p': { type: 'string' },
  seed: { type: 'string' },
  stop: { type: 'string', default: '' },
  threads: { type: 'string', default: '1' },
  ort: { type: 'string', default: 'node' },
  vocab: { type: 'string' },
  json: { type: 'boolean', default: false },
  ids: { type: 'boolean', default: false },
  chat: { type: 'boolean', default: false },
};
/** --ort choice -> the npm package it loads. */
const ORT_PACKAGES = { node: 'onnxruntime-node', web: 'onnxruntime-web' };

function numbers(text, what) {
  const values = text.split(',').filter((t) => t.trim() !== '').map(Number);
  if (values.some((v) => !Number.isFinite(v))) throw new RnnxError(`${what}: expected comma-separated numbers, got "${text}"`);
  return values;
}

function number(text, what) {
  if (text === undefined) return null;
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value)) throw new RnnxError(`${what}: expected a number, got "${text}"`);
  return value;
}

/**
 * --seed: a non-negative integer of any size, as a BigInt: numpy seeds with every bit of it (Python's seed is an
 * int), and a Number would round one past 2^53 to another seed.
 */
function seedArg(text) {
  if (text === undefined) return null;
  if (!/^\s*\d+\s*$/.test(text)) throw new RnnxError(`--seed: expected a non-negative integer, got "${text}"`);
  return BigInt(text.trim());
}

async function main() {
  const { values, positionals } = parseArgs({ options: OPTIONS, allowPositionals: true });
  if (positionals.length !== 1) throw new RnnxError('usage: generate.mjs EXPORT_DIR --prompt "1 2 3" [options] (one export folder)');
  if (!values.prompt?.length) throw new RnnxError(`--prompt: give at least one prompt (${PROMPT_SYNTAX})`);
  const packageName = ORT_PACKAGES[values.ort];
  if (!packageName) throw new RnnxError(`--ort: expected one of ${Object.keys(ORT_PACKAGES).join(', ')}, got "${values.ort}"`);
  const require = createRequire(import.meta.url);
  const ort = require(packageName);
  const threads = number(values.threads, '--threads');
  const sessionOptions = {};
  if (values.ort === 'web') ort.env.wasm.numThreads = threads;
  else sessionOptions.intraOpNumThreads = threads;
  const model = await RnnxModel.open(ort, positionals[0], { readFile }, sessionOptions);
  const text = values.ids || !model.metadata.text ? null : await RnnxText.open(positionals[0], model.metadata, { readFile }, {
    Tokenizer: require('@huggingface/tokenizers').Tokenizer, Template: require('@huggingface/jinja').Template,
  });
  if (values.chat && text === null) throw new RnnxError(`${positionals[0]}: --chat needs an export that carries its checkpoint's tokenizer`);
  const prompts = values.prompt.map((p) => {
    if (text === null) return parsePrompt(p);
    return values.chat ? text.encodeChat([{ role: 'user', content: p }]) : text.encode(p);
  });
  const tokens = await model.generateAll(prompts, {
    maxNewTokens: number(values['max-new-tokens'], '--max-new-tokens'),
    temperature: number(values.temperature, '--temperature'),
    topK: number(values['top-k'], '--top-k'),
    topP: number(values['top-p'], '--top-p'),
    seed: seedArg(values.seed),
    stopTokens: [...numbers(values.stop, '--stop'), ...(text?.eosTokenIds ?? [])],
  });
  const replies = text && tokens.map((row) => text.decode(row.filter((t) => !text.eosTokenIds.includes(t))));
  if (values.json) {
    console.log(JSON.stringify(replies ? { tokens, text: replies } : { tokens }));
    return;
  }
  if (replies) {
    replies.forEach((reply, b) => console.log(replies.length === 1 ? reply : `row ${b}: ${reply}`));
    return;
  }
  const vocab = values.vocab ? JSON.parse(await readFile(values.vocab, 'utf8')) : null;
  tokens.forEach((row, b) => {
    console.log(`prompt ${b + 1}: [${prompts[b].join(', ')}] -> [${row.join(', ')}]`);
    if (vocab) console.log(`  ${JSON.stringify(prompts[b].map((t) => vocab[t]).join(''))} -> ${JSON.stringify(row.map((t) => vocab[t]).join(''))}`);
  });
}

main().catch((error) => {
  const message = error instanceof RnnxError ? error.message : `${error.name}: ${error.message}`;
  console.error(`generate.mjs: ${message.split('\n')[0]}`);
  process.exitCode = 2;
});
