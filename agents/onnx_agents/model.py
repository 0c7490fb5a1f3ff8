"""Static checks of an untrusted ``.onnx`` file, before any runtime sees it.

An ONNX file is a protobuf ``ModelProto``: parsing it executes nothing. What a model
*could* make a runtime do is decided here, from the parsed message alone:

* size first (the caller's limit), then a protobuf parse of the bytes (never a path,
  so nothing beside the file is ever opened);
* IR version and opsets: only the default domain (``""`` / ``"ai.onnx"``), opset
  :data:`MIN_OPSET` to :data:`MAX_OPSET`; every other domain (custom operators,
  ``ai.onnx.ml``, onnxruntime's ``com.microsoft`` contrib ops) is refused, and so are
  model-local functions and training info;
* every node, in the main graph and in every ``Loop``/``If``/``Scan`` body: a known
  standard operator, no random operators (Arena samples the action itself, from the
  match's seeded streams), at most :data:`MAX_NODES` nodes and :data:`MAX_GRAPH_DEPTH`
  levels of nesting;
* every tensor (initializers and tensor attributes, e.g. ``Constant`` values): stored
  inside the file (``data_location`` EXTERNAL or ``external_data`` entries are refused,
  whatever the path says), a plain numeric dtype, and a payload exactly as large as its
  dims declare, so a "2 GB initializer" claimed over 4 bytes is refused without
  allocating anything;
* the signature: one float32 input ``[batch, *obs_shape]`` with a dynamic batch
  dimension and one float32 output ``[batch, num_actions]`` (see :func:`check_signature`).

Every failure raises :class:`InvalidSubmission` saying what to fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, ValueInfoProto, helper

from envs.errors import InvalidSubmission

MIN_OPSET = 13
"""Oldest accepted default-domain opset (Softmax/ReduceSum got their current forms)."""
MAX_OPSET = 21
"""Newest accepted default-domain opset (onnxruntime >= 1.20 implements all of it)."""
MIN_IR_VERSION = 7
DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})
MAX_NODES = 20_000
"""Nodes in the whole model, subgraphs included (a policy net exported by torch has far fewer)."""
MAX_GRAPH_DEPTH = 8
RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
     "Bernoulli"}
)

_TENSOR_DTYPES = (
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT8,
    TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16,
    TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL,
)
"""The accepted tensor dtypes: the plain numeric ones."""
# dtype -> (bytes per element in raw_data, the typed field that holds it otherwise), as onnx lays them out
_TENSOR_TYPES: dict[int, tuple[int, str]] = {
    dtype: (helper.tensor_dtype_to_np_dtype(dtype).itemsize, helper.tensor_dtype_to_field(dtype))
    for dtype in _TENSOR_DTYPES
}
_DATA_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                "uint64_data")


def _type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type {elem_type}"


def parse_model(data: bytes) -> ModelProto:
    """Parse ``data`` as a ``ModelProto`` (protobuf only: no file access, no code).

    Raises:
        InvalidSubmission: Not a protobuf ``ModelProto`` or one without a graph.
    """
    model = ModelProto()
    try:
        model.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InvalidSubmission(
            f"not an ONNX model: the bytes are not a valid ONNX protobuf ({exc}); "
            "save the model with onnx.save or torch.onnx.export"
        ) from None
    if not model.HasField("graph") or not model.graph.node:
        raise InvalidSubmission("not an ONNX model: it has no graph or an empty graph")
    return model


def check_tensor(tensor: TensorProto, where: str) -> None:
    """Require a tensor stored in the file, of a numeric dtype, with the payload its dims declare.

    Raises:
        InvalidSubmission: External data, sparse/strings/exotic dtype, negative dims,
            or a payload size different from what ``dims`` and the dtype declare.
    """
    name = f"tensor {tensor.name!r} ({where})" if tensor.name else f"a tensor in {where}"
    if tensor.data_location == TensorProto.EXTERNAL or len(tensor.external_data):
        raise InvalidSubmission(
            f"{name} refers to external data; Arena accepts self-contained files only: save "
            "with onnx.save_model(model, path, save_as_external_data=False) (models < 2 GB)"
        )
    if tensor.data_type not in _TENSOR_TYPES:
        raise InvalidSubmission(
            f"{name} has dtype {_type_name(tensor.data_type)}; accepted tensor dtypes: "
            f"{', '.join(sorted(_type_name(t) for t in _TENSOR_TYPES))}"
        )
    if any(d < 0 for d in tensor.dims):
        raise InvalidSubmission(f"{name} has negative dims {list(tensor.dims)}")
    count = math.prod(tensor.dims)  # exact Python int: a 2**60 claim cannot overflow
    itemsize, field = _TENSOR_TYPES[tensor.data_type]
    stored = [f for f in _DATA_FIELDS if len(getattr(tensor, f))]
    if tensor.HasField("raw_data"):
        if stored or len(tensor.raw_data) != count * itemsize:
            raise InvalidSubmission(
                f"{name} declares dims {list(tensor.dims)} ({count * itemsize:,} bytes) but "
                f"holds {len(tensor.raw_data):,} bytes of data"
            )
    elif stored not in ([], [field]) or len(getattr(tensor, field)) != count:
        raise InvalidSubmission(
            f"{name} declares dims {list(tensor.dims)} ({count:,} values) but holds "
            f"{len(getattr(tensor, field)):,} values in {field}"
        )


def _tensors_and_graphs(attr: AttributeProto, where: str) -> Iterator[TensorProto | GraphProto]:
    if attr.type in (AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS):
        raise InvalidSubmission(f"{where}: sparse tensor attributes are not accepted; use dense")
    if attr.HasField("t"):
        yield attr.t
    yield from attr.tensors
    if attr.HasField("g"):
        yield attr.g
    yield from attr.graphs


def _check_node(node: onnx.NodeProto, where: str) -> None:
    label = f"{node.op_type} node {node.name!r}" if node.name else f"{node.op_type} node"
    if node.domain not in DEFAULT_DOMAINS:
        raise InvalidSubmission(
            f"{label} in {where} uses operator domain {node.domain!r}: custom operators are "
            "not accepted; use standard ONNX operators only (domain '' / 'ai.onnx')"
        )
    if not onnx.defs.has(node.op_type, ""):
        raise InvalidSubmission(f"{label} in {where}: {node.op_type!r} is not a standard ONNX operator")
    if node.op_type in RANDOM_OPS:
        raise InvalidSubmission(
            f"{label} in {where}: random operators are not accepted; output logits, Arena "
            "samples the action from them with the match's seeded random streams"
        )


def _walk(graph: GraphProto, where: str, depth: int, budget: list[int]) -> None:
    """Check every node and tensor of ``graph`` and of its subgraphs (depth first)."""
    if depth > MAX_GRAPH_DEPTH:
        raise InvalidSubmission(f"{where}: subgraphs nested more than {MAX_GRAPH_DEPTH} deep")
    if len(graph.sparse_initializer):
        raise InvalidSubmission(f"{where}: sparse initializers are not accepted; use dense ones")
    for tensor in graph.initializer:
        check_tensor(tensor, f"initializer of {where}")
    budget[0] -= len(graph.node)
    if budget[0] < 0:
        raise InvalidSubmission(f"the model has more than {MAX_NODES:,} nodes (subgraphs included)")
    for node in graph.node:
        _check_node(node, where)
        for attr in node.attribute:
            at = f"attribute {attr.name!r} of {node.op_type} node {node.name!r} in {where}"
            for item in _tensors_and_graphs(attr, at):
                if isinstance(item, TensorProto):
                    check_tensor(item, at)
                else:
                    _walk(item, f"subgraph {item.name!r}", depth + 1, budget)


def default_opset(model: ModelProto) -> int:
    """The model's default-domain opset, after refusing every other domain.

    Raises:
        InvalidSubmission: IR version, opset or domain out of the accepted ranges.
    """
    if not MIN_IR_VERSION <= model.ir_version <= onnx.IR_VERSION:
        raise InvalidSubmission(
            f"ONNX IR version {model.ir_version} is not accepted; accepted: "
            f"{MIN_IR_VERSION} to {onnx.IR_VERSION} (export with a recent exporter)"
        )
    versions = []
    for entry in model.opset_import:
        if entry.domain not in DEFAULT_DOMAINS:
            raise InvalidSubmission(
                f"operator set domain {entry.domain!r} is not accepted (custom or non-standard "
                "operators); Arena runs only the default ONNX domain ('' / 'ai.onnx')"
            )
        versions.append(entry.version)
    if len(versions) != 1:
        raise InvalidSubmission("the model must import the default ONNX opset exactly once")
    if not MIN_OPSET <= versions[0] <= MAX_OPSET:
        raise InvalidSubmission(
            f"opset {versions[0]} is not accepted; export with opset_version between "
            f"{MIN_OPSET} and {MAX_OPSET}"
        )
    return versions[0]


def check_structure(model: ModelProto) -> int:
    """Opsets, domains, operators and tensors of the whole model; returns the opset.

    Raises:
        InvalidSubmission: The first problem found.
    """
    opset = default_opset(model)
    if len(model.functions):
        raise InvalidSubmission(
            "model-local functions are not accepted; export with them inlined "
            "(torch: export_modules_as_functions=False)"
        )
    if len(model.training_info):
        raise InvalidSubmission("training info is not accepted; export an inference-only model")
    _walk(model.graph, "the main graph", 0, [MAX_NODES])
    return opset


def _dims(info: ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension] | None:
    tensor_type = info.type.tensor_type
    return list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None


def _describe(dims: list[onnx.TensorShapeProto.Dimension] | None) -> str:
    if dims is None:
        return "no shape"
    return "[" + ", ".join(d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
                           for d in dims) + "]"


def _dim_ok(dim: onnx.TensorShapeProto.Dimension, want: int | None, symbolic_ok: bool) -> bool:
    if want is None:  # the batch dimension: symbolic or unknown, never a fixed size
        return not dim.HasField("dim_value")
    if dim.HasField("dim_value"):
        return dim.dim_value == want
    return symbolic_ok and bool(dim.dim_param)


def _check_value(info: ValueInfoProto, kind: str, want: tuple[int | None, ...], hint: str) -> None:
    """Require a float32 tensor of shape ``want`` (``None``: the dynamic batch dimension).

    An output's action dimension may be symbolic (the probe batch checks its real size);
    an input's observation dimensions must be fixed, they are what Arena feeds.
    """
    is_tensor = info.type.HasField("tensor_type")
    elem = info.type.tensor_type.elem_type
    if not is_tensor or elem != TensorProto.FLOAT:
        got = _type_name(elem) if is_tensor else "a non-tensor"
        raise InvalidSubmission(f"{kind} {info.name!r} must be a float32 tensor, got {got}")
    dims = _dims(info)
    if (
        dims is None
        or len(dims) != len(want)
        or not all(_dim_ok(d, w, kind == "output") for d, w in zip(dims, want, strict=True))
    ):
        expected = "[" + ", ".join("batch" if w is None else str(w) for w in want) + "]"
        raise InvalidSubmission(
            f"{kind} {info.name!r} has shape {_describe(dims)}, expected {expected} with a "
            f"dynamic batch dimension; {hint}"
        )


def check_signature(
    model: ModelProto, obs_shape: tuple[int, ...], num_actions: int
) -> tuple[str, str]:
    """Require one float32 input ``[batch, *obs_shape]`` and one float32 output ``[batch, A]``.

    Initializers also listed as graph inputs (old exporters) are not counted as inputs.
    No action-mask input is accepted: Arena masks illegal actions itself.

    Returns:
        ``(input_name, output_name)``.

    Raises:
        InvalidSubmission: Wrong number of inputs/outputs, dtype or shape.
    """
    hint = (
        "export with input_names=['obs'], output_names=['logits'] and "
        "dynamic_axes={'obs': {0: 'batch'}, 'logits': {0: 'batch'}}"
    )
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1 or len(model.graph.output) != 1:
        raise InvalidSubmission(
            f"the model has {len(inputs)} input(s) and {len(model.graph.output)} output(s); "
            "Arena feeds exactly one input (observations, no action mask: Arena masks illegal "
            f"actions itself) and reads exactly one output (logits); {hint}"
        )
    _check_value(inputs[0], "input", (None, *obs_shape), hint)
    _check_value(model.graph.output[0], "output", (None, num_actions), hint)
    return inputs[0].name, model.graph.output[0].name
