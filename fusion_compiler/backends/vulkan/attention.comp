// The FlashAttention-2 forward kernel that fusion-spirv-attention specialises for each
// fused attention on Vulkan, compiled to SPIR-V with glslangValidator. A template: each
// dollar-brace placeholder is replaced by glsl.source_of from the attention's VulkanSpec.
//
// One invocation per query row, BLOCK_M rows per workgroup; each block of BLOCK_N keys
// and values is staged in shared memory by the whole workgroup, then every row updates
// its running max, running sum and accumulator (online softmax, exp2 with the scale
// folded in, one division at the end). Head dims are held as vec4s (padded with zeros):
// one shared-memory read feeds four multiply-adds. Key blocks past the workgroup's last
// row's causal bound are never loaded, nor those before its first row's sliding window.
// Operands are read, and the output written, through the same strided views as the
// CUDA kernel: element (batch, row, col) of a view lives at
//   (batch / H) * SB + (batch % H) * SH + row * SR + col * SC
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
${EXTENSIONS}

layout(local_size_x = ${BLOCK_M}, local_size_y = 1, local_size_z = 1) in;

// Q, K, V, the mask's tensors (a read mask, or those a computed one starts from), the
// sizes (dynamic lengths only) and the output; on a device without storage of 8 or 16
// bits, a buffer of such elements is bound as 32-bit words (read through name_bits)
${BINDINGS}

uint n_q;  // the sequence lengths: constants, or read from the sizes binding
uint n_k;
const uint D = ${D};
const uint DV = ${DV};
const uint D4 = (D + 3u) / 4u;
const uint DV4 = (DV + 3u) / 4u;
const uint BLOCK_M = ${BLOCK_M};
const uint BLOCK_N = ${BLOCK_N};
const uint KV_GROUP = ${KV_GROUP};
const bool CAUSAL = ${CAUSAL};
const int CAUSAL_OFFSET = ${CAUSAL_OFFSET};  // keys > row + offset are masked
const bool WINDOW = ${WINDOW};
const int WINDOW_START = ${WINDOW_START};  // keys < row + start are masked (a sliding window)
const bool HAS_MASK = ${HAS_MASK};  // an additive mask (batch, n_q, n_k): mask_value, per key
const bool MASK_REPLACES = ${MASK_REPLACES};  // -inf in the mask replaces the score
// mask values at or below SWAMP (finfo.min of the mask's type) swamp the score they are
// added to, as in PyTorch's half types (fp16: s + -65504 rounds to -65504): the logit is
// the fill alone, and a row of nothing but fills gets equal weights
const bool SWAMPS = ${SWAMPS};
const float SWAMP = ${SWAMP};
const float QK_SCALE = ${QK_SCALE};  // scale * log2(e)
const float LOG2E = 1.4426950408889634;
const float LOWEST = -3.4028234663852886e38;

shared vec4 k_tile[BLOCK_N][D4];
shared vec4 v_tile[BLOCK_N][DV4];
shared uint block_needed;  // the workgroup's vote on a key block of a mask

// element types to and from float (bf16: the upper half of a float's bits, kept in a
// uint16_t; stored rounded to nearest even)
float to_float(float v) { return v; }
float to_float(float16_t v) { return float(v); }
${CONVERSIONS}

// element i of Q, K, V and a read mask as a float; the output's element i written
${ACCESSORS}

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

