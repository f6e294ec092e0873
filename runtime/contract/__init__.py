"""The contracts every room of rnnx imports, in one torch-free place (numpy and the standard library only).

* :mod:`.artifact`: an export on disk (``rnnx.json``, the file names, the graph's tensor and axis names,
  state specs, metadata read / write / validation, the model signature) between the exporter and every
  runtime (Python here, C++ in runtime/native reading the same ``rnnx.json``).
* :mod:`.ops`: the op records (one :class:`~.ops.OpSpec` per recurrent op: names, tensors, roles,
  attributes, the ONNX domain and TensorRT plugin namespace) read by the torch ops, the ONNX export, the
  plugins' tests and the runtime.
* :mod:`.prompts`: the default prompts of a parity check (an export's and ``rnnx-parity``'s).
* :mod:`.schema`: the contract as machine-readable files, generated from :mod:`.artifact`'s records
  (``python3 -m rnnx.runtime.contract.schema --write``): the JSON Schemas of ``rnnx.json`` and of a state file's
  header (``rnnx.schema.json``, ``rnnx-state.schema.json`` beside it) and the C and JavaScript readers' tables.
* :mod:`.targets`: the export targets and precisions as records (:class:`~.targets.Target`,
  :class:`~.targets.Precision`): what each target's graph looks like and what each precision is; code asks
  a record instead of comparing names.

Nothing here imports the rest of rnnx; docs/architecture.md draws who imports whom.
"""
