/* The built-in byte-level BPE vocabulary and ChatML template of generated models. */
#include "cli/modelgen/builtin_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"

/* ---- training pieces --------------------------------------------------------- */

/* Common English words and code pieces, most frequent first, spelled as the qwen2
 * pre-tokenizer cuts them (a word keeps the space before it). The merges are
 * trained on these with Zipf weights, so frequent words end up as single tokens. */
static const char *const vocab_pieces[] = {
    " the", " of", " and", " to", " a", " in", " is", " that", " for", " it", " as", " was",
    " with", " be", " by", " on", " not", " he", " I", " this", " are", " or", " his",
    " from", " at", " which", " but", " have", " an", " had", " they", " you", " were",
    " their", " one", " all", " we", " can", " her", " has", " there", " been", " if",
    " more", " when", " will", " would", " who", " so", " no", " she", " other", " its",
    " may", " these", " what", " them", " than", " some", " him", " time", " into", " only",
    " do", " could", " new", " about", " two", " first", " then", " also", " any", " like",
    " our", " out", " up", " my", " your", " made", " over", " such", " me", " most",
    " after", " years", " used", " should", " people", " between", " many", " where",
    " well", " through", " each", " because", " how", " very", " before", " while",
    " under", " those", " both", " world", " same", " work", " make", " know", " here",
    " just", " good", " way", " year", " long", " day", " see", " great", " little",
    " state", " number", " part", " place", " case", " point", " system", " program",
    " question", " during", " without", " again", " government", " small", " every",
    " found", " still", " think", " general", " against", " never", " under", " water",
    " house", " another", " around", " school", " important", " until", " different",
    " information", " following", " example", " called", " include", " however",
    " something", " answer", " model", " data", " function", " value", " return",
    " string", " number", " list", " file", " error", " result", " test", " user",
    " name", " type", " input", " output", " token", " text", " message", " server",
    " request", " response", " assistant", " tool", " call", " think", " reason",
    " because", " please", " thank", " thanks", " hello", " help", " question",
    " story", " once", " upon", " happy", " friend", " play", " went", " saw", " said",
    " asked", " looked", " wanted", " started", " called", " going", " being", " having",
    " using", " making", " running", " working", " thing", " nothing", " everything",
    " something", " morning", " evening", " interesting", " understand", " different",
    " important", " development", " between", " another", " without", " children",
    " mother", " father", " brother", " sister", " other", " together", " whether",
    " nation", " station", " action", " section", " position", " condition", " creation",
    " ment", " ness", " tion", " able", " ible", " less", " ful", " ing", " ed", " er",
    " est", " ly", " re", " un", " pre", " pro", " con", " com", " dis",
    "The", "This", "It", "In", "He", "She", "They", "We", "You", "What", "How", "If",
    "A", "I", "And", "But", "So", "Yes", "No", "Hello", "Thank", "Once", "def", "return",
    "import", "from", "class", "self", "int", "char", "void", "const", "struct", "true",
    "false", "null", "None", "print", "if", "else", "for", "while", "function",
    "'s", "'t", "'re", "'ve", "'ll", "'m", "'d",
    ".", ",", ":", ";", "!", "?", ")", "(", " (", " \"", "\"", ".\n", ",\n", ":\n", "\n",
    "\n\n", " =", " ==", " +", " -", " *", " /", " {", " }", "{", "}", "[", "]", " [",
    "();", "()", "):", " ->", " //", " #", "#", "##", "###", " **", "**", " `", "`",
    "```", " <", ">", " >", "</", "/>", "  ", "    ", "        ", "\t", "\t\t",
};

#define N_PIECES (sizeof vocab_pieces / sizeof vocab_pieces[0])
#define MAX_MERGES 600

/* Qwen's added tokens: chat markup is CONTROL, the reasoning and tool tags
 * USER_DEFINED (Qwen marks them "special": false). */
