// rnnx.mjs's GPU-buffer states are disposed (generate, reset, takeState, disposeState), checked in Node with no GPU:
// a stand-in for onnxruntime-web's WebGPU provider wraps a real onnxruntime-node session and hands its present.*
// outputs back as 'gpu-buffer' tensors (ort.Tensor.fromGpuBuffer over a fake buffer whose data it keeps), taking
// them back as inputs; a disposed one fed to it fails. The test double stands for the GPU only: every number is
// computed by the real session. Prints {"greedy", "disposalGreedy", "checks"} as JSON.
// Used by tests/test_js_runtime.py.
//
//   NODE_PATH=.cache/js/node_modules node tests/js/state_disposal.mjs EXPORT_DIR PROMPT_JSON MAX_NEW
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

import { PRESENT_PREFIX, RnnxError, RnnxModel, disposeState } from '../../runtime/js/rnnx.mjs';

const ort = createRequire(import.meta.url)('onnxruntime-node');
const [exportDir, promptJson, maxNewText] = process.argv.slice(2);
const prompts = [JSON.parse(promptJson)];
const options = { maxNewTokens: Number(maxNewText), temperature: 0 };

/** The live fake GPU buffers: buffer -> its CPU tensor; dispose() removes one. */
const live = new Map();

/** A session whose present.* outputs come back as 'gpu-buffer' tensors (what stateLocation 'gpu-buffer' gives). */
function gpuStateSession(session) {
  return {
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    async run(feeds, fetches) {
      const cpuFeeds = {};
      for (const [name, tensor] of Object.entries(feeds)) {
        if (tensor.location !== 'gpu-buffer') {
          cpuFeeds[name] = tensor;
        } else if (!live.has(tensor.gpuBuffer)) {
          throw new Error(`input ${name}: its GPU buffer was disposed`);
        } else {
          cpuFeeds[name] = live.get(tensor.gpuBuffer);
        }
      }
      const outputs = await session.run(cpuFeeds, fetches);
      for (const name of Object.keys(outputs)) {
        if (!name.startsWith(PRESENT_PREFIX)) continue;
        const cpu = outputs[name];
        const buffer = { name };
        live.set(buffer, cpu);
        outputs[name] = ort.Tensor.fromGpuBuffer(buffer, { dataType: cpu.type, dims: cpu.dims,
          dispose: () => live.delete(buffer) });
      }
      return outputs;
    },
  };
}

async function open(gpu) {
  const metadata = JSON.parse(await readFile(`${exportDir}/rnnx.json`, 'utf8'));
  const session = await ort.InferenceSession.create(`${exportDir}/${metadata.model_file}`,
    RnnxModel.sessionOptions(metadata));
  return new RnnxModel(ort, gpu ? gpuStateSession(session) : session, metadata);
}

const cpuModel = await open(false);
const greedy = (await cpuModel.generateAll(prompts, options))[0];
const model = await open(true);
const states = model.states.length;
const checks = {};

let tokens = (await model.generateAll(prompts, options))[0];
checks.afterOne = live.size; // model.state's buffers only
tokens = (await model.generateAll(prompts, options))[0];
checks.afterTwo = live.size; // the first run's state disposed as the second started
const disposalGreedy = tokens;

for await (const _ of model.generate(prompts, options)) break; // the caller stops early: state kept as model.state
checks.afterBreak = live.size;
model.reset();
checks.afterReset = live.size;

await model.generateAll(prompts, options);
const taken = model.takeState();
await model.generateAll(prompts, options);
checks.afterTake = live.size; // the taken state and the current one
disposeState(taken);
checks.afterDisposeTaken = live.size;
try {
  await model.step(prompts.map(() => 1), taken);
  checks.stepOnDisposed = 'no error';
} catch (error) {
  checks.stepOnDisposed = error instanceof RnnxError ? error.message : `${error.name}: ${error.message}`;
}

// A second generate() started while the first still runs: the first's state is not disposed under it, and is
// disposed once the first ends (nothing reaches it then).
const first = model.generate(prompts, options);
const firstTokens = [(await first.next()).value[0]];
const second = await model.generateAll(prompts, options);
for await (const [t] of first) firstTokens.push(t);
checks.interleaved = { first: firstTokens, second: second[0] };
checks.afterInterleaved = live.size;
model.reset();
checks.afterFinalReset = live.size;
console.log(JSON.stringify({ greedy, disposalGreedy, states, checks }));
