/* Grammar-constrained decoding: byte-level grammars compiled from JSON Schema
 * or from a request's tools, and a matcher that yields, at every decoding step,
 * the tokens the grammar allows (a bit mask over the vocabulary).
 *
 * Three objects, all created once and shared where they can be:
 *   - struct splash_grammar_vocab: every token's bytes in a trie, built once per
 *     tokenizer. Thread-safe after creation; it also holds the mask pieces that
 *     do not depend on a grammar (string bodies, numbers), computed on first use.
 *   - struct splash_grammar: a compiled grammar. Immutable but for its internal
 *     mask cache, which is locked: any number of matchers on any threads.
 *   - struct splash_grammar_matcher: one request's position. One thread at a time.
 *
 * The engine loop, per decoding step of a constrained request:
 *
 *     splash_grammar_matcher_fill_mask(m, mask);            // before sampling
 *     splash_grammar_mask_apply(mask, n_mask, logits, n_vocab);
 *     t = splash_sampler_sample(...);
 *     splash_grammar_matcher_accept_token(m, t, &err);      // never fails for a masked pick
 *
 * and a sampled stop token is allowed only once splash_grammar_matcher_is_complete.
 *
 * Special tokens (every type but NORMAL and BYTE) never match grammar text: a
 * grammar allows one only where it names its id (the think and tool-call tags of
 * a chat format), and the stop tokens only where the grammar is complete. Text
 * crosses token boundaries byte by byte, so a token may end inside a UTF-8
 * character and the next complete it. */
#ifndef SPLASH_TEXT_GRAMMAR_GRAMMAR_H
#define SPLASH_TEXT_GRAMMAR_GRAMMAR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

struct splash_tokenizer;
struct splash_grammar;
struct splash_grammar_vocab;
struct splash_grammar_matcher;
struct splash_grammar_format;

/* ---- vocabulary index ---------------------------------------------------------------- */

/* Builds the index of tok's tokens (NORMAL and BYTE tokens by their bytes; every
 * other type is special) with stops as the tokens allowed where a grammar is
 * complete (the chat format's stop tokens; n_stops may be 0). */
enum splash_status splash_grammar_vocab_create(const struct splash_tokenizer *tok,
                                               const int32_t *stops, size_t n_stops,
                                               struct splash_grammar_vocab **out,
                                               struct splash_err *err);
/* The same from raw pieces (tests, benchmarks): token i is pieces[i][0..lens[i]),
 * special when special[i] is nonzero (special may be NULL). */
enum splash_status splash_grammar_vocab_create_raw(size_t n_tokens, const char *const *pieces,
                                                   const size_t *lens, const uint8_t *special,
                                                   const int32_t *stops, size_t n_stops,
                                                   struct splash_grammar_vocab **out,
                                                   struct splash_err *err);
/* Computes, ahead of the first request, the mask pieces every grammar shares
 * (JSON strings and numbers, and f's raw tool-call values when f is non-NULL):
 * each is a walk of the whole vocabulary, tens of milliseconds, which the first
 * request to need it would otherwise pay. Optional; safe to call while serving. */
enum splash_status splash_grammar_vocab_warm(struct splash_grammar_vocab *v,
                                             const struct splash_grammar_format *f,
                                             struct splash_err *err);
/* After every matcher and grammar using it is gone. */
void splash_grammar_vocab_destroy(struct splash_grammar_vocab *v);
size_t splash_grammar_vocab_n_tokens(const struct splash_grammar_vocab *v);
/* uint32_t words in a mask: bit (id % 32) of word id / 32 is set when id is allowed. */
size_t splash_grammar_mask_words(const struct splash_grammar_vocab *v);

/* Sets logits[i] to -INFINITY for every token the mask disallows; ids at or past
 * n_mask_tokens (a model vocabulary padded past the tokenizer's) are disallowed. */
void splash_grammar_mask_apply(const uint32_t *mask, size_t n_mask_tokens, float *logits,
                               size_t n_logits);

/* ---- chat formats ---------------------------------------------------------------------- */