static const struct {
    const char *text;
    int32_t type;
} vocab_specials[] = {
    {"<|endoftext|>", 3}, {"<|im_start|>", 3},    {"<|im_end|>", 3},
    {"<think>", 4},       {"</think>", 4},        {"<tool_call>", 4},
    {"</tool_call>", 4},  {"<tool_response>", 4}, {"</tool_response>", 4},
};

#define N_SPECIALS (sizeof vocab_specials / sizeof vocab_specials[0])
#define SPECIAL_ENDOFTEXT 0
#define SPECIAL_IM_END 2

/* OpenAI's harmony markup (gpt-oss), all CONTROL, after Qwen's in a harmony vocabulary;
 * <|return|> is its end of sequence. */
static const char *const harmony_specials[] = {
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
    "<|call|>",
};

#define N_HARMONY (sizeof harmony_specials / sizeof harmony_specials[0])
#define HARMONY_RETURN 5

/* Flint's chat markup after Qwen's in a Flint vocabulary: the roles and stops CONTROL, the
 * argument tags USER_DEFINED (rendered in the output the call parser reads, as the think
 * and tool-call tags are); <|end_of_text|> is its end of sequence. */
static const struct {
    const char *text;
    int32_t type;
} flint_specials[] = {
    {"<|end_of_text|>", 3}, {"<|system|>", 3}, {"<|user|>", 3},    {"<|assistant|>", 3},
    {"<|observation|>", 3}, {"<|developer|>", 3}, {"<arg_key>", 4}, {"</arg_key>", 4},
    {"<arg_value>", 4},     {"</arg_value>", 4},
};

#define N_FLINT (sizeof flint_specials / sizeof flint_specials[0])
#define FLINT_END_OF_TEXT 0

int64_t splash_builtin_vocab_min_size(void)
{
    return 256 + (int64_t)N_SPECIALS;
}

/* ---- the GPT-2 byte alphabet ---------------------------------------------------- */

/* Byte b's code point: printable Latin-1 bytes stand for themselves, the others
 * map to 256 + their rank among the non-printable ones. Token id i of the first
 * 256 is the i-th byte in this order: printable ones first, then the rest. */
static void byte_alphabet(uint32_t cp[256], uint8_t order[256])
{
    int n = 0, extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        if (printable) {
            cp[b] = (uint32_t)b;
            order[n++] = (uint8_t)b;
        }
    }
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        if (!printable) {
            cp[b] = 256u + (uint32_t)extra++;
            order[n++] = (uint8_t)b;
        }
    }
}

static size_t utf8_put(uint32_t c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | (c >> 6));
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

/* ---- merge training -------------------------------------------------------------- */

struct vtrain {
    char **tokens;         /* byte-alphabet spellings, id = index */
    size_t n_tokens, cap_tokens;
    char **merges;         /* "left right" by rank */
    size_t n_merges;
    int32_t *syms;         /* every piece's symbols back to back */
    size_t *start, *len;   /* per piece */
    uint32_t *weight;
};

struct pair_count {
    uint64_t key;          /* left id << 32 | right id */
    uint64_t count;
};

static int pair_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct pair_count *)a)->key, y = ((const struct pair_count *)b)->key;
    return x < y ? -1 : x > y;
}

static int32_t token_find(const struct vtrain *t, const char *s)
{
    for (size_t i = 0; i < t->n_tokens; i++)
        if (!strcmp(t->tokens[i], s))
            return (int32_t)i;
    return -1;
}

static int token_push(struct vtrain *t, char *s)
{
    if (t->n_tokens == t->cap_tokens) {
        size_t cap = t->cap_tokens * 2;
        char **grown = realloc(t->tokens, cap * sizeof *grown);
        if (!grown)
            return -1;
        t->tokens = grown;
        t->cap_tokens = cap;
    }
    t->tokens[t->n_tokens++] = s;
    return 0;
}

