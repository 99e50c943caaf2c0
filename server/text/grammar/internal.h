/* Inside the grammar module: the flat grammar, its builder, the vocabulary trie
 * and the stack walker the matcher and the mask cache share. */
#ifndef SPLASH_TEXT_GRAMMAR_INTERNAL_H
#define SPLASH_TEXT_GRAMMAR_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "server/text/grammar/grammar.h"

/* ---- grammar ------------------------------------------------------------------------------
 * Rules are lists of alternatives; an alternative is a sequence of elements ended
 * by GE_END, stored flat, so a position (an element index) names a point inside an
 * alternative. A rule reference at the end of an alternative is a tail call: the
 * caller's frame is not kept, so loops written as right recursion run in constant
 * stack depth. */

enum gram_kind { GE_END = 0, GE_CLASS = 1, GE_TOKEN = 2, GE_REF = 3 };

struct gram_elem {
    uint32_t kind : 2;
    uint32_t arg : 30; /* class index, token id or rule id */
};

struct gram_class {
    uint64_t w[4]; /* bit b: byte b matches */
};

static inline int gram_class_has(const struct gram_class *c, unsigned b)
{
    return (int)((c->w[b >> 6] >> (b & 63)) & 1u);
}

struct gram_rule {
    uint32_t first_alt, n_alts;
};

#define GRAM_INF UINT32_MAX

struct gram_cache; /* mask pieces per set of top positions, per vocabulary */

struct splash_grammar {
    struct gram_elem *elems;
    uint32_t n_elems;
    struct gram_class *classes;
    uint32_t n_classes;
    uint32_t *alt_start; /* first element of each alternative, grouped by rule */
    uint32_t n_alts;
    struct gram_rule *rules;
    uint32_t n_rules;
    uint32_t root;
    uint32_t *min_suffix; /* per position: fewest bytes from it to its alternative's end */
    /* reasoning wrapper */
    enum splash_grammar_reasoning reasoning;
    int32_t think_open, think_close;
    /* mask cache, shared by the matchers */
    pthread_mutex_t lock;
    struct gram_cache *cache;
};

/* Builder: alternatives are added in any order; finalize lays them out by rule. */
struct gram_seq {
    struct gram_elem *e;
    uint32_t n, cap;
};

struct gram_builder {
    struct gram_elem *elems; /* alternatives, each ended by GE_END */
    uint32_t n_elems, cap_elems;
    uint32_t *alt_start, *alt_rule;
    uint32_t n_alts, cap_alts;
    uint32_t n_rules;
    struct gram_class *classes;
    uint32_t n_classes, cap_classes;
    uint32_t *class_ht;
    uint32_t class_ht_mask;
    int nomem;
    uint32_t limit_elems; /* refuse grammars past this size */
};

void gram_builder_init(struct gram_builder *b);
void gram_builder_free(struct gram_builder *b);
uint32_t gram_rule_new(struct gram_builder *b);
uint32_t gram_class_add(struct gram_builder *b, const struct gram_class *c);
/* Appends seq (and GE_END) as an alternative of rule. */
void gram_alt_add(struct gram_builder *b, uint32_t rule, const struct gram_seq *seq);
/* Checks and lays out the grammar: drops alternatives that can never end,
 * refuses left recursion and an empty language. what prefixes messages. */
enum splash_status gram_finalize(struct gram_builder *b, uint32_t root, const char *what,
                                 struct splash_grammar **out, struct splash_err *err);
/* A grammar that owns copies of g's arrays (for the wrappers). */
int gram_builder_from(struct gram_builder *b, const struct splash_grammar *g);

void gram_seq_free(struct gram_seq *s);
void gram_seq_reset(struct gram_seq *s);
void gram_seq_push(struct gram_builder *b, struct gram_seq *s, enum gram_kind kind, uint32_t arg);
void gram_seq_byte(struct gram_builder *b, struct gram_seq *s, unsigned char c);
void gram_seq_lit(struct gram_builder *b, struct gram_seq *s, const char *text, size_t len);
/* A class from a range list "az09" (pairs of inclusive bounds). */
void gram_seq_ranges(struct gram_builder *b, struct gram_seq *s, const char *pairs);
void gram_seq_class(struct gram_builder *b, struct gram_seq *s, const struct gram_class *c);
static inline void gram_seq_ref(struct gram_builder *b, struct gram_seq *s, uint32_t rule)
{
    gram_seq_push(b, s, GE_REF, rule);
}
/* One-alternative helpers. */
uint32_t gram_rule_lit(struct gram_builder *b, const char *text, size_t len);

/* Canonical text of what can follow the positions tops (their alternatives' rest
 * and every rule reachable from it), into buf (at most size bytes). Returns the
 * length, or 0 when it does not fit. Equal texts mean equal byte languages
 * from those positions, across grammars. */
size_t gram_canonical(const struct splash_grammar *g, const uint32_t *tops, size_t n_tops,
                      unsigned char *buf, size_t size);

/* Shared pieces of JSON grammars (json_schema.c), for the tool-call builder. */
struct json_gen;
struct json_gen *json_gen_create(struct gram_builder *b, const json_t *root, unsigned flags);
void json_gen_destroy(struct json_gen *j);
/* The rule for a JSON value matching schema; GRAM_INF with err set on failure. */
uint32_t json_gen_value(struct json_gen *j, const json_t *schema, const char *path,
                        struct splash_err *err, enum splash_status *st);
/* The rule for a raw (unquoted) string matching a string schema, ended by what
 * the caller writes next: the bytes it may hold exclude the sequence stop[0..n)
 * (n 0: any text). GRAM_INF when the schema is not a plain string schema. */
