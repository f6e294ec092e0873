// rnnx's JavaScript runtime: generation from an rnnx export (model.onnx + rnnx.json) on ONNX Runtime, in
// Node.js (onnxruntime-node) and in the browser (onnxruntime-web). An ES module with no dependencies but its
// sibling contract.generated.mjs (the artifact contract's tables, generated from rnnx/runtime/contract/artifact.py;
// keep the two files side by side): the caller passes ONNX Runtime's `ort` object in, so the same files serve both.
//
//   import * as ort from 'onnxruntime-web';            // or: createRequire(import.meta.url)('onnxruntime-node')
//   import { RnnxModel } from './rnnx.mjs';
//   const model = await RnnxModel.fetch(ort, 'https://host/export/');   // Node: RnnxModel.open(ort, dir, fs)
//   for await (const tokens of model.generate([[1, 2, 3]], { maxNewTokens: 20, temperature: 0 })) { ... }
//
// It mirrors rnnx.runtime (Python): the same contract (rnnx.json, docs/export.md), the same generation loop
// (Session.generate: a right-padded prefill, then one step per token with finished rows fed as pads) and the
// same sampling (runtime/sampling.py: temperature, top-k, top-p, then a draw from numpy's PCG64 generator
// seeded by (seed, row), reproduced here), so greedy tokens equal Python's, and so do seeded samples.
//
// Shapes: B rows, L positions, V vocabulary. Tokens are integers in [0, V).

import {
  ATTENTION_MASK, BATCH, CAUSAL_LM, FORMAT, FORMAT_VERSIONS_TEXT, INPUT_IDS, INTERFACES_BY_VERSION, KINDS, LM_LEAD,
  LM_SLOTS, LOGITS, METADATA_FILE, PAST_LENGTH, PAST_PREFIX, PRESENT_PREFIX, REFUSALS, TABLES,
} from './contract.generated.mjs';

/**
 * The contract's names this module uses (rnnx.json's format name, the versions this reader accepts, the language-model
 * interface, the only one this module generates with, graph names and axes): contract.generated.mjs's.
 */
export {
  ATTENTION_MASK, BATCH, CAUSAL_LM, FORMAT, INPUT_IDS, LOGITS, METADATA_FILE, PAST_LENGTH, PAST_PREFIX, PRESENT_PREFIX,
  READABLE_FORMAT_VERSIONS,
} from './contract.generated.mjs';

/**
 * A bad export, input or option; the message is one line naming what is wrong. `reason`: for a refusal of the
 * artifact contract (a bad rnnx.json), its key in REFUSALS, the same that Python and the C API give; else null.
 */
export class RnnxError extends Error {
  constructor(message, reason = null) {
    super(message);
    this.name = 'RnnxError';
    this.reason = reason;
  }
}

// -- prompts -----------------------------------------------------------------------------------------------

/** The prompt syntax of every rnnx-generate and the demo page (docs/embedding.md, "Prompts"), as Python's cli.py. */
export const PROMPT_SYNTAX = 'token ids are non-negative integers separated by spaces and/or commas';

/**
 * "1 2 3", "1,2,3" or "1, 2, 3" -> [1, 2, 3]; RnnxError naming the bad piece, or an empty prompt. Ids past the
 * vocabulary are the model's to refuse (checkTokens).
 */
export function parsePrompt(text) {
  const pieces = text.split(/[ \t\r\n,]+/).filter((p) => p !== '');
  const bad = pieces.find((p) => !/^[0-9]+$/.test(p));
  if (bad !== undefined) throw new RnnxError(`prompt "${text}": "${bad}" is not a token id (${PROMPT_SYNTAX})`);
  if (pieces.length === 0) throw new RnnxError(`prompt "${text}": no token ids (${PROMPT_SYNTAX})`);
  return pieces.map(Number);
}

// -- metadata ----------------------------------------------------------------------------------------------
// The checks of rnnx/runtime/contract/artifact.py's check list, in its order, with its refusal texts: the tables come
// from contract.generated.mjs (tests/test_contract_schema.py runs the shared bad-artifact fixtures through Python's,
// the C API's and this reader). This module generates tokens, so it refuses every interface but causal_lm.

/** rnnx.json dtype name -> [ONNX Runtime tensor type, typed-array constructor] (state dtypes; bfloat16 has neither). */
const DTYPES = {
  float32: ['float32', Float32Array],
  float16: ['float16', Uint16Array],
  float64: ['float64', Float64Array],
  int64: ['int64', BigInt64Array],
  int32: ['int32', Int32Array],
  int8: ['int8', Int8Array],
  uint8: ['uint8', Uint8Array],
  bool: ['bool', Uint8Array],
};