static void vtrain_free(struct vtrain *t)
{
    for (size_t i = 0; i < t->n_tokens; i++)
        free(t->tokens[i]);
    for (size_t i = 0; i < t->n_merges; i++)
        free(t->merges[i]);
    free(t->tokens);
    free(t->merges);
    free(t->syms);
    free(t->start);
    free(t->len);
    free(t->weight);
}

/* Greedy BPE training: repeatedly merge the heaviest adjacent pair (ties to the
 * lowest ids, so the result never depends on anything but this file) until
 * max_new new tokens exist or no pair is left. */
static enum splash_status vtrain_run(struct vtrain *t, size_t max_new, struct splash_err *err)
{
    uint32_t cp[256];
    uint8_t order[256];
    int32_t id_of_byte[256];
    byte_alphabet(cp, order);
    t->cap_tokens = 1024;
    t->tokens = malloc(t->cap_tokens * sizeof *t->tokens);
    t->merges = malloc(MAX_MERGES * sizeof *t->merges);
    size_t total = 0;
    for (size_t p = 0; p < N_PIECES; p++)
        total += strlen(vocab_pieces[p]);
    t->syms = malloc(total * sizeof *t->syms);
    t->start = malloc(N_PIECES * sizeof *t->start);
    t->len = malloc(N_PIECES * sizeof *t->len);
    t->weight = malloc(N_PIECES * sizeof *t->weight);
    struct pair_count *pairs = malloc((total + 1) * sizeof *pairs);
    if (!t->tokens || !t->merges || !t->syms || !t->start || !t->len || !t->weight || !pairs)
        goto out_nomem;
    for (int i = 0; i < 256; i++) {
        char buf[3];
        size_t n = utf8_put(cp[order[i]], buf);
        char *s = malloc(n + 1);
        if (!s)
            goto out_nomem;
        memcpy(s, buf, n);
        s[n] = 0;
        t->tokens[t->n_tokens++] = s;
        id_of_byte[order[i]] = i;
    }
    size_t at = 0;
    for (size_t p = 0; p < N_PIECES; p++) {
        const unsigned char *s = (const unsigned char *)vocab_pieces[p];
        t->start[p] = at;
        t->len[p] = strlen(vocab_pieces[p]);
        t->weight[p] = (uint32_t)(100000 / (p + 8));
        for (size_t k = 0; k < t->len[p]; k++)
            t->syms[at++] = id_of_byte[s[k]];
    }

    size_t n_new = 0;
    while (n_new < max_new && t->n_merges < MAX_MERGES) {
        size_t n_pairs = 0;
        for (size_t p = 0; p < N_PIECES; p++)
            for (size_t k = 0; k + 1 < t->len[p]; k++) {
                const int32_t *w = t->syms + t->start[p];
                pairs[n_pairs].key = (uint64_t)(uint32_t)w[k] << 32 | (uint32_t)w[k + 1];
                pairs[n_pairs++].count = t->weight[p];
            }
        if (!n_pairs)
            break;
        qsort(pairs, n_pairs, sizeof *pairs, pair_cmp);
        uint64_t best_key = 0, best_count = 0;
        for (size_t i = 0; i < n_pairs;) {
            size_t j = i;
            uint64_t c = 0;
            for (; j < n_pairs && pairs[j].key == pairs[i].key; j++)
                c += pairs[j].count;
            if (c > best_count) {
                best_count = c;
                best_key = pairs[i].key;
            }
            i = j;
        }
        int32_t a = (int32_t)(best_key >> 32), b = (int32_t)(best_key & 0xffffffffu);
        size_t la = strlen(t->tokens[a]), lb = strlen(t->tokens[b]);
        char *joined = malloc(la + lb + 1), *merge = malloc(la + lb + 2);
        if (!joined || !merge) {
            free(joined);
            free(merge);
            goto out_nomem;
        }
        snprintf(joined, la + lb + 1, "%s%s", t->tokens[a], t->tokens[b]);
        snprintf(merge, la + lb + 2, "%s %s", t->tokens[a], t->tokens[b]);
        t->merges[t->n_merges++] = merge;
        int32_t c = token_find(t, joined);
        if (c >= 0) {
            free(joined); /* another merge already spells it */
        } else {
            c = (int32_t)t->n_tokens;
            if (token_push(t, joined)) {
                free(joined);
                goto out_nomem;
            }
            n_new++;
        }
        /* apply the merge to every piece */
        for (size_t p = 0; p < N_PIECES; p++) {
            int32_t *w = t->syms + t->start[p];
            size_t out = 0;
            for (size_t k = 0; k < t->len[p]; k++) {
                if (k + 1 < t->len[p] && w[k] == a && w[k + 1] == b) {
                    w[out++] = c;
                    k++;
                } else {
                    w[out++] = w[k];
                }
            }
            t->len[p] = out;
        }
    }
    free(pairs);
    return SPLASH_OK;
out_nomem:
    free(pairs);
    return splash_err_set(err, SPLASH_ERR_NOMEM, "built-in vocabulary: out of memory");
}