enum splash_grammar_call_syntax {
    SPLASH_GRAMMAR_CALLS_QWEN_XML, /* <tool_call>\n<function=N>\n<parameter=P>\nV\n</parameter>\n
                                      </function>\n</tool_call>, the tags <tool_call> tokens */
    SPLASH_GRAMMAR_CALLS_GLM_ARGS, /* <tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value>
                                      </tool_call>, every tag a token */
    SPLASH_GRAMMAR_CALLS_HARMONY,  /* OpenAI's harmony (gpt-oss): messages, not tags; see
                                      splash_grammar_compile_spec */
};

/* The token ids a format's grammars write (models.md "Chat formats"); -1 where
 * the format has none. */
struct splash_grammar_format {
    enum splash_grammar_call_syntax calls;
    int32_t think_open, think_close;
    int32_t call_open, call_close;
    int32_t arg_key_open, arg_key_close, arg_value_open, arg_value_close; /* GLM_ARGS only */
    int32_t channel, message, start, end; /* HARMONY only: <|channel|> <|message|> <|start|>
                                             <|end|> */
};

/* Finds the format's tags among tok's special tokens (<think>, </think>,
 * <tool_call>, </tool_call>, and for GLM_ARGS <arg_key>, </arg_key>, <arg_value>,
 * </arg_value>; for HARMONY <|channel|>, <|message|>, <|start|>, <|end|> and <|call|>); a
 * missing tag is refused with its text. */
enum splash_status splash_grammar_format_init(struct splash_grammar_format *f,
                                              enum splash_grammar_call_syntax calls,
                                              const struct splash_tokenizer *tok,
                                              struct splash_err *err);

/* ---- compiling grammars ------------------------------------------------------------------ */

/* strict: an object schema without additionalProperties allows no other
 * properties (OpenAI's strict mode). Without it the same holds: extra keys
 * are written only where additionalProperties allows them explicitly. */
#define SPLASH_GRAMMAR_JSON_STRICT 1u

/* A JSON value matching schema. Supported: type (one or a list), properties,
 * required, additionalProperties (bool or schema), enum, const, items,
 * prefixItems, minItems, maxItems, anyOf, oneOf (as anyOf), allOf of one schema,
 * $ref to "#" or a JSON pointer into the document ($defs, definitions),
 * minLength/maxLength up to 32, format (date, time, date-time, uuid, ipv4),
 * integer minimum/maximum, number, boolean, null, and the annotations
 * (title, description, default, examples, $schema, $id, $comment, ...). Any
 * other keyword is refused with SPLASH_ERR_UNSUPPORTED and its JSON path named
 * in err ("schema: properties.when.pattern: unsupported keyword"). */
enum splash_status splash_grammar_compile_json_schema(const json_t *schema, unsigned flags,
                                                      struct splash_grammar **out,
                                                      struct splash_err *err);
/* Any JSON object (response_format {type: json_object}). */
enum splash_status splash_grammar_compile_json_object(struct splash_grammar **out,
                                                      struct splash_err *err);

/* One or more calls (one when !parallel) in f's syntax to the functions of tools
 * (an OpenAI tools array: {type: function, function: {name, parameters}}, or the
 * flat Responses shape {type: function, name, parameters}), or only to the one
 * named only_name when it is non-NULL. Each call's arguments match its
 * function's parameters schema; string parameters are written raw, others as
 * JSON, as the format's templates render them. */
enum splash_status splash_grammar_compile_tool_calls(const json_t *tools, const char *only_name,
                                                     int parallel,
                                                     const struct splash_grammar_format *f,
                                                     struct splash_grammar **out,
                                                     struct splash_err *err);

/* Where the output starts relative to a think block. */
enum splash_grammar_reasoning {
    SPLASH_GRAMMAR_REASONING_NONE = 0, /* constrained from the first token */
    SPLASH_GRAMMAR_REASONING_OPEN,     /* inside a think block the prompt opened (Qwen) */
    SPLASH_GRAMMAR_REASONING_OPTIONAL, /* the model may open one with <think> first (Flint) */
};

/* A grammar that lets the think block come first, unconstrained: any token but
 * the stops until f->think_close, then up to two line breaks and g. The think
 * tags are f's tokens; a missing one is refused. NONE returns a copy of g. */
