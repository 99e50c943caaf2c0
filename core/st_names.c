/* transformers' and mlx-lm's names and config keys as GGUF's (llama.cpp's converter
 * writes the same): which module becomes which tensor, which key which `{arch}.*` key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/st_target.h"

const char *const st_model_prefixes[] = {"language_model.model.", "model.language_model.",
                                         "model.", "", NULL};
const char *const st_head_names[] = {"language_model.lm_head", "lm_head", NULL};

const struct st_rule st_global_rules[] = {
    {"embed_tokens", "token_embd.weight", ST_LINEAR, ST_PERM_NONE},
    {"norm.weight", "output_norm.weight", ST_NORM_ZC, ST_PERM_NONE},
};
const size_t st_n_global_rules = sizeof st_global_rules / sizeof st_global_rules[0];

const struct st_rule st_layer_rules[] = {
    {"input_layernorm.weight", "attn_norm.weight", ST_NORM_ZC, ST_PERM_NONE},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", ST_NORM_ZC, ST_PERM_NONE},
    /* gated attention */
    {"self_attn.q_proj", "attn_q.weight", ST_LINEAR, ST_PERM_NONE},
    {"self_attn.k_proj", "attn_k.weight", ST_LINEAR, ST_PERM_NONE},
    {"self_attn.v_proj", "attn_v.weight", ST_LINEAR, ST_PERM_NONE},
    {"self_attn.o_proj", "attn_output.weight", ST_LINEAR, ST_PERM_NONE},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", ST_NORM_ZC, ST_PERM_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", ST_NORM_ZC, ST_PERM_NONE},
    /* Gated DeltaNet */
    {"linear_attn.in_proj_qkv", "attn_qkv.weight", ST_LINEAR, ST_PERM_ROWS_V},
    {"linear_attn.in_proj_z", "attn_gate.weight", ST_LINEAR, ST_PERM_ROWS},
    {"linear_attn.in_proj_a", "ssm_alpha.weight", ST_LINEAR, ST_PERM_ROWS},
    {"linear_attn.in_proj_b", "ssm_beta.weight", ST_LINEAR, ST_PERM_ROWS},
    {"linear_attn.out_proj", "ssm_out.weight", ST_LINEAR, ST_PERM_COLS},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight", ST_CONV, ST_PERM_ROWS_V},
    {"linear_attn.dt_bias", "ssm_dt.bias", ST_F32, ST_PERM_ROWS},
    {"linear_attn.A_log", "ssm_a", ST_A_LOG, ST_PERM_ROWS},
    {"linear_attn.norm.weight", "ssm_norm.weight", ST_NORM, ST_PERM_NONE},
    /* dense FFN */
    {"mlp.gate_proj", "ffn_gate.weight", ST_LINEAR, ST_PERM_NONE},
    {"mlp.up_proj", "ffn_up.weight", ST_LINEAR, ST_PERM_NONE},
    {"mlp.down_proj", "ffn_down.weight", ST_LINEAR, ST_PERM_NONE},
    /* mixture of experts: the router, the experts, the shared expert and its gate */
    {"mlp.gate", "ffn_gate_inp.weight", ST_LINEAR, ST_PERM_NONE},
    {"gate_proj", "ffn_gate_exps.weight", ST_EXPERTS, ST_PERM_NONE},
    {"up_proj", "ffn_up_exps.weight", ST_EXPERTS, ST_PERM_NONE},
    {"down_proj", "ffn_down_exps.weight", ST_EXPERTS, ST_PERM_NONE},
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp.weight", ST_LINEAR, ST_PERM_NONE},
    {"mlp.shared_expert.up_proj", "ffn_up_shexp.weight", ST_LINEAR, ST_PERM_NONE},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp.weight", ST_LINEAR, ST_PERM_NONE},
    {"mlp.shared_expert_gate", "ffn_gate_inp_shexp.weight", ST_LINEAR, ST_PERM_NONE},
};
const size_t st_n_layer_rules = sizeof st_layer_rules / sizeof st_layer_rules[0];