/* ---- writing ---------------------------------------------------------------------- */

enum splash_status splash_builtin_vocab_write(struct splash_gguf_writer *w, int64_t n_vocab,
                                              struct splash_err *err)
{
    struct splash_builtin_vocab_opts o = {0};
    return splash_builtin_vocab_write_opts(w, n_vocab, &o, err);
}

enum splash_status splash_builtin_vocab_write_opts(struct splash_gguf_writer *w, int64_t n_vocab,
                                                   const struct splash_builtin_vocab_opts *o,
                                                   struct splash_err *err)
{
    size_t n_harmony = o->harmony ? N_HARMONY : 0, n_flint = o->flint ? N_FLINT : 0;
    int64_t min_size = splash_builtin_vocab_min_size() + (int64_t)(n_harmony + n_flint);
    if (n_vocab < min_size || n_vocab > INT32_MAX)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "built-in vocabulary: %lld tokens (at least %lld)",
                              (long long)n_vocab, (long long)min_size);
    struct vtrain t;
    memset(&t, 0, sizeof t);
    enum splash_status st = vtrain_run(&t, (size_t)(n_vocab - min_size), err);
    if (st) {
        vtrain_free(&t);
        return st;
    }
    size_t n = (size_t)n_vocab;
    const char **tokens = malloc(n * sizeof *tokens);
    int32_t *types = malloc(n * sizeof *types);
    char *fillers = NULL;
    size_t n_fill = n - t.n_tokens - N_SPECIALS - n_harmony - n_flint;
    /* "[PAD<id>]" with id below 2^31: at most 14 bytes with the NUL */
    if (n_fill)
        fillers = malloc(n_fill * 16);
    if (!tokens || !types || (n_fill && !fillers)) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "built-in vocabulary: out of memory");
        goto out_free;
    }
    size_t id = 0;
    for (size_t i = 0; i < t.n_tokens; i++, id++) {
        tokens[id] = t.tokens[i];
        types[id] = 1; /* NORMAL */
    }
    int32_t special_id[N_SPECIALS];
    for (size_t i = 0; i < N_SPECIALS; i++, id++) {
        special_id[i] = (int32_t)id;
        tokens[id] = vocab_specials[i].text;
        types[id] = vocab_specials[i].type;
    }
    int32_t eos = special_id[SPECIAL_IM_END];
    for (size_t i = 0; i < n_harmony; i++, id++) {
        if (i == HARMONY_RETURN)
            eos = (int32_t)id;
        tokens[id] = harmony_specials[i];
        types[id] = 3; /* CONTROL */
    }
    for (size_t i = 0; i < n_flint; i++, id++) {
        if (i == FLINT_END_OF_TEXT)
            eos = (int32_t)id;
        tokens[id] = flint_specials[i].text;
        types[id] = flint_specials[i].type;
    }
    for (size_t i = 0; i < n_fill; i++, id++) {
        char *s = fillers + i * 16;
        snprintf(s, 16, "[PAD%zu]", id);
        tokens[id] = s;
        types[id] = 5; /* UNUSED */
    }
    if ((st = splash_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", err)) ||
        (st = splash_gguf_writer_set_str(w, "tokenizer.ggml.pre", o->flint ? "flint" : "qwen2",
                                         err)) ||
        (st = splash_gguf_writer_set_array(w, "tokenizer.ggml.tokens", GGUF_STRING, tokens, n,
                                           err)) ||
        (st = splash_gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_I32, types, n,
                                           err)) ||
        (st = splash_gguf_writer_set_array(w, "tokenizer.ggml.merges", GGUF_STRING,
                                           (const char *const *)t.merges, t.n_merges, err)) ||
        (st = splash_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id",
                                         (uint32_t)special_id[SPECIAL_ENDOFTEXT], err)) ||
        (st = splash_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos,
                                         err)) ||
        (st = splash_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id",
                                         (uint32_t)special_id[SPECIAL_ENDOFTEXT], err)) ||
        (st = splash_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 0, err)) ||
        (st = splash_gguf_writer_set_str(w, "tokenizer.chat_template",
                                         o->chat_template ? o->chat_template
                                         : o->flint       ? splash_builtin_flint_template
                                                          : splash_builtin_chat_template,
                                         err)))
        goto out_free;