// the mask's value at (batch, row, key): read from the materialised mask, or computed
// from the tensors it starts from (the model's own code, printed by vulkan/mask.py)
${ROUND_F16}
float round_bf16(float v) {
  uint bits = floatBitsToUint(v);
  return isnan(v) ? v : uintBitsToFloat((bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u);
}
float mask_value(uint batch, uint row, uint key) { return ${MASK_VALUE}; }

// whether a row may see a key by index alone: the keys' end, the causal and window bounds
bool in_bounds(uint row, uint key) {
  bool visible = key < n_k;
  if (CAUSAL) visible = visible && int(key) <= int(row) + CAUSAL_OFFSET;
  if (WINDOW) visible = visible && int(key) >= int(row) + WINDOW_START;
  return visible;
}

// four elements of a row from col = 4c on, zeros past the head dim (components named,
// not indexed: llvmpipe builds indexed ones two orders of magnitude slower)
vec4 load_q(uint batch, uint row, uint c) {
  uint d = c * 4u;
  vec4 x = vec4(0.0);
  if (d < D) x.x = q_at(q_offset(batch, row, d));
  if (d + 1u < D) x.y = q_at(q_offset(batch, row, d + 1u));
  if (d + 2u < D) x.z = q_at(q_offset(batch, row, d + 2u));
  if (d + 3u < D) x.w = q_at(q_offset(batch, row, d + 3u));
  return x;
}
vec4 load_k(uint batch, uint row, uint c) {
  uint d = c * 4u;
  vec4 x = vec4(0.0);
  if (d < D) x.x = k_at(k_offset(batch, row, d));
  if (d + 1u < D) x.y = k_at(k_offset(batch, row, d + 1u));
  if (d + 2u < D) x.z = k_at(k_offset(batch, row, d + 2u));
  if (d + 3u < D) x.w = k_at(k_offset(batch, row, d + 3u));
  return x;
}
vec4 load_v(uint batch, uint row, uint c) {
  uint d = c * 4u;
  vec4 x = vec4(0.0);
  if (d < DV) x.x = v_at(v_offset(batch, row, d));
  if (d + 1u < DV) x.y = v_at(v_offset(batch, row, d + 1u));
  if (d + 2u < DV) x.z = v_at(v_offset(batch, row, d + 2u));
  if (d + 3u < DV) x.w = v_at(v_offset(batch, row, d + 3u));
  return x;
}

void main() {
  n_q = ${N_Q};
  n_k = ${N_K};
  uint batch = gl_WorkGroupID.y;
  uint kv_batch = batch / KV_GROUP;
  uint first_row = gl_WorkGroupID.x * BLOCK_M;
  uint row = first_row + gl_LocalInvocationID.x;
  bool live = row < n_q;

  vec4 q[D4];
  vec4 acc[DV4];
  for (uint c = 0; c < D4; ++c) {
    q[c] = live ? load_q(batch, row, c) : vec4(0.0);
  }
  for (uint c = 0; c < DV4; ++c) {
    acc[c] = vec4(0.0);
  }
  float m_i = LOWEST;
  float l_i = 0.0;

  // the key blocks the workgroup's rows may see: the same for every invocation, so the
  // barriers below stay uniform
  uint lo = 0;
  uint hi = n_k;
  if (CAUSAL) {
    int last = int(min(first_row + BLOCK_M, n_q)) + CAUSAL_OFFSET;
    hi = uint(clamp(last, 0, int(n_k)));
  }
  if (WINDOW) {
    int first = int(first_row) + WINDOW_START;
    lo = uint(clamp(first, 0, int(n_k))) / BLOCK_N * BLOCK_N;
  }
  bool kept_before = false;  // whether the row kept a key of an earlier block
  for (uint start = lo; start < hi; start += BLOCK_N) {
    if (HAS_MASK) {
      // A key block none of the workgroup's rows needs is skipped, where that is exact:
      // a key masked with -inf adds nothing to its row, and one at or below the swamping
      // fill adds nothing to a row that keeps a key elsewhere (exp2 of the fill minus a
      // kept score underflows to 0); the row keeps a key before or in this block.
      bool keeps = false;
      bool fills = false;
      for (uint j = 0; live && j < BLOCK_N; ++j) {
        uint key = start + j;
        if (in_bounds(row, key)) {
          float bias = mask_value(batch, row, key);
          bool dropped = isinf(bias) && bias < 0.0;
          bool swamped = SWAMPS && bias <= SWAMP && !dropped;
          keeps = keeps || !(dropped || swamped);  // NaN is kept: it reaches the row
          fills = fills || swamped;
        }
      }
      bool needed = keeps || (fills && !kept_before);
      kept_before = kept_before || keeps;
      barrier();  // every vote on the previous block read
      if (gl_LocalInvocationID.x == 0u) block_needed = 0u;
      barrier();
      if (needed) atomicOr(block_needed, 1u);
      barrier();
      if (block_needed == 0u) continue;  // the same for every invocation
    }
    barrier();
    for (uint i = gl_LocalInvocationID.x; i < BLOCK_N * D4; i += BLOCK_M) {
      uint key = start + i / D4;
      k_tile[i / D4][i % D4] = key < n_k ? load_k(kv_batch, key, i % D4) : vec4(0.0);
    }
    for (uint i = gl_LocalInvocationID.x; i < BLOCK_N * DV4; i += BLOCK_M) {
      uint key = start + i / DV4;
      v_tile[i / DV4][i % DV4] = key < n_k ? load_v(kv_batch, key, i % DV4) : vec4(0.0);
    }
    barrier();

    float s[BLOCK_N];
    float m_new = m_i;
    [[dont_unroll]] for (uint j = 0; j < BLOCK_N; ++j) {
      uint key = start + j;
      float x = 0.0;
      for (uint c = 0; c < D4; ++c) {
        x += dot(q[c], k_tile[j][c]);
      }
      x *= QK_SCALE;
      x = ${SCORE};
      bool visible = live && in_bounds(row, key);
      if (HAS_MASK && visible) {
        // a finite fill (finfo(f32).min) overflows to -inf once scaled: kept finite at
        // -FLT_MAX/2, so a row of nothing but fills gets PyTorch's equal weights
        float bias = mask_value(batch, row, key);
        float shift = isinf(bias) ? bias * LOG2E : max(bias * LOG2E, -1.7014117e38);
        bool dropped = MASK_REPLACES && isinf(bias) && bias < 0.0;  // -inf whatever x is
        x = dropped || (SWAMPS && bias <= SWAMP) ? shift : x + shift;
      }
      s[j] = visible ? x : uintBitsToFloat(0xff800000u);  // -inf
      m_new = max(m_new, s[j]);
    }
    float alpha = exp2(m_i - m_new);
    l_i *= alpha;
    for (uint c = 0; c < DV4; ++c) {
      acc[c] *= alpha;
    }
    [[dont_unroll]] for (uint j = 0; j < BLOCK_N; ++j) {
      float p = exp2(s[j] - m_new);
      l_i += p;
      for (uint c = 0; c < DV4; ++c) {
        acc[c] += p * v_tile[j][c];
      }
    }
    m_i = m_new;
  }
  if (live) {
    for (uint c = 0; c < DV4; ++c) {
      vec4 o = l_i > 0.0 ? acc[c] / l_i : vec4(0.0);  // 0 on a row with no key, as SDPA
      uint d = c * 4u;
      store_out(o_offset(batch, row, d), o.x);
      if (d + 1u < DV) store_out(o_offset(batch, row, d + 1u), o.y);
      if (d + 2u < DV) store_out(o_offset(batch, row, d + 2u), o.z);
      if (d + 3u < DV) store_out(o_offset(batch, row, d + 3u), o.w);
    }
  }
}
