"""Hostile (and one honest) ONNX models, built byte by byte with ``onnx.helper``.

Shared by the validator tests here and the HTTP upload tests: every entry of
:func:`hostile_corpus` must be refused with an :class:`InvalidSubmission` whose
message contains all of ``expect``; :func:`play_time_hostiles` pass validation (they
behave on the probe batch) and must forfeit in a match instead.

Models are for ``tictactoe-v3`` by default (observation ``(3, 3, 2)``, 9 actions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from agents.checkpoint_spec import ONNX_ARCH, make_spec
from agents.onnx_agents.probe import PROBE_ROWS
from envs.registry import get_spec

ENV = "tictactoe-v3"
OPSET = 17
IR_VERSION = 8  # the IR of opset 17, readable by every supported onnxruntime
Graph = tuple[list[onnx.NodeProto], list[TensorProto]]


def spec_json(env_id: str = ENV, role: str | None = None) -> dict:
    """The ``agent.json`` of an ONNX submission for ``env_id``."""
    return make_spec(env_id, ONNX_ARCH, role=role).to_json()


def _shapes(env_id: str, role: str | None) -> tuple[tuple[int, ...], int]:
    spec = get_spec(env_id)
    team = spec.team_of_role(role) if role else 0
    return tuple(spec.team_obs_shape(team)), spec.num_actions


def linear_graph(
    env_id: str = ENV, seed: int = 0, out: str = "logits", role: str | None = None
) -> Graph:
    """Flatten -> MatMul -> Add: a small honest policy writing ``out``."""
    obs_shape, actions = _shapes(env_id, role)
    gen = np.random.default_rng(seed)
    weight = gen.normal(size=(math.prod(obs_shape), actions)).astype(np.float32)
    nodes = [
        helper.make_node("Flatten", ["obs"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], [out]),
    ]
    return nodes, [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(
        np.zeros(actions, np.float32), "b")]


def build_model(
    nodes: list[onnx.NodeProto],
    initializers: list[TensorProto],
    env_id: str = ENV,
    *,
    opset: int = OPSET,
    input_dims: list | None = None,
    input_type: int = TensorProto.FLOAT,
    extra_inputs: list[onnx.ValueInfoProto] = (),
    opsets: list[onnx.OperatorSetIdProto] = (),
    role: str | None = None,
) -> onnx.ModelProto:
    """A model with input ``obs`` ``[batch, *obs_shape]`` and output ``logits`` ``[batch, A]``."""
    obs_shape, actions = _shapes(env_id, role)
    dims = ["batch", *obs_shape] if input_dims is None else input_dims
    graph = helper.make_graph(
        nodes, "policy",
        [helper.make_tensor_value_info("obs", input_type, dims), *extra_inputs],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", actions])],
        initializers,
    )
    imports = [helper.make_opsetid("", opset), *opsets]
    return helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION)


def honest_model(env_id: str = ENV, seed: int = 0) -> bytes:
    """A valid linear policy (the control: it must pass)."""
    return build_model(*linear_graph(env_id, seed), env_id).SerializeToString()


def _after_probe(env_id: str, then: Callable[[str], Graph]) -> bytes:
    """A model that is honest on batches of at most PROBE_ROWS rows and misbehaves on larger ones.

    ``then(flag)`` adds the misbehaviour given a bool scalar ``flag`` (batch > PROBE_ROWS).
    """
    nodes, inits = linear_graph(env_id, out="honest")
    nodes += [
        helper.make_node("Shape", ["obs"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero_i"], ["rows"], axis=0),
        helper.make_node("Greater", ["rows", "probe_rows"], ["flag"]),
    ]
    inits += [helper.make_tensor("zero_i", TensorProto.INT64, [], [0]),
              helper.make_tensor("probe_rows", TensorProto.INT64, [], [PROBE_ROWS])]
    more_nodes, more_inits = then("flag")
    return build_model(nodes + more_nodes, inits + more_inits, env_id).SerializeToString()


def _nan_when(flag: str) -> Graph:
    nodes = [helper.make_node("Where", [flag, "nan", "zero_f"], ["poison"]),
             helper.make_node("Add", ["honest", "poison"], ["logits"])]
    return nodes, [helper.make_tensor("nan", TensorProto.FLOAT, [], [math.nan]),
                   helper.make_tensor("zero_f", TensorProto.FLOAT, [], [0.0])]


def _count_loop(trip: str, out: str) -> Graph:
    """``out`` = a float counted up by a ``Loop`` of ``trip`` iterations (one Add each)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "count",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    nodes = [helper.make_node("Loop", [trip, "true", "start"], [out], body=body)]
    return nodes, [helper.make_tensor("true", TensorProto.BOOL, [], [True]),
                   helper.make_tensor("start", TensorProto.FLOAT, [], [0.0])]