out_free:
    free(fillers);
    free(types);
    free(tokens);
    vtrain_free(&t);
    return st;
}

/* ---- chat template ------------------------------------------------------------------ */

/* Both templates' text(content): a string, or the text parts of a list of parts. */
#define TEMPLATE_TEXT_MACRO                                                                     \
    "{%- macro text(content) -%}\n"                                                             \
    "{%- if content is string -%}{{ content }}\n"                                               \
    "{%- elif content is iterable and content is not mapping -%}\n"                             \
    "{%- for part in content -%}{%- if part.text is defined -%}{{ part.text }}{%- endif -%}"    \
    "{%- endfor -%}\n"                                                                          \
    "{%- endif -%}\n"                                                                           \
    "{%- endmacro -%}\n"

/* ChatML with Qwen3-Coder's XML tool calls. Content may be a string or a list of
 * text parts; tools are listed in the system turn; tool results are grouped into
 * one user turn; enable_thinking=true opens a <think> block after the prompt. */
const char splash_builtin_chat_template[] =
    "{#- Splash built-in ChatML template (generated models) -#}\n"
    TEMPLATE_TEXT_MACRO
    "{%- set first_system = messages and messages[0].role == 'system' -%}\n"
    "{%- if tools -%}\n"
    "{{- '<|im_start|>system\\n' -}}\n"
    "{%- if first_system -%}{{- text(messages[0].content) + '\\n\\n' -}}{%- endif -%}\n"
    "{{- '# Tools\\n\\nYou may call these functions:\\n<tools>' -}}\n"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}\n"
    "{{- '\\n</tools>\\n\\nTo call a function, reply with:\\n<tool_call>\\n<function=NAME>\\n"
    "<parameter=ARGUMENT>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call><|im_end|>\\n' -}}\n"
    "{%- elif first_system -%}\n"
    "{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- for message in messages -%}\n"
    "{%- if message.role == 'system' -%}\n"
    "{%- if not loop.first -%}"
    "{{- '<|im_start|>system\\n' + text(message.content) + '<|im_end|>\\n' -}}{%- endif -%}\n"
    "{%- elif message.role == 'user' -%}\n"
    "{{- '<|im_start|>user\\n' + text(message.content) + '<|im_end|>\\n' -}}\n"
    "{%- elif message.role == 'assistant' -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- if message.reasoning_content is string and message.reasoning_content -%}\n"
    "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}\n"
    "{%- endif -%}\n"
    "{{- text(message.content) -}}\n"
    "{%- if message.tool_calls -%}\n"
    "{%- for call in message.tool_calls -%}\n"
    "{%- set fn = call.function if call.function is defined else call -%}\n"
    "{{- '\\n<tool_call>\\n<function=' + fn.name + '>\\n' -}}\n"
    "{%- if fn.arguments is mapping -%}\n"
    "{%- for key, value in fn.arguments | items -%}\n"
    "{{- '<parameter=' + key + '>\\n' -}}\n"
    "{%- if value is string -%}{{- value -}}{%- else -%}{{- value | tojson -}}{%- endif -%}\n"
    "{{- '\\n</parameter>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '</function>\\n</tool_call>' -}}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- elif message.role == 'tool' -%}\n"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}"
    "{%- endif -%}\n"
    "{{- '\\n<tool_response>\\n' + text(message.content) + '\\n</tool_response>' -}}\n"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}\n"
    "{%- else -%}\n"
    "{{- raise_exception('Unexpected message role: ' + message.role) -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- if enable_thinking is defined and enable_thinking -%}{{- '<think>\\n' -}}{%- endif -%}\n"
    "{%- endif -%}\n";