function isInt(value) {
  return typeof value === 'number' && Number.isInteger(value);
}

/** `value` as a refusal shows it: compact JSON (the contract's json_text, which follows JSON.stringify). */
export function jsonText(value) {
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`).join(',')}}`;
  }
  return typeof value === 'number' ? String(value) : JSON.stringify(value ?? null);
}

/** A parsed JSON value's kind (a key of KINDS): an integer is a number with no fraction. */
function kindOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/** How a refusal names a value it got: an array or object by its kind, anything else as JSON. */
function gotText(value) {
  const kind = kindOf(value);
  return kind === 'array' || kind === 'object' ? KINDS[kind] : jsonText(value);
}

/** An RnnxError "<where>: <REFUSALS[reason] with values>" carrying its reason. */
function refusal(where, reason, values = {}) {
  const text = REFUSALS[reason].replace(/\{(\w+)\}/g, (match, key) => (key in values ? values[key] : match));
  return new RnnxError(`${where}: ${text}`, reason);
}

/** A parser's or the system's words as a refusal's {detail}: one line. */
function oneLine(text) {
  return String(text).split(/\s+/).filter(Boolean).join(' ');
}

function isFileName(name) {
  return !['', '.', '..'].includes(name) && !name.includes('/') && !name.includes('\\');
}

function checkValue(value, rule, path, where, iface) {
  const kind = kindOf(value);
  if (!rule.kinds.includes(kind) && !(kind === 'integer' && rule.kinds.includes('number'))) {
    throw refusal(where, 'field_type', { field: jsonText(path), got: gotText(value), expected: rule.expected });
  }
  const badString = kind === 'string' && ((rule.strings.length > 0 && !rule.strings.includes(value))
    || (rule.nonEmpty && value === '') || (rule.fileName && !isFileName(value)));
  const badInteger = kind === 'integer' && ((rule.integers.length > 0 && !rule.integers.includes(value))
    || (rule.minimum !== null && value < rule.minimum));
  if (badString || badInteger) {
    throw refusal(where, 'field_value', { field: jsonText(path), got: jsonText(value), expected: rule.expected });
  }
  if (kind === 'array') {
    if (rule.items !== null) value.forEach((item, i) => checkValue(item, rule.items, `${path}[${i}]`, where, iface));
    if (rule.contains !== null && !value.includes(rule.contains)) {
      throw refusal(where, 'field_value', { field: jsonText(path), got: jsonText(value), expected: rule.expected });
    }
  }
  if (kind === 'object') {
    if (rule.members !== null) checkFields(value, TABLES[rule.members], `${path}.`, where, iface);
    if (rule.values !== null) {
      for (const [key, item] of Object.entries(value)) checkValue(item, rule.values, `${path}.${key}`, where, iface);
    }
  }
}

function checkFields(entry, fields, prefix, where, iface) {
  for (const field of fields) {
    const path = prefix + field.name;
    if (Object.hasOwn(entry, field.name)) checkValue(entry[field.name], field.rule, path, where, iface);
    else if (field.required.includes(iface)) {
      throw refusal(where, 'field_missing', { field: jsonText(path), expected: field.rule.expected });
    }
  }
}

/**
 * Checks a parsed rnnx.json as every rnnx reader does (the contract's check list, steps 2 to 5; a causal_lm export
 * only); returns its state specs ({name, input, output, shape, dtype, grows}, graph order). Throws RnnxError naming
 * `where` and the field, with the refusal's reason.
 */