uint32_t json_gen_raw_string(struct json_gen *j, const json_t *schema, const char *stop,
                             size_t n_stop, const char *path, struct splash_err *err,
                             enum splash_status *st);

/* A request's tool: its name and parameters schema (NULL when none), from the OpenAI
 * ({type, function: {name, parameters}}), Responses ({type, name, parameters}) or
 * Anthropic ({name, input_schema}) shape; -1 without a name. */
struct gram_tool {
    const char *name;
    const json_t *params;
};
int gram_tool_fields(const json_t *t, struct gram_tool *out);

/* harmony.c: a spec's grammar in harmony (splash_grammar_compile_spec). */
enum splash_status gram_compile_harmony(const json_t *spec, int analysis,
                                        const struct splash_grammar_format *f,
                                        struct splash_grammar **out, struct splash_err *err);

/* ---- vocabulary trie --------------------------------------------------------------------
 * Nodes in depth-first order, the root left out: node i holds byte[i] at
 * depth[i] (1 for a token's first byte) and skip[i] is the first node after its
 * subtree. Tokens ending at node i are toks[tok_off[i] .. tok_off[i + 1]). A
 * subtrie (the tokens a cache entry leaves to the walk) has the same layout. */
struct gram_trie {
    uint32_t n;
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *skip;
    uint32_t *parent;  /* UINT32_MAX at depth 1 */
    uint32_t *tok_off; /* n + 1 */
    int32_t *toks;
    uint32_t max_depth;
};

void gram_trie_free(struct gram_trie *t);

struct splash_grammar_vocab {
    uint32_t n_tokens;
    uint32_t n_words;
    struct gram_trie trie; /* every non-special token */
    uint8_t *special;      /* per token */
    uint8_t *bytes;        /* every token's bytes, token i at bytes[off[i] .. off[i + 1]) */
    uint32_t *off;
    int32_t *stops;
    size_t n_stops;
    uint32_t *stop_mask; /* n_words */
    uint32_t *free_mask; /* the think block: every token but the stops */
    /* mask pieces shared by all grammars, keyed by gram_canonical text */
    pthread_mutex_t lock;
    struct gram_shared *shared;
};

/* ---- walker -----------------------------------------------------------------------------
 * A stack is a chain of interned nodes (position, parent node): node 0 is the
 * empty stack. The top node's position is a GE_CLASS or GE_TOKEN element; its
 * parents hold the positions to continue at when a rule ends. A state is an
 * interned sorted set of nodes (set 0: the empty set, no way on); the set
 * holding node 0 means the grammar can be complete. Byte transitions between
 * sets are memoized. */
struct gram_walk {
    const struct splash_grammar *g;
    uint32_t *node_pos, *node_parent;
    uint32_t n_nodes, cap_nodes;
    uint32_t *node_ht;
    uint32_t node_ht_mask;
    /* sets */
    uint32_t *set_data;
    size_t n_set_data, cap_set_data;
    uint32_t *set_off, *set_n;
    uint32_t *set_dense; /* row + 1 in dense (0: none yet) */
    uint32_t *set_hits;
    uint32_t n_sets, cap_sets;
    uint32_t *dense; /* rows of 256 next sets (UINT32_MAX: not computed), for busy sets */
    size_t n_dense, cap_dense;
    uint32_t *set_ht;
    uint32_t set_ht_mask;
    /* (set, byte) -> set + 1, 0: not computed */
    uint64_t *tr_key;
    uint32_t *tr_val;
    uint32_t tr_mask, n_tr;
    /* scratch for one transition */
    uint32_t *out;
    uint32_t n_out, cap_out;
    uint64_t *seen; /* (pos, parent) pairs visited in this transition */
    uint32_t *seen_gen;
    uint32_t seen_mask, gen;
    int nomem;
};

int gram_walk_init(struct gram_walk *w, const struct splash_grammar *g);
void gram_walk_free(struct gram_walk *w);
uint32_t gram_walk_node(struct gram_walk *w, uint32_t pos, uint32_t parent);
/* Interns a set from nodes (sorted and deduplicated here). */
uint32_t gram_walk_set(struct gram_walk *w, uint32_t *nodes, uint32_t n);
/* The set at the grammar's start. */
uint32_t gram_walk_start(struct gram_walk *w);
/* The set after byte b, memoized. */
uint32_t gram_walk_byte(struct gram_walk *w, uint32_t set, unsigned b);
/* The set after special token id (not memoized). */
uint32_t gram_walk_token(struct gram_walk *w, uint32_t set, int32_t id);
static inline const uint32_t *gram_walk_set_nodes(const struct gram_walk *w, uint32_t set,
                                                  uint32_t *n)
{
    *n = w->set_n[set];
    return w->set_data + w->set_off[set];
}

/* ---- mask cache -------------------------------------------------------------------------
 * For top positions (stacks with nothing below), the tokens accepted whatever
 * lies below (a bitmap or a list) and the vocabulary subtries whose tokens can
 * run past the tops' rules, which the matcher walks against its real stacks. */
struct gram_entry {
    uint32_t *bits; /* n_words, or NULL */
    int32_t *list;  /* when bits is NULL */
    uint32_t n_list;
    uint32_t *rest; /* trie node ranges [rest[2k], rest[2k + 1]), in trie order */
    uint32_t n_rest;
};

/* The entry for tops (sorted), computed on first use. NULL on allocation failure. */
const struct gram_entry *gram_cache_get(const struct splash_grammar *g,
                                        const struct splash_grammar_vocab *v, const uint32_t *tops,
                                        uint32_t n_tops);
void gram_cache_free(struct gram_cache *c);
void gram_shared_free(struct gram_shared *s);

#endif