/* Flint's chat, written for generated models: system (and developer, merged by request
 * preparation), user, assistant and tool turns; tools listed in a system turn before the
 * first message that is not one; an assistant turn's reasoning in a think block and its
 * calls as GLM-4.7's argument tags; the generation prompt <|assistant|> alone, since the
 * model opens its own think block. */
const char splash_builtin_flint_template[] =
    "{#- Splash built-in Flint template (generated models) -#}\n"
    TEMPLATE_TEXT_MACRO
    "{%- set ns = namespace(tools_done=false) -%}\n"
    "{%- for message in messages -%}\n"
    "{%- if tools and not ns.tools_done and message.role != 'system' -%}\n"
    "{{- '<|system|>\\n# Tools\\n\\nYou may call these functions:\\n<tools>' -}}\n"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}\n"
    "{{- '\\n</tools>\\n\\nTo call a function, reply with:\\n<tool_call>NAME<arg_key>KEY"
    "</arg_key><arg_value>VALUE</arg_value></tool_call>' -}}\n"
    "{%- set ns.tools_done = true -%}\n"
    "{%- endif -%}\n"
    "{%- if message.role == 'system' -%}\n"
    "{{- '<|system|>\\n' + text(message.content) -}}\n"
    "{%- elif message.role == 'user' -%}\n"
    "{{- '<|user|>\\n' + text(message.content) -}}\n"
    "{%- elif message.role == 'assistant' -%}\n"
    "{{- '<|assistant|>' -}}\n"
    "{%- if message.reasoning_content is string and message.reasoning_content -%}\n"
    "{{- '<think>' + message.reasoning_content + '</think>' -}}\n"
    "{%- endif -%}\n"
    "{{- text(message.content) -}}\n"
    "{%- if message.tool_calls -%}\n"
    "{%- for call in message.tool_calls -%}\n"
    "{%- set fn = call.function if call.function is defined else call -%}\n"
    "{{- '<tool_call>' + fn.name -}}\n"
    "{%- if fn.arguments is mapping -%}\n"
    "{%- for key, value in fn.arguments | items -%}\n"
    "{{- '<arg_key>' + key + '</arg_key><arg_value>' -}}\n"
    "{%- if value is string -%}{{- value -}}{%- else -%}{{- value | tojson -}}{%- endif -%}\n"
    "{{- '</arg_value>' -}}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '</tool_call>' -}}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{%- elif message.role == 'tool' -%}\n"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|observation|>' -}}{%- endif -%}\n"
    "{{- '<tool_response>' + text(message.content) + '</tool_response>' -}}\n"
    "{%- else -%}\n"
    "{{- raise_exception('Unexpected message role: ' + message.role) -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}\n";