export function checkMetadata(meta, where = METADATA_FILE) {
  const refuse = (reason, values) => { throw refusal(where, reason, values); };
  if (kindOf(meta) !== 'object') refuse('not_an_object', { got: gotText(meta) });
  if (meta.format !== FORMAT) {
    refuse('format', { got: Object.hasOwn(meta, 'format') ? jsonText(meta.format) : 'missing', expected: jsonText(FORMAT) });
  }
  if (!Object.hasOwn(meta, 'format_version')) {
    const rule = TABLES.metadata.find((f) => f.name === 'format_version').rule;
    refuse('field_missing', { field: jsonText('format_version'), expected: rule.expected });
  }
  const version = meta.format_version;
  const readable = isInt(version) ? INTERFACES_BY_VERSION[String(version)] : undefined;
  if (readable === undefined) refuse('format_version', { got: jsonText(version), expected: FORMAT_VERSIONS_TEXT });
  const iface = Object.hasOwn(meta, 'interface') ? meta.interface : CAUSAL_LM;
  if (typeof iface !== 'string' || !readable.interfaces.includes(iface)) {
    refuse('interface', { got: jsonText(iface), version: String(version), expected: readable.text });
  }
  if (iface !== CAUSAL_LM) refuse('interface_not_runnable', { got: jsonText(iface), expected: jsonText(CAUSAL_LM) });
  checkFields(meta, TABLES.metadata, '', where, iface);
  const seen = new Set();
  for (const side of ['inputs', 'outputs']) {
    meta[side].forEach((entry, i) => {
      if (seen.has(entry.name)) refuse('duplicate_name', { field: jsonText(`${side}[${i}].name`), got: jsonText(entry.name) });
      seen.add(entry.name);
    });
  }
  const graph = { input: new Set(meta.inputs.map((t) => t.name)), output: new Set(meta.outputs.map((t) => t.name)) };
  const specs = meta.state.map((s, i) => {
    const spec = { name: s.name, input: PAST_PREFIX + s.name, output: PRESENT_PREFIX + s.name,
      shape: s.shape, dtype: s.dtype, grows: Boolean(s.grows) };
    for (const end of ['input', 'output']) {
      if (Object.hasOwn(s, end) && s[end] !== spec[end]) {
        refuse('state_io_name', { field: jsonText(`state[${i}].${end}`), got: jsonText(s[end]), expected: jsonText(spec[end]) });
      }
    }
    for (const end of ['input', 'output']) {
      if (!graph[end].has(spec[end])) refuse('state_not_in_graph', { name: jsonText(s.name), got: jsonText(spec[end]), end });
    }
    return spec;
  });
  for (const side of ['inputs', 'outputs']) {
    const slots = LM_SLOTS[side];
    const count = slots.length + meta.state.length;
    if (meta[side].length !== count) {
      refuse('lm_count', { field: jsonText(side), got: String(meta[side].length), expected: String(count), lead: LM_LEAD[side] });
    }
    slots.forEach((slot, i) => {
      const entry = meta[side][i];
      const lm = jsonText(CAUSAL_LM);
      if (entry.name !== slot.name) {
        refuse('lm_layout', { field: jsonText(`${side}[${i}].name`), got: jsonText(entry.name), expected: jsonText(slot.name), interface: lm });
      }
      if (!slot.dtypes.includes(entry.dtype)) {
        refuse('lm_layout', { field: jsonText(`${side}[${i}].dtype`), got: jsonText(entry.dtype), expected: slot.expected, interface: lm });
      }
    });
  }
  return specs;
}

/** rnnx.json's text parsed (strict JSON); RnnxError not_json naming `where` otherwise. */
export function parseMetadata(text, where = METADATA_FILE) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw refusal(where, 'not_json', { detail: oneLine(error.message) });
  }
}

/**
 * Node.js: reads and checks `dir`/rnnx.json with `fs` (node:fs/promises): the contract's check list from the file on
 * (missing_file, unreadable_file, not_json, then checkMetadata). Returns the metadata.
 */
export async function readMetadata(dir, fs) {
  const where = `${dir.replace(/\/$/, '')}/${METADATA_FILE}`;
  let text;
  try {
    text = await fs.readFile(where, 'utf8');
  } catch (error) {
    if (['ENOENT', 'ENOTDIR', 'EISDIR'].includes(error.code)) throw refusal(where, 'missing_file');
    throw refusal(where, 'unreadable_file', { detail: oneLine(error.code ?? error.message) });
  }
  const metadata = parseMetadata(text, where);
  checkMetadata(metadata, where);
  return metadata;
}

/** ONNX Runtime session config entries the export asks for (rnnx.json "onnxruntime"; {} when absent). */
export function sessionConfig(meta) {
  const entries = meta.onnxruntime?.session_config ?? {};
  return Object.fromEntries(Object.entries(entries).map(([k, v]) => [String(k), String(v)]));
}

// -- half floats ---------------------------------------------------------------------------------------------

