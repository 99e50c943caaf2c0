/* The kernel tables the host hands plugins (include/splash/kernels.h), generic and
 * state-space: the compute layer's ops, one member each. */
#include "core/host_impl.h"
#include "kernels/kernels_impl.h"
#include "kernels/ops.h"

static const struct splash_kernels kernels = {
    .size = sizeof(struct splash_kernels),
    .weight_create = kernel_weight_create,
    .weight_destroy = kernel_weight_destroy,
    .matmul = kernel_matmul,
    .matmul_experts = kernel_matmul_experts,
    .embed_rows = kernel_embed_rows,
    .to_float = kernel_to_float,
    .rmsnorm = kernel_rmsnorm,
    .l2norm = kernel_l2norm,
    .rope = kernel_rope,
    .kv_page_bytes = kernel_kv_page_bytes,
    .kv_store = kernel_kv_store,
    .attention = kernel_attention,
    .gdn_conv = kernel_gdn_conv,
    .gdn_recurrent = kernel_gdn_recurrent,
    .gdn_chunked = kernel_gdn_chunked,
    .matmul_many = kernel_matmul_many,
    .gdn_conv_lanes = kernel_gdn_conv_lanes,
    .gdn_recurrent_lanes = kernel_gdn_recurrent_lanes,
    .attention_lanes = kernel_attention_lanes,
    .weight_set_scale = kernel_weight_set_scale,
    .attend = kernel_attend,
    .attend_lanes = kernel_attend_lanes,
    .add_bias = kernel_add_bias,
    .rope_table = kernel_rope_table,
    .expert_weight_create = kernel_expert_weight_create,
    .expert_pack = kernel_expert_pack,
    .matmul_experts_at = kernel_matmul_experts_at,
};

static const struct splash_ssm_kernels ssm = {
    .size = sizeof(struct splash_ssm_kernels),
    .conv = kernel_gdn_conv,
    .recurrent = kernel_gdn_recurrent,
    .chunked = kernel_gdn_chunked,
    .conv_lanes = kernel_gdn_conv_lanes,
    .recurrent_lanes = kernel_gdn_recurrent_lanes,
};

const struct splash_kernels *splash_kernels_get(void)
{
    return &kernels;
}

const struct splash_ssm_kernels *splash_ssm_kernels_get(void)
{
    return &ssm;
}