def _zero_scaled(value: str) -> Graph:
    """``logits = honest + 0 * value`` (the graph depends on ``value``, the logits do not)."""
    nodes = [helper.make_node("Mul", [value, "zero_s"], ["nothing"]),
             helper.make_node("Add", ["honest", "nothing"], ["logits"])]
    return nodes, [helper.make_tensor("zero_s", TensorProto.FLOAT, [], [0.0])]


LONG_TRIPS = 10**15  # about 30 years of Loop iterations at onnxruntime's pace


def _loop_when(flag: str) -> Graph:
    nodes = [helper.make_node("Where", [flag, "long", "once"], ["trips"])]
    inits = [helper.make_tensor("long", TensorProto.INT64, [], [LONG_TRIPS]),
             helper.make_tensor("once", TensorProto.INT64, [], [1])]
    loop_nodes, loop_inits = _count_loop("trips", "count")
    tail_nodes, tail_inits = _zero_scaled("count")
    return nodes + loop_nodes + tail_nodes, inits + loop_inits + tail_inits


def play_time_hostiles(env_id: str = ENV) -> dict[str, bytes]:
    """Models that pass validation but misbehave in a match (batches over PROBE_ROWS)."""
    return {"nan_in_play": _after_probe(env_id, _nan_when),
            "loop_in_play": _after_probe(env_id, _loop_when)}


def _linear_into(out: str, tail: list[onnx.NodeProto], inits: list[TensorProto] = (),
                 **build: object) -> bytes:
    """The honest linear graph writing ``out``, then ``tail`` nodes producing ``logits``."""
    nodes, base = linear_graph(ENV, out=out)
    return build_model(nodes + tail, base + list(inits), **build).SerializeToString()


def _tensor_edit(edit: Callable[[onnx.ModelProto], None]) -> bytes:
    model = build_model(*linear_graph())
    edit(model)
    return model.SerializeToString()


def _external(tensor: TensorProto, location: str | None) -> None:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    if location is not None:
        for key, value in (("location", location), ("offset", "0"), ("length", "4")):
            tensor.external_data.add(key=key, value=value)


def _claim(model: onnx.ModelProto, dims: list[int], raw: bytes | None, floats=()) -> None:
    """Replace ``W`` by a tensor whose dims claim far more than it holds."""
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    del weight.dims[:]
    weight.dims.extend(dims)
    if raw is not None:
        weight.raw_data = raw
    weight.float_data.extend(floats)


def _constant_external(location: str) -> bytes:
    const = helper.make_tensor("c", TensorProto.FLOAT, [9], np.zeros(9, np.float32))
    _external(const, location)
    node = helper.make_node("Constant", [], ["c_out"], value=const)
    return _linear_into("h", [node, helper.make_node("Add", ["h", "c_out"], ["logits"])])


def _loop_external(location: str) -> bytes:
    """External data hidden in a Loop body's initializer (the walker must reach subgraphs)."""
    nodes, inits = _count_loop("trips", "count")
    _external(nodes[0].attribute[0].g.initializer[0], location)
    tail, tail_inits = _zero_scaled("count")
    once = helper.make_tensor("trips", TensorProto.INT64, [], [1])
    return _linear_into("honest", nodes + tail, [*inits, *tail_inits, once])


