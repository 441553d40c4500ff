// The FlashAttention-2 forward kernel that fusion-spirv-attention specialises for each
// fused attention on Vulkan, compiled to SPIR-V with glslangValidator. A template: each
// dollar-brace placeholder is replaced by kernels/spirv.py from the attention's Spec.
//
// One invocation per query row, BLOCK_M rows per workgroup; each block of BLOCK_N keys
// and values is staged in shared memory by the whole workgroup, then every row updates
// its running max, running sum and accumulator (online softmax, exp2 with the scale
// folded in, one division at the end). Causal: key blocks past the workgroup's last
// row are never loaded. Operands are read, and the output written, through the same
// strided views as the CUDA kernel: element (batch, row, col) of a view lives at
//   (batch / H) * SB + (batch % H) * SH + row * SR + col * SC
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
${EXTENSIONS}

layout(local_size_x = ${BLOCK_M}, local_size_y = 1, local_size_z = 1) in;

layout(set = 0, binding = 0) readonly buffer BindingQ { ${Q_TYPE} q_buffer[]; };
layout(set = 0, binding = 1) readonly buffer BindingK { ${Q_TYPE} k_buffer[]; };
layout(set = 0, binding = 2) readonly buffer BindingV { ${Q_TYPE} v_buffer[]; };
layout(set = 0, binding = 3) readonly buffer BindingM { ${MASK_TYPE} mask_buffer[]; };
${SIZES_BINDING}
layout(set = 0, binding = ${OUT_BINDING}) buffer BindingO { ${OUT_TYPE} out_buffer[]; };

uint n_q;  // the sequence lengths: constants, or read from the sizes binding
uint n_k;
const uint D = ${D};
const uint DV = ${DV};
const uint BLOCK_M = ${BLOCK_M};
const uint BLOCK_N = ${BLOCK_N};
const uint KV_GROUP = ${KV_GROUP};
const bool CAUSAL = ${CAUSAL};
const int CAUSAL_OFFSET = ${CAUSAL_OFFSET};  // keys > row + offset are masked
const bool HAS_MASK = ${HAS_MASK};  // an additive mask (batch, n_q, n_k), read per key
const float QK_SCALE = ${QK_SCALE};  // scale * log2(e)
const float LOG2E = 1.4426950408889634;
const float LOWEST = -3.4028234663852886e38;

shared float k_tile[BLOCK_N][D];
shared float v_tile[BLOCK_N][DV];

// element types to and from float (bf16: the upper half of a float's bits, kept in a
// uint16_t; stored rounded to nearest even)
float to_float(float v) { return v; }
float to_float(float16_t v) { return float(v); }
${CONVERSIONS}

// the functions of score regions, named as the CUDA kernel's Triton expressions name them
float tl_abs(float v) { return abs(v); }
float tl_exp(float v) { return exp(v); }
float tl_exp2(float v) { return exp2(v); }
float tl_log(float v) { return log(v); }
float tl_log2(float v) { return log2(v); }
float tl_sqrt(float v) { return sqrt(v); }
float tl_sigmoid(float v) { return 1.0 / (1.0 + exp(-v)); }
float tl_maximum(float a, float b) { return max(a, b); }
float tl_minimum(float a, float b) { return min(a, b); }
float tl_where(bool c, float a, float b) { return c ? a : b; }

uint q_offset(uint batch, uint row, uint col) { return ${Q_VIEW}; }
uint k_offset(uint batch, uint row, uint col) { return ${K_VIEW}; }
uint v_offset(uint batch, uint row, uint col) { return ${V_VIEW}; }
uint m_offset(uint batch, uint row, uint col) { return ${M_VIEW}; }
uint o_offset(uint batch, uint row, uint col) { return ${O_VIEW}; }

void main() {
  n_q = ${N_Q};
  n_k = ${N_K};
  uint batch = gl_WorkGroupID.y;
  uint kv_batch = batch / KV_GROUP;
  uint first_row = gl_WorkGroupID.x * BLOCK_M;
  uint row = first_row + gl_LocalInvocationID.x;
  bool live = row < n_q;

  float q[D];
  float acc[DV];
  for (uint d = 0; d < D; ++d) {
    q[d] = live ? to_float(q_buffer[q_offset(batch, row, d)]) : 0.0;
  }
  for (uint d = 0; d < DV; ++d) {
    acc[d] = 0.0;
  }
  float m_i = LOWEST;
  float l_i = 0.0;

  uint hi = n_k;
  if (CAUSAL) {  // the same for the whole workgroup: the barriers below stay uniform
    int last = int(min(first_row + BLOCK_M, n_q)) + CAUSAL_OFFSET;
    hi = uint(clamp(last, 0, int(n_k)));
  }
  for (uint start = 0; start < hi; start += BLOCK_N) {
    barrier();
    for (uint i = gl_LocalInvocationID.x; i < BLOCK_N * D; i += BLOCK_M) {
      uint key = start + i / D;
      k_tile[i / D][i % D] = key < n_k ? to_float(k_buffer[k_offset(kv_batch, key, i % D)]) : 0.0;
    }
    for (uint i = gl_LocalInvocationID.x; i < BLOCK_N * DV; i += BLOCK_M) {
      uint key = start + i / DV;
      v_tile[i / DV][i % DV] = key < n_k ? to_float(v_buffer[v_offset(kv_batch, key, i % DV)]) : 0.0;
    }
    barrier();

    float s[BLOCK_N];
    float m_new = m_i;
    for (uint j = 0; j < BLOCK_N; ++j) {
      uint key = start + j;
      float x = 0.0;
      for (uint d = 0; d < D; ++d) {
        x += q[d] * k_tile[j][d];
      }
      x *= QK_SCALE;
      x = ${SCORE};
      bool visible = live && key < n_k;
      if (CAUSAL) {
        visible = visible && int(key) <= int(row) + CAUSAL_OFFSET;
      }
      if (HAS_MASK && visible) {
        x += to_float(mask_buffer[m_offset(batch, row, key)]) * LOG2E;
      }
      s[j] = visible ? x : uintBitsToFloat(0xff800000u);  // -inf
      m_new = max(m_new, s[j]);
    }
    float alpha = exp2(m_i - m_new);
    l_i *= alpha;
    for (uint d = 0; d < DV; ++d) {
      acc[d] *= alpha;
    }
    for (uint j = 0; j < BLOCK_N; ++j) {
      float p = exp2(s[j] - m_new);
      l_i += p;
      for (uint d = 0; d < DV; ++d) {
        acc[d] += p * v_tile[j][d];
      }
    }
    m_i = m_new;
  }
  if (live) {
    for (uint d = 0; d < DV; ++d) {
      out_buffer[o_offset(batch, row, d)] = to_out(acc[d] / l_i);
    }
  }
}
