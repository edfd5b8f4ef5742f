'use strict';
/* The ONNX model `make bench-peers` gives ONNX Runtime: one com.microsoft
 * MultiHeadAttention node, q, k, v [B, S, H*D] f32 in (ORT's own layout),
 * output [B, S, H*D], scale 1/sqrt(D) (the op's default), `unidirectional`
 * 1 for causal. The bytes are written by the small protobuf encoder below
 * (no onnx package needed); field numbers are those of onnx/onnx.proto:
 *   ModelProto   ir_version 1, producer_name 2, graph 7, opset_import 8
 *   OperatorSetIdProto  domain 1, version 2
 *   GraphProto   node 1, name 2, input 11, output 12
 *   NodeProto    input 1, output 2, name 3, op_type 4, attribute 5, domain 7
 *   AttributeProto  name 1, i 3, type 20 (INT = 2)
 *   ValueInfoProto  name 1, type 2; TypeProto tensor_type 1;
 *   TypeProto.Tensor elem_type 1 (FLOAT = 1), shape 2;
 *   TensorShapeProto dim 1; Dimension dim_value 1, dim_param 2
 * ORT parses and checks the model when the session is made, and
 * bench_peers.py compares its output with attn's, so a wrong byte here is
 * an error or a failed check, never a timing of something else. */

function varint(n) {
  // non-negative integers below 2^53 (all this file writes)
  const out = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}

const key = (field, wire) => varint((field << 3) | wire);
const int = (field, n) => Buffer.concat([key(field, 0), varint(n)]);
const bytes = (field, b) => Buffer.concat([key(field, 2), varint(b.length), b]);
const str = (field, s) => bytes(field, Buffer.from(s, 'utf8'));
const msg = (field, ...parts) => bytes(field, Buffer.concat(parts));

function tensorValue(field, name, dims) {
  // dims: numbers (dim_value) or strings (dim_param)
  const shape = dims.map((d) => msg(1, typeof d === 'string' ? str(2, d) : int(1, d)));
  const tensorType = msg(1, int(1, 1 /* FLOAT */), msg(2, ...shape));
  return msg(field, str(1, name), msg(2, tensorType));
}

/* hidden = H * D; causal: 0 or 1. Returns the model's bytes. */
function mhaModel(heads, hidden, causal) {
  const node = msg(1,
    str(1, 'query'), str(1, 'key'), str(1, 'value'),
    str(2, 'output'),
    str(3, 'mha'),
    str(4, 'MultiHeadAttention'),
    msg(5, str(1, 'num_heads'), int(3, heads), int(20, 2 /* INT */)),
    msg(5, str(1, 'unidirectional'), int(3, causal ? 1 : 0), int(20, 2)),
    str(7, 'com.microsoft'));
  const dims = ['batch', 'seq', hidden];
  const graph = msg(7,
    node,
    str(2, 'attn_bench_peers_mha'),
    tensorValue(11, 'query', dims),
    tensorValue(11, 'key', dims),
    tensorValue(11, 'value', dims),
    tensorValue(12, 'output', dims));
  return Buffer.concat([
    int(1, 8),                     // ir_version 8 (ONNX 1.10+)
    str(2, 'attn bench-peers'),
    graph,
    msg(8, str(1, ''), int(2, 17)),           // ai.onnx opset 17
    msg(8, str(1, 'com.microsoft'), int(2, 1)),
  ]);
}

module.exports = { mhaModel };