/** IEEE half-precision bits -> the number they hold (exact). */
function halfToFloat(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/** A float32 / float16 tensor's data as numbers (float16 arrives as raw bits, or as a Float16Array). */
function floatData(tensor) {
  if (tensor.type === 'float16' && tensor.data instanceof Uint16Array) {
    return Float64Array.from(tensor.data, halfToFloat);
  }
  return tensor.data;
}

// -- the random generator: numpy's SeedSequence + PCG64 -----------------------------------------------------

const MASK32 = 0xffffffffn;
const MASK64 = (1n << 64n) - 1n;
const MASK128 = (1n << 128n) - 1n;
const PCG_MULTIPLIER = 0x2360ed051fc65da44385df649fccf645n;
const POOL_SIZE = 4;
const INIT_A = 0x43b0d7e5;
const MULT_A = 0x931e8875;
const INIT_B = 0x8b51f9dd;
const MULT_B = 0x58f38ded;
const MIX_MULT_L = 0xca01f9dd;
const MIX_MULT_R = 0x4973f715;

/** A non-negative integer (number or BigInt) as 32-bit words, least significant first ([0] for 0). */
function uint32Words(value) {
  let n = BigInt(value);
  if (n < 0n) throw new RnnxError(`seed: expected a non-negative integer, got ${value}`);
  const words = [];
  do {
    words.push(Number(n & MASK32));
    n >>= 32n;
  } while (n > 0n);
  return words;
}

/**
 * The four 64-bit words numpy's `SeedSequence(entropy).generate_state(4, uint64)` gives, for entropy a list
 * of non-negative integers (numpy's algorithm, from its documentation of SeedSequence's hashing).
 */
export function seedSequenceState(entropy) {
  const words = entropy.flatMap(uint32Words);
  let hashConst = INIT_A;
  const hashmix = (value) => {
    value = (value ^ hashConst) >>> 0;
    hashConst = Math.imul(hashConst, MULT_A) >>> 0;
    value = Math.imul(value, hashConst) >>> 0;
    return (value ^ (value >>> 16)) >>> 0;
  };
  const mix = (x, y) => {
    const result = (Math.imul(MIX_MULT_L, x) - Math.imul(MIX_MULT_R, y)) >>> 0;
    return (result ^ (result >>> 16)) >>> 0;
  };
  const pool = [];
  for (let i = 0; i < POOL_SIZE; i++) pool.push(hashmix(i < words.length ? words[i] : 0));
  for (let src = 0; src < POOL_SIZE; src++) {
    for (let dst = 0; dst < POOL_SIZE; dst++) {
      if (src !== dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
    }
  }
  for (let src = POOL_SIZE; src < words.length; src++) {
    for (let dst = 0; dst < POOL_SIZE; dst++) pool[dst] = mix(pool[dst], hashmix(words[src]));
  }
  let hashB = INIT_B;
  const out32 = [];
  for (let i = 0; i < 2 * POOL_SIZE; i++) {
    let value = (pool[i % POOL_SIZE] ^ hashB) >>> 0;
    hashB = Math.imul(hashB, MULT_B) >>> 0;
    value = Math.imul(value, hashB) >>> 0;
    out32.push((value ^ (value >>> 16)) >>> 0);
  }
  const out64 = [];
  for (let i = 0; i < POOL_SIZE; i++) out64.push(BigInt(out32[2 * i]) | (BigInt(out32[2 * i + 1]) << 32n));
  return out64;
}

/**
 * numpy's PCG64 bit generator (128-bit LCG, XSL-RR output) with `Generator.random()`: `new PCG64([seed, row])`
 * draws what `np.random.default_rng([seed, row]).random()` draws.
 */
export class PCG64 {
  constructor(entropy) {
    const [s0, s1, i0, i1] = seedSequenceState(entropy);
    this.increment = ((((i0 << 64n) | i1) << 1n) | 1n) & MASK128;
    this.state = 0n;
    this.step();
    this.state = (this.state + ((s0 << 64n) | s1)) & MASK128;
    this.step();
  }

  step() {
    this.state = (this.state * PCG_MULTIPLIER + this.increment) & MASK128;
  }

  /** The next 64 random bits, as a BigInt. */
  nextUint64() {
    this.step();
    const high = this.state >> 64n;
    const value = (high ^ this.state) & MASK64;
    const rotation = high >> 58n;
    return ((value >> rotation) | (value << ((64n - rotation) & 63n))) & MASK64;
  }

  /** A double uniform in [0, 1): the top 53 bits of the next draw. */
  random() {
    return Number(this.nextUint64() >> 11n) / 9007199254740992;
  }
}

/** One generator per row: row b is seeded by (seed, b), as rnnx.runtime's row_generators (fresh entropy for null). */
export function rowGenerators(seed, batch) {
  let root = seed;
  if (root === null || root === undefined) {
    const [low, high] = globalThis.crypto.getRandomValues(new Uint32Array(2));
    root = (BigInt(high) << 32n) | BigInt(low);
  }
  return Array.from({ length: batch }, (_, b) => new PCG64([root, b]));
}

// -- sampling (runtime/sampling.py) ----------------------------------------------------------------------------

/**
 * The top-k filter's one meaning (docs/sampling.md): null (off) for null / undefined or any integer <= 0, else k.
 * Throws RnnxError unless topK is one of those.
 */
export function topKValue(topK) {
  if (topK === null || topK === undefined) return null;
  if (!isInt(topK)) throw new RnnxError(`topK must be an integer (<= 0: off) or null, got ${topK}`);
  return topK >= 1 ? topK : null;
}

/**
 * The top-p filter's one meaning (docs/sampling.md): null (off) for null / undefined, 0 or 1, else p in (0, 1).
 * Throws RnnxError for anything else (negative, above 1, NaN, not a number).
 */
export function topPValue(topP) {
  if (topP === null || topP === undefined) return null;
  if (typeof topP !== 'number' || !(topP >= 0 && topP <= 1)) {
    throw new RnnxError(`topP must be in [0, 1] (0 or 1: off) or null, got ${topP}`);
  }
  return topP === 0 || topP === 1 ? null : topP;
}

/** Throws RnnxError naming the bad option: temperature finite and >= 0, topK an integer, topP in [0, 1] (or null). */
export function checkSamplingOptions({ temperature = 1.0, topK = null, topP = null } = {}) {
  if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
    throw new RnnxError(`temperature must be a finite number >= 0, got ${temperature}`);
  }
  topKValue(topK);
  topPValue(topP);
}

/** The index of a row's largest value, the first of ties (numpy's argmax). */
export function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** numpy's pairwise summation of a float64 array (what `ndarray.sum` does along a contiguous axis). */
function pairwiseSum(values, start, n) {
  if (n < 8) {
    let sum = 0;
    for (let i = start; i < start + n; i++) sum += values[i];
    return sum;
  }
  if (n <= 128) {
    const r = values.slice(start, start + 8);
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j] += values[start + i + j];
    let sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) sum += values[start + i];
    return sum;
  }
  let half = Math.floor(n / 2);
  half -= half % 8;
  return pairwiseSum(values, start, half) + pairwiseSum(values, start + half, n - half);
}

