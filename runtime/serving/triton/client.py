"""A tritonclient driver for the ``python`` variant (rnnx's tests, benchmark and a client example).

Needs ``tritonclient[grpc]`` (not an rnnx dependency; the Triton venv of ``scripts/setup.sh`` has it).
A stream is one Triton sequence: a START request with the prompt in ``input_ids`` (and the sampling
options), then one request per new token feeding the previous ``next_token``, the last with END.

    python -m rnnx.runtime.serving.triton.client parse   < {"configs": [path, ...]}
    python -m rnnx.runtime.serving.triton.client streams < {"url", "model", "streams": [{"id", "prompt", "steps",
                                                    options..., "conversation_id", "bad_at": step or null}],
                                                    "max_pause_s"}
    python -m rnnx.runtime.serving.triton.client probe   < {"url", "model", "id", "tokens", "start", "end"}

``parse`` parses each config.pbtxt into Triton's own ``ModelConfig`` protobuf and prints what it holds.
``streams`` drives every stream from its own thread with interleaved requests (random pauses up to
``max_pause_s``, per-request latencies recorded); a stream with ``bad_at`` also sends, at that step, a
request with an out-of-vocabulary token and records the error it gets. ``probe`` sends one START+END
request (or as given) and prints ``next_token`` and ``held_streams``. Output: JSON on stdout.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from typing import Any

import numpy as np

from ...contract.artifact import INPUT_IDS
from .config import CONVERSATION_ID, PYTHON_INPUTS, PYTHON_OUTPUTS

#: Triton type (without ``TYPE_``) -> numpy dtype, for the option inputs.
NUMPY_TYPES = {"FP32": np.float32, "INT32": np.int32, "INT64": np.int64, "STRING": np.object_}
#: Config types whose name on the wire differs (a config's ``TYPE_STRING`` travels as ``BYTES``).
WIRE_TYPES = {"STRING": "BYTES"}


def parse(payload: dict) -> list[dict]:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    out = []
    for path in payload["configs"]:
        config = text_format.Parse(open(path).read(), mc.ModelConfig())
        dtype = mc.DataType.Name
        seq = config.sequence_batching
        out.append(
            {
                "name": config.name, "platform": config.platform, "backend": config.backend,
                "max_batch_size": config.max_batch_size,
                "inputs": [
                    [t.name, dtype(t.data_type), list(t.dims), t.optional, t.allow_ragged_batch] for t in config.input
                ],
                "outputs": [[t.name, dtype(t.data_type), list(t.dims)] for t in config.output],
                "controls": {
                    c.name: [mc.ModelSequenceBatching.Control.Kind.Name(k.kind) for k in c.control]
                    for c in seq.control_input
                },
                "corrid_type": [dtype(k.data_type) for c in seq.control_input for k in c.control if c.name == "CORRID"],
                "state": [
                    [s.input_name, s.output_name, dtype(s.data_type), list(s.dims),
                     [list(i.dims) for i in s.initial_state], [i.zero_data for i in s.initial_state]]
                    for s in seq.state
                ],
                "idle_us": seq.max_sequence_idle_microseconds,
                "strategy": seq.WhichOneof("strategy_choice"),
                "preferred": list(seq.oldest.preferred_batch_size),
                "instances": [
                    [g.count, mc.ModelInstanceGroup.Kind.Name(g.kind), list(g.profile)] for g in config.instance_group
                ],
                "parameters": {k: v.string_value for k, v in config.parameters.items()},
            }
        )  # fmt: skip
    return out


def _request(client: Any, model: str, seq_id: int, tokens: list[int], start: bool, end: bool, options: dict):
    """One request of a stream -> (next_token, held_streams); options (read at START) by input name."""
    import tritonclient.grpc as grpc

    ids = grpc.InferInput(INPUT_IDS, [1, len(tokens)], "INT64")
    ids.set_data_from_numpy(np.asarray([tokens], dtype=np.int64))
    inputs = [ids]
    for name, (triton_type, _, _) in PYTHON_INPUTS.items():
        if start and name in options:
            kind = triton_type.removeprefix("TYPE_")
            t = grpc.InferInput(name, [1, 1], WIRE_TYPES.get(kind, kind))
            value = str(options[name]).encode() if kind == "STRING" else options[name]
            t.set_data_from_numpy(np.asarray([[value]], dtype=NUMPY_TYPES[kind]))
            inputs.append(t)
    result = client.infer(model, inputs, sequence_id=seq_id, sequence_start=start, sequence_end=end)
    return tuple(int(result.as_numpy(name).reshape(-1)[0]) for name in PYTHON_OUTPUTS)


def streams(payload: dict) -> dict:
    import tritonclient.grpc as grpc
    from tritonclient.utils import InferenceServerException

    url, model = payload["url"], payload["model"]
    results: dict = {}
    barrier = threading.Barrier(len(payload["streams"]))

    def run(spec: dict) -> None:
        client = grpc.InferenceServerClient(url)
        rng = random.Random(spec["id"])
        options = {k: spec[k] for k in ("temperature", "top_k", "top_p", "seed", CONVERSATION_ID) if k in spec}
        tokens, held, errors, latencies = [], [], [], []
        barrier.wait()
        feed = list(spec["prompt"])
        for step in range(spec["steps"]):
            if spec.get("bad_at") == step:
                try:
                    _request(client, model, spec["id"], [10**9], False, False, {})
                    errors.append("no error")
                except InferenceServerException as error:
                    errors.append(str(error))
            start = time.perf_counter()
            token, n = _request(client, model, spec["id"], feed, step == 0, step == spec["steps"] - 1, options)
            latencies.append(time.perf_counter() - start)
            tokens.append(token)
            held.append(n)
            feed = [token]
            time.sleep(rng.uniform(0, payload.get("max_pause_s", 0.005)))
        results[spec["id"]] = {"tokens": tokens, "held": held, "errors": errors, "latencies": latencies}

    threads = [threading.Thread(target=run, args=(s,)) for s in payload["streams"]]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"streams": {str(k): v for k, v in results.items()}, "seconds": time.perf_counter() - start}


def probe(payload: dict) -> dict:
    import tritonclient.grpc as grpc
    from tritonclient.utils import InferenceServerException

    client = grpc.InferenceServerClient(payload["url"])
    try:
        token, held = _request(client, payload["model"], payload["id"], payload["tokens"], payload.get("start", True),
                               payload.get("end", True), {})  # fmt: skip
        return {"token": token, "held": held}
    except InferenceServerException as error:
        return {"error": str(error)}


if __name__ == "__main__":
    command = sys.argv[1]
    data = json.load(sys.stdin)
    print(json.dumps({"parse": parse, "streams": streams, "probe": probe}[command](data)))
