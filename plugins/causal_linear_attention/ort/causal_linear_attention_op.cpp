// CausalLinearAttention in rnnx's ONNX Runtime op library (op_registry.h).
#include "causal_linear_attention_op.h"
#include "op_registry.h"

RNNX_ORT_REGISTER_OP(rnnx_ort::CausalLinearAttentionOp);