/** Softmax in float64 (-Infinity entries get probability 0), numpy's operation order. */
function softmax(logits) {
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  const e = Float64Array.from(logits, (v) => Math.exp(v - max));
  const total = pairwiseSum(e, 0, e.length);
  return e.map((v) => v / total);
}

/** Entries below the row's k-th largest value set to -Infinity (k >= V: unchanged); ties at the k-th kept. */
function topKFilter(logits, k) {
  if (k >= logits.length) return logits;
  const kth = Float64Array.from(logits).sort()[logits.length - k];
  return logits.map((v) => (v < kth ? -Infinity : v));
}

/** Keeps the smallest set of most likely tokens whose probability sums to >= p (the most likely always kept). */
function topPFilter(logits, p) {
  if (p >= 1) return logits;
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b);
  const probs = softmax(logits);
  const out = Float64Array.from(logits);
  let running = 0;
  for (const index of order) { // as numpy: the running sum minus the token's own probability is the mass before it
    running += probs[index];
    if (!(running - probs[index] < p)) out[index] = -Infinity;
  }
  return out;
}

/**
 * One row's next token from its logits (V numbers): greedy for temperature 0 (argmax, first of ties), else
 * divide by the temperature, keep the top-k, keep the top-p nucleus, renormalise and draw with `rng`
 * (docs/sampling.md; topK / topP in any of their "off" forms: topKValue, topPValue).
 */
export function sampleRow(logits, rng, { temperature = 1.0, topK = null, topP = null } = {}) {
  if (temperature === 0) return argmax(logits);
  const [k, p] = [topKValue(topK), topPValue(topP)];
  let scaled = Float64Array.from(logits, (v) => v / temperature);
  if (k !== null) scaled = topKFilter(scaled, k);
  if (p !== null) scaled = topPFilter(scaled, p);
  const probs = softmax(scaled);
  const cdf = new Float64Array(probs.length);
  let running = 0;
  for (let i = 0; i < probs.length; i++) cdf[i] = running += probs[i];
  const x = rng.random() * cdf[cdf.length - 1];
  let token = cdf.findIndex((c) => c > x);
  if (token < 0) token = probs.length - 1;
  while (probs[token] === 0) token -= 1; // rounding can land on a zero-probability tail entry
  return token;
}