def _local_function() -> bytes:
    fn = helper.make_function("", "Relu2", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])],
                              [helper.make_opsetid("", OPSET)])
    model = onnx.load_from_string(_linear_into("h", [helper.make_node("Relu", ["h"], ["logits"])]))
    model.functions.append(fn)
    return model.SerializeToString()


def _node_bomb(count: int) -> bytes:
    chain = [helper.make_node("Identity", [f"h{i}"], [f"h{i + 1}"]) for i in range(count)]
    return _linear_into("h0", [*chain, helper.make_node("Identity", [f"h{count}"], ["logits"])])


def _memory_bomb() -> bytes:
    """Asks for ``rows * 2**26`` floats at run time: 2 GiB on the probe batch of 8."""
    nodes = [helper.make_node("Shape", ["obs"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero_1", "one_1"], ["rows"]),
             helper.make_node("Concat", ["rows", "wide"], ["big_shape"], axis=0),
             helper.make_node("ConstantOfShape", ["big_shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
             helper.make_node("Add", ["h", "total"], ["logits"])]
    inits = [helper.make_tensor("zero_1", TensorProto.INT64, [1], [0]),
             helper.make_tensor("one_1", TensorProto.INT64, [1], [1]),
             helper.make_tensor("wide", TensorProto.INT64, [1], [2**26])]
    return _linear_into("h", nodes, inits)


LONG_SIDE = 6144  # one [6144, 6144] MatMul: 4.6e11 flops, 4-8 s on one core


def long_operator() -> bytes:
    """One MatMul of a ``[LONG_SIDE, LONG_SIDE]`` matrix by itself, the matrix built at run time.

    288 MiB of tensors, inside the memory cap; onnxruntime checks ``terminate`` only
    between operators, so only killing the worker process stops it at its deadline. What
    comes before the MatMul is one pass over the matrix (an ``Expand`` of a scalar), so a
    loaded machine does not spend the deadline before the MatMul begins.
    """
    # the matrix depends on the input, so no constant folding at load can run it early
    nodes = [helper.make_node("ReduceSum", ["honest"], ["seen"], keepdims=0),
             helper.make_node("Expand", ["seen", "square"], ["m"]),
             helper.make_node("MatMul", ["m", "m"], ["mm"]),
             helper.make_node("ReduceSum", ["mm"], ["total"], keepdims=0)]
    inits = [helper.make_tensor("square", TensorProto.INT64, [2], [LONG_SIDE, LONG_SIDE])]
    tail_nodes, tail_inits = _zero_scaled("total")
    return _linear_into("honest", nodes + tail_nodes, inits + tail_inits)


@dataclass(frozen=True)
class HostileOnnx:
    """One hostile submission and the message fragments its refusal must contain."""

    name: str
    data: bytes
    expect: tuple[str, ...]
    spec: dict = field(default_factory=spec_json)
    max_bytes: int = 64 * 1024 * 1024


def hostile_corpus() -> list[HostileOnnx]:
    """Every model here must be refused by ``validate_onnx_bytes`` (probe limit 0.5 s is plenty)."""
    honest = honest_model()
    add = lambda a, b: helper.make_node("Add", [a, b], ["logits"])
    nan = helper.make_tensor("nan", TensorProto.FLOAT, [], [math.nan])
    entries = [
        ("oversize", honest, ("over the limit",), {"max_bytes": len(honest) - 1}),
        ("truncated_protobuf", honest[: len(honest) // 2], ("not an ONNX model",), {}),
        ("pickle", b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01x\x94K\x01s.",
         ("not an ONNX model",), {}),
        ("empty", b"", ("not an ONNX model",), {}),
        ("spec_not_onnx", honest, ("\"arch\": \"onnx\"",), {"spec": make_spec(ENV, "mlp").to_json()}),
        ("external_traversal", _tensor_edit(lambda m: _external(m.graph.initializer[0],
                                                                "../../etc/passwd")),
         ("external data", "self-contained"), {}),
        ("external_absolute", _tensor_edit(lambda m: _external(m.graph.initializer[0],
                                                               "/etc/passwd")),
         ("external data",), {}),
        ("external_flag_only", _tensor_edit(lambda m: _external(m.graph.initializer[0], None)),
         ("external data",), {}),
        ("external_in_constant", _constant_external("../../etc/shadow"), ("external data",), {}),
        ("external_in_loop_body", _loop_external("../secret.bin"), ("external data",), {}),
        ("initializer_claims_2gb", _tensor_edit(lambda m: _claim(m, [2**29], b"\0" * 4)),
         ("declares dims [536870912]", "2,147,483,648 bytes"), {}),
        ("initializer_claims_values", _tensor_edit(lambda m: _claim(m, [2**29], None, [1.0])),
         ("536,870,912 values", "holds 1 values"), {}),
        ("custom_op_domain", _linear_into("h", [helper.make_node("Evil", ["h"], ["logits"],
                                                                 domain="com.evil")],
                                          opsets=[helper.make_opsetid("com.evil", 1)]),
         ("'com.evil'", "custom"), {}),
        ("custom_op_node", _linear_into("h", [helper.make_node("Evil", ["h"], ["logits"],
                                                               domain="com.evil")]),
         ("'com.evil'", "custom operators"), {}),
        ("contrib_op", _linear_into("h", [helper.make_node("FastGelu", ["h"], ["logits"],
                                                           domain="com.microsoft")],
                                    opsets=[helper.make_opsetid("com.microsoft", 1)]),
         ("'com.microsoft'",), {}),
        ("ml_domain", _linear_into("h", [helper.make_node("Relu", ["h"], ["logits"])],
                                   opsets=[helper.make_opsetid("ai.onnx.ml", 3)]),
         ("'ai.onnx.ml'",), {}),
        ("unknown_op", _linear_into("h", [helper.make_node("SystemCall", ["h"], ["logits"])]),
         ("not a standard ONNX operator",), {}),
        ("random_op", _linear_into("h", [helper.make_node("RandomNormalLike", ["h"], ["r"]),
                                         add("h", "r")]), ("random operators",), {}),
        ("local_function", _local_function(), ("model-local functions",), {}),
        ("node_bomb", _node_bomb(20_001), ("more than 20,000 nodes",), {}),
        ("opset_too_old", _linear_into("h", [add("h", "b")], opset=12), ("opset 12",), {}),
        ("opset_too_new", _linear_into("h", [add("h", "b")], opset=22), ("opset 22",), {}),
        ("wrong_input_shape", _linear_into("h", [add("h", "b")], input_dims=["batch", 3, 3, 3]),
         ("input 'obs'", "expected [batch, 3, 3, 2]"), {}),
        ("fixed_batch", _linear_into("h", [add("h", "b")], input_dims=[8, 3, 3, 2]),
         ("dynamic batch",), {}),
        ("wrong_dtype", _linear_into("h", [add("h", "b")], input_type=TensorProto.DOUBLE),
         ("must be a float32 tensor", "DOUBLE"), {}),
        ("two_inputs", _linear_into("h", [add("h", "b")], extra_inputs=[
            helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", 9])]),
         ("2 input(s)", "no action mask"), {}),
        ("constant_nan", _linear_into("h", [add("h", "nan")], [nan]), ("NaN",), {}),
        ("endless_loop", _linear_into("honest", _count_loop("trips", "count")[0]
                                      + _zero_scaled("count")[0],
                                      [*_count_loop("trips", "count")[1], *_zero_scaled("count")[1],
                                       helper.make_tensor("trips", TensorProto.INT64, [],
                                                          [LONG_TRIPS])]),
         ("did not answer a probe batch",), {}),
        ("long_operator", long_operator(), ("did not answer a probe batch",), {}),
        ("memory_bomb", _memory_bomb(), ("failed on a probe batch",), {}),
    ]
    return [HostileOnnx(name, data, expect, **extra) for name, data, expect, extra in entries]