/* ---- config keys ------------------------------------------------------------ */

enum key_type { K_U32, K_F32 };

static const struct {
    const char *cfg, *gguf;
    int type;
} config_keys[] = {
    {"hidden_size", "embedding_length", K_U32},
    {"num_hidden_layers", "block_count", K_U32},
    {"intermediate_size", "feed_forward_length", K_U32},
    {"max_position_embeddings", "context_length", K_U32},
    {"num_attention_heads", "attention.head_count", K_U32},
    {"num_key_value_heads", "attention.head_count_kv", K_U32},
    {"head_dim", "attention.key_length", K_U32},
    {"head_dim", "attention.value_length", K_U32},
    {"rms_norm_eps", "attention.layer_norm_rms_epsilon", K_F32},
    {"full_attention_interval", "full_attention_interval", K_U32},
    {"linear_conv_kernel_dim", "ssm.conv_kernel", K_U32},
    {"linear_key_head_dim", "ssm.state_size", K_U32},
    {"linear_num_key_heads", "ssm.group_count", K_U32},
    {"linear_num_value_heads", "ssm.time_step_rank", K_U32},
    {"num_experts", "expert_count", K_U32},
    {"num_experts_per_tok", "expert_used_count", K_U32},
    {"moe_intermediate_size", "expert_feed_forward_length", K_U32},
    {"shared_expert_intermediate_size", "expert_shared_feed_forward_length", K_U32},
};

static enum splash_status bad_key(const char *key, const char *want, struct splash_err *err)
{
    return splash_err_set(err, SPLASH_ERR_INVALID, "config.json: %s must be %s", key, want);
}

static enum splash_status put_u32(struct splash_gguf_writer *w, const char *arch,
                                  const char *suffix, json_int_t v, const char *cfg,
                                  struct splash_err *err)
{
    if (v < 0 || v > (json_int_t)UINT32_MAX)
        return bad_key(cfg, "a count", err);
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return splash_gguf_writer_set_u32(w, key, (uint32_t)v, err);
}

/* The rotary keys: rope_parameters (transformers 5) or the flat ones. */
static enum splash_status rope_keys(const json_t *text, const char *arch,
                                    struct splash_gguf_writer *w, struct splash_err *err)
{
    const json_t *rp = json_object_get(text, "rope_parameters");
    const json_t *theta = rp ? json_object_get(rp, "rope_theta") : NULL;
    const json_t *factor = rp ? json_object_get(rp, "partial_rotary_factor") : NULL;
    if (!theta)
        theta = json_object_get(text, "rope_theta");
    if (!factor)
        factor = json_object_get(text, "partial_rotary_factor");
    char key[128];
    enum splash_status st;
    if (theta) {
        if (!json_is_number(theta))
            return bad_key("rope_theta", "a number", err);
        snprintf(key, sizeof key, "%s.rope.freq_base", arch);
        if ((st = splash_gguf_writer_set_f32(w, key, (float)json_number_value(theta), err)))
            return st;
    }
    const json_t *hd = json_object_get(text, "head_dim");
    if (json_is_integer(hd)) {
        double f = 1.0;
        if (factor && !json_is_number(factor))
            return bad_key("partial_rotary_factor", "a number", err);
        if (factor)
            f = json_number_value(factor);
        if ((st = put_u32(w, arch, "rope.dimension_count",
                          (json_int_t)lround((double)json_integer_value(hd) * f), "head_dim",
                          err)))
            return st;
    }
    const json_t *sec = rp ? json_object_get(rp, "mrope_section") : NULL;
    if (!sec)
        sec = json_object_get(text, "mrope_section");
    if (sec) {
        int32_t v[4] = {0, 0, 0, 0};
        if (!json_is_array(sec) || json_array_size(sec) > 4)
            return bad_key("mrope_section", "an array of at most 4 integers", err);
        for (size_t i = 0; i < json_array_size(sec); i++) {
            const json_t *e = json_array_get(sec, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 4096)
                return bad_key("mrope_section", "an array of at most 4 integers", err);
            v[i] = (int32_t)json_integer_value(e);
        }
        snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
        if ((st = splash_gguf_writer_set_array(w, key, GGUF_I32, v, 4, err)))
            return st;
    }
    return SPLASH_OK;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && n < (1L << 24) && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                buf[n] = 0;
            }
        }
    }
    fclose(f);
    return buf;
}