// -- the model --------------------------------------------------------------------------------------------------

function resolveDim(dim, dims, where) {
  if (isInt(dim)) return dim;
  let total = 0;
  for (const term of String(dim).split('+').map((t) => t.trim())) {
    if (/^\d+$/.test(term)) total += Number(term);
    else if (term in dims) total += dims[term];
    else throw new RnnxError(`${where}: unknown symbolic dim "${term}" in ${JSON.stringify(dim)}`);
  }
  return total;
}

/** Whether an ort.Tensor lives outside the CPU's memory (stateLocation 'gpu-buffer'): only those need dispose(). */
function onDevice(tensor) {
  return tensor.location !== undefined && tensor.location !== 'cpu';
}

/**
 * Frees a state's GPU buffers (every tensor not on the CPU; CPU tensors are left to the garbage collector) and
 * marks the state disposed: a later prefill/step with it throws RnnxError. null or a disposed state: nothing.
 */
export function disposeState(state) {
  if (state === null || state === undefined || state.disposed) return;
  for (const tensor of Object.values(state.tensors)) {
    if (onDevice(tensor)) tensor.dispose();
  }
  state.tensors = {};
  state.lastLogits = null;
  state.disposed = true;
}

/** A language-model export on one ONNX Runtime session: prefill, step, generate (rnnx.runtime's Session). */
export class RnnxModel {
  /**
   * @param ort ONNX Runtime's module (onnxruntime-node or onnxruntime-web)
   * @param session an ort.InferenceSession of the export's model file
   * @param metadata the export's rnnx.json, parsed
   */
  constructor(ort, session, metadata, where = METADATA_FILE) {
    this.ort = ort;
    this.session = session;
    this.metadata = metadata;
    this.states = checkMetadata(metadata, where);
    this.vocabSize = metadata.vocab_size;
    const want = metadata.inputs.map((t) => t.name);
    const have = session.inputNames;
    if (want.length !== have.length || want.some((name) => !have.includes(name))) {
      throw new RnnxError(`${where}: the model's inputs [${have.join(', ')}] are not the ones rnnx.json lists [${want.join(', ')}]`);
    }
    this.fetches = [LOGITS, ...this.states.map((s) => s.output)];
    const missing = this.fetches.filter((name) => !session.outputNames.includes(name));
    if (missing.length) {
      throw new RnnxError(`${where}: the model has no output(s) ${missing.join(', ')} that rnnx.json lists`);
    }
    /**
     * The state of the last generate() (rnnx.runtime's session.state), owned by this model: the next generate()
     * or reset() disposes it. takeState() hands it to the caller, who then disposes it (disposeState).
     */
    this.state = null;
    /** The states that running generate() loops step (not disposed under them). */
    this.running = new Set();
  }

  /** Disposes the current state (its GPU buffers) unless a running generate() still steps it. */
  reset() {
    const state = this.state;
    this.state = null;
    if (state !== null && !this.running.has(state)) disposeState(state);
  }

  /** Hands the current state to the caller (who disposes it: disposeState) and forgets it; null if none. */
  takeState() {
    const state = this.state;
    this.state = null;
    if (state !== null) state.handedOut = true;
    return state;
  }

  /**
   * Session options for the export: the caller's, with the session config entries rnnx.json asks for
   * (`extra`, which onnxruntime-node and onnxruntime-web both take as flat "section.key" strings). The option
   * `stateLocation: 'gpu-buffer'` (onnxruntime-web's WebGPU provider) keeps the state on the GPU between calls:
   * the `present.*` outputs stay there and go back as the next call's inputs; the logits come to the CPU.
   */
  static sessionOptions(metadata, options = {}) {
    const { stateLocation, ...rest } = options;
    const out = { ...rest, extra: { ...sessionConfig(metadata), ...(options.extra ?? {}) } };
    if (stateLocation !== undefined) {
      out.preferredOutputLocation = { [LOGITS]: 'cpu' };
      for (const s of metadata.state) out.preferredOutputLocation[PRESENT_PREFIX + s.name] = stateLocation;
    }
    return out;
  }