enum splash_status splash_grammar_wrap_reasoning(const struct splash_grammar *g,
                                                 enum splash_grammar_reasoning mode,
                                                 const struct splash_grammar_format *f,
                                                 struct splash_grammar **out,
                                                 struct splash_err *err);

/* After every matcher using it is gone. */
void splash_grammar_destroy(struct splash_grammar *g);

/* ---- requests -------------------------------------------------------------------------- */

/* The constraint a request asks for, as one normalized object the front passes to
 * the engine:
 *   {"type": "json_object"}
 *   {"type": "json_schema", "schema": {...}, "strict": bool}
 *   {"type": "tool_calls", "tools": [...], "name": "f" | absent, "parallel": bool}
 * plus "reasoning": "none" | "open" | "optional" (absent: none), which the caller
 * sets from how the prompt ends. *spec is NULL (and SPLASH_OK) when the request
 * leaves the output free (tool_choice auto or none, no response_format or type
 * text). A malformed or unsupported constraint returns SPLASH_ERR_INVALID or
 * SPLASH_ERR_UNSUPPORTED with the field named: a 400. */
enum splash_status splash_grammar_spec_from_chat(const json_t *body, json_t **spec,
                                                 struct splash_err *err);
enum splash_status splash_grammar_spec_from_responses(const json_t *body, json_t **spec,
                                                      struct splash_err *err);
enum splash_status splash_grammar_spec_from_messages(const json_t *body, json_t **spec,
                                                     struct splash_err *err);
/* Compiles a spec (wrapped for its reasoning mode). The front calls it once to
 * answer 400s before submitting; the engine again, or shares the result. In a HARMONY
 * format (the prompt ending <|start|>assistant) the output is one message: the final
 * channel's header <|channel|>final<|message|> then the JSON, or a call's header
 * " to=functions.NAME<|channel|>commentary json<|message|>" then its arguments as a JSON
 * object (one call: a harmony call ends the turn); any reasoning mode but none lets an
 * analysis message, free text, come first (<|channel|>analysis<|message|>...<|end|>
 * <|start|>assistant). */
enum splash_status splash_grammar_compile_spec(const json_t *spec,
                                               const struct splash_grammar_format *f,
                                               struct splash_grammar **out, struct splash_err *err);

/* ---- matching -------------------------------------------------------------------------- */

enum splash_status splash_grammar_matcher_create(const struct splash_grammar *g,
                                                 const struct splash_grammar_vocab *v,
                                                 struct splash_grammar_matcher **out,
                                                 struct splash_err *err);
void splash_grammar_matcher_destroy(struct splash_grammar_matcher *m);

/* Advances by one token. A token the grammar does not allow here is refused with
 * SPLASH_ERR_INVALID and leaves the matcher as it was. A stop token is accepted
 * only where the grammar is complete, and ends the matcher (nothing after it). */
enum splash_status splash_grammar_matcher_accept_token(struct splash_grammar_matcher *m, int32_t id,
                                                       struct splash_err *err);
/* Writes splash_grammar_mask_words(v) words: the tokens accept_token would take now. */
void splash_grammar_matcher_fill_mask(struct splash_grammar_matcher *m, uint32_t *mask);
/* The output so far is a whole sentence of the grammar (a stop token may follow). */
int splash_grammar_matcher_is_complete(const struct splash_grammar_matcher *m);
/* A stop token was accepted. */
int splash_grammar_matcher_is_stopped(const struct splash_grammar_matcher *m);
/* Inside the unconstrained think block. */
int splash_grammar_matcher_in_thinking(const struct splash_grammar_matcher *m);
/* Inside the think block and its text so far ends between whole UTF-8
 * characters: where a thinking budget may end it. */
int splash_grammar_matcher_thinking_at_char_boundary(const struct splash_grammar_matcher *m);
/* Fewest bytes (special tokens count one) that complete the grammar from here;
 * 0 when complete, SIZE_MAX inside the think block. */
size_t splash_grammar_matcher_distance(const struct splash_grammar_matcher *m);
/* Undoes the last n accepted tokens (n at most 64 and at most those accepted;
 * speculative decoding). Returns the number undone. */
size_t splash_grammar_matcher_rollback(struct splash_grammar_matcher *m, size_t n);

#endif