enum splash_status splash_st_chat_template(const char *dir, char **out, struct splash_err *err)
{
    char path[4096];
    *out = NULL;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if ((*out = read_text(path)))
        return SPLASH_OK;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return SPLASH_OK;
    json_error_t jerr;
    json_t *tc = json_load_file(path, 0, &jerr);
    if (!tc)
        return splash_err_set(err, SPLASH_ERR_INVALID, "tokenizer_config.json: line %d: %s",
                              jerr.line, jerr.text);
    const json_t *t = json_object_get(tc, "chat_template");
    if (json_is_array(t)) {
        size_t i;
        const json_t *e, *found = NULL;
        json_array_foreach(t, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default"))
                found = json_object_get(e, "template");
        }
        t = found;
    }
    enum splash_status st = SPLASH_OK;
    if (json_is_string(t) && !(*out = strdup(json_string_value(t))))
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    json_decref(tc);
    return st;
}

static enum splash_status template_key(const char *dir, struct splash_gguf_writer *w,
                                       struct splash_err *err)
{
    char *text;
    enum splash_status st = splash_st_chat_template(dir, &text, err);
    if (!st && text)
        st = splash_gguf_writer_set_str(w, "tokenizer.chat_template", text, err);
    free(text);
    return st;
}

enum splash_status st_config_keys(const json_t *text, const char *arch, const char *dir,
                                  struct splash_gguf_writer *w, struct splash_err *err)
{
    enum splash_status st;
    if ((st = splash_gguf_writer_set_str(w, "general.architecture", arch, err)))
        return st;
    for (size_t i = 0; i < sizeof config_keys / sizeof config_keys[0]; i++) {
        const json_t *v = json_object_get(text, config_keys[i].cfg);
        if (!v)
            continue;
        if (config_keys[i].type == K_F32) {
            if (!json_is_number(v))
                return bad_key(config_keys[i].cfg, "a number", err);
            char key[128];
            snprintf(key, sizeof key, "%s.%s", arch, config_keys[i].gguf);
            st = splash_gguf_writer_set_f32(w, key, (float)json_number_value(v), err);
        } else {
            if (!json_is_integer(v))
                return bad_key(config_keys[i].cfg, "an integer", err);
            st = put_u32(w, arch, config_keys[i].gguf, json_integer_value(v), config_keys[i].cfg,
                         err);
        }
        if (st)
            return st;
    }
    const json_t *hv = json_object_get(text, "linear_num_value_heads");
    const json_t *dv = json_object_get(text, "linear_value_head_dim");
    if (json_is_integer(hv) && json_is_integer(dv) &&
        (st = put_u32(w, arch, "ssm.inner_size", json_integer_value(hv) * json_integer_value(dv),
                      "linear_value_head_dim", err)))
        return st;
    const json_t *norm = json_object_get(text, "norm_topk_prob");
    if (norm) {
        char key[128];
        if (!json_is_boolean(norm))
            return bad_key("norm_topk_prob", "a boolean", err);
        snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
        if ((st = splash_gguf_writer_set_bool(w, key, json_is_true(norm), err)))
            return st;
    }
    if ((st = rope_keys(text, arch, w, err)))
        return st;
    return template_key(dir, w, err);
}