  /**
   * Node.js: the export in directory `dir`, read with `fs` (node:fs/promises, passed in so that this module
   * imports nothing); ONNX Runtime opens the model by path (so external data beside it is found).
   */
  static async open(ort, dir, fs, sessionOptions = {}) {
    const where = `${dir.replace(/\/$/, '')}/${METADATA_FILE}`;
    const metadata = await readMetadata(dir, fs);
    const session = await ort.InferenceSession.create(`${dir.replace(/\/$/, '')}/${metadata.model_file}`,
      RnnxModel.sessionOptions(metadata, sessionOptions));
    return new RnnxModel(ort, session, metadata, where);
  }

  /** Browser (or any fetch): the export at URL `base` (a folder URL; rnnx.json and the model file in it). */
  static async fetch(ort, base, sessionOptions = {}, fetchFn = globalThis.fetch) {
    const root = base.endsWith('/') ? base : `${base}/`;
    const where = `${root}${METADATA_FILE}`;
    const response = await fetchFn(where);
    if (!response.ok) throw new RnnxError(`${where}: cannot fetch export metadata (HTTP ${response.status})`);
    const metadata = parseMetadata(await response.text(), where);
    checkMetadata(metadata, where);
    const options = RnnxModel.sessionOptions(metadata, sessionOptions);
    const external = metadata.external_data?.file;
    if (external) options.externalData = [{ path: external, data: `${root}${external}` }];
    const modelResponse = await fetchFn(`${root}${metadata.model_file}`);
    if (!modelResponse.ok) {
      throw new RnnxError(`${root}${metadata.model_file}: cannot fetch the model file rnnx.json names (HTTP ${modelResponse.status})`);
    }
    const model = new Uint8Array(await modelResponse.arrayBuffer());
    const session = await ort.InferenceSession.create(model, options);
    return new RnnxModel(ort, session, metadata, where);
  }

  /** A fresh state of `batch` rows: every state tensor zero, no past (rnnx.runtime's init_state). */
  newState(batch) {
    const tensors = {};
    for (const spec of this.states) {
      const shape = spec.shape.map((d) => resolveDim(d, { [BATCH]: batch, [PAST_LENGTH]: 0 }, spec.name));
      const [type, Data] = DTYPES[spec.dtype];
      tensors[spec.input] = new this.ort.Tensor(type, new Data(shape.reduce((a, b) => a * b, 1)), shape);
    }
    return { tensors, batch, pastLength: 0, lastLogits: null };
  }

  /** One graph call: ids and mask (B*L each, row-major) from `state` -> logits (B*L*V numbers); state advanced. */
  async run(ids, mask, batch, length, state) {
    if (state.disposed) throw new RnnxError('state: disposed (disposeState, reset or a later generate freed it)');
    const shape = [batch, length];
    const feeds = { ...state.tensors };
    feeds[INPUT_IDS] = new this.ort.Tensor('int64', BigInt64Array.from(ids, BigInt), shape);
    feeds[ATTENTION_MASK] = new this.ort.Tensor('int64', BigInt64Array.from(mask, BigInt), shape);
    const outputs = await this.session.run(feeds, this.fetches);
    const tensors = {};
    for (const spec of this.states) tensors[spec.input] = outputs[spec.output];
    for (const old of Object.values(state.tensors)) {
      if (onDevice(old)) old.dispose(); // a GPU buffer nothing else reads
    }
    state.tensors = tensors;
    state.pastLength += length;
    return floatData(outputs[LOGITS]);
  }

  /** Throws RnnxError naming `where` for a token that is not an integer in [0, V). */
  checkTokens(tokens, where) {
    for (const t of tokens) {
      if (!isInt(t) || t < 0 || t >= this.vocabSize) {
        throw new RnnxError(`${where}: token ${t} out of vocabulary; expected an integer 0 <= token < ${this.vocabSize}`);
      }
    }
  }

  /**
   * Feeds prompts (B lists of tokens, right-padded here with attention_mask 0) from a fresh state; returns the
   * state, its `lastLogits` each row's logits (V numbers) after its last real token.
   */
  async prefill(prompts) {
    if (!Array.isArray(prompts) || prompts.length === 0) throw new RnnxError('prompts: expected a non-empty list of token lists');
    prompts.forEach((p, b) => {
      if (!Array.isArray(p) || p.length === 0) throw new RnnxError(`prompts[${b}]: expected a non-empty list of tokens`);
      this.checkTokens(p, `prompts[${b}]`);
    });
    const batch = prompts.length;
    const length = Math.max(...prompts.map((p) => p.length));
    const ids = new Array(batch * length).fill(0);
    const mask = new Array(batch * length).fill(0);
    prompts.forEach((p, b) => p.forEach((t, i) => { ids[b * length + i] = t; mask[b * length + i] = 1; }));
    const state = this.newState(batch);
    const logits = await this.run(ids, mask, batch, length, state);
    const V = this.vocabSize;
    state.lastLogits = prompts.map((p, b) => logits.slice((b * length + p.length - 1) * V, (b * length + p.length) * V));
    return state;
  }

  /**
   * One token per row; rows with `active[b]` false are fed as pads (state unchanged, lastLogits kept). Returns
   * the state, advanced in place.
   */
  async step(tokens, state, active = null) {
    if (!Array.isArray(tokens) || tokens.length !== state.batch) {
      throw new RnnxError(`tokens: batch mismatch: state has ${state.batch} rows, got ${tokens?.length} tokens`);
    }
    if (active !== null && (!Array.isArray(active) || active.length !== state.batch)) {
      throw new RnnxError(`active: expected ${state.batch} booleans, got ${active?.length}`);
    }
    const mask = tokens.map((_, b) => (active === null || active[b] ? 1 : 0));
    this.checkTokens(tokens.filter((_, b) => mask[b]), 'tokens');
    const logits = await this.run(tokens.map((t, b) => (mask[b] ? t : 0)), mask, state.batch, 1, state);
    const V = this.vocabSize;
    state.lastLogits = state.lastLogits.map((old, b) => (mask[b] ? logits.slice(b * V, (b + 1) * V) : old));
    return state;
  }

  /**
   * Streams generation: yields one array of B entries per step, entry b the new token of row b or null once
   * row b has stopped. A row stops after a token in `stopTokens` (which is yielded) or `maxNewTokens`.
   * temperature 0 is greedy; row b draws from its own generator seeded by (seed, b). Options are checked
   * before anything runs. The previous generate()'s state is disposed as this one starts (takeState() keeps it);
   * this one's state becomes `this.state` and stays there, ended or stopped early by the caller, until the next
   * generate() or reset(). A state that a later generate() replaced while this one ran is disposed when this
   * one ends.
   */
  async *generate(prompts, { maxNewTokens, temperature = 1.0, topK = null, topP = null, stopTokens = [], seed = null } = {}) {
    const sampling = { temperature, topK, topP };
    checkSamplingOptions(sampling);
    if (!isInt(maxNewTokens) || maxNewTokens < 0) {
      throw new RnnxError(`maxNewTokens: expected an integer >= 0, got ${maxNewTokens}`);
    }
    if (seed !== null && !((isInt(seed) && seed >= 0) || (typeof seed === 'bigint' && seed >= 0n))) {
      throw new RnnxError(`seed: expected a non-negative integer or null, got ${seed}`);
    }
    if (!Array.isArray(stopTokens) || !stopTokens.every(isInt)) {
      throw new RnnxError(`stopTokens: expected a list of integers, got ${JSON.stringify(stopTokens)}`);
    }
    if (maxNewTokens === 0) return;
    const stops = new Set(stopTokens);
    this.reset();
    const state = await this.prefill(prompts);
    this.state = state;
    this.running.add(state);
    try {
      const rngs = rowGenerators(seed, state.batch);
      const active = new Array(state.batch).fill(true);
      for (let i = 0; i < maxNewTokens; i++) {
        const tokens = state.lastLogits.map((row, b) => sampleRow(row, rngs[b], sampling));
        yield tokens.map((t, b) => (active[b] ? t : null));
        tokens.forEach((t, b) => { if (stops.has(t)) active[b] = false; });
        if (!active.some(Boolean) || i === maxNewTokens - 1) return;
        await this.step(tokens.map((t, b) => (active[b] ? t : 0)), state, active);
      }
    } finally { // ended, stopped early (break / return) or failed
      this.running.delete(state);
      if (this.state !== state && !state.handedOut) disposeState(state); // replaced meanwhile: nothing reaches it
    }
  }

  /** generate() collected: the new tokens of every row (stop token included). */
  async generateAll(prompts, options) {
    const out = prompts.map(() => []);
    for await (const tokens of this.generate(prompts, options)) {
      tokens.forEach((t, b) => { if (t !== null) out[b].push(t); });
    }
    return out;
  }
}
