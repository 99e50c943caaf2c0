/* The streaming parser of OpenAI's harmony format (gpt-oss): a reply is messages, each a
 * header (<|channel|>NAME, a recipient " to=functions.NAME", a content type) then
 * <|message|> and a body ending at <|end|>, <|call|> or <|return|>; the next opens with
 * <|start|>assistant. The analysis channel is reasoning, final the answer, commentary
 * addressed to a function a tool call (its body the arguments, a JSON object: a call
 * is held until its message closes, and one whose body is no JSON object is answer text),
 * commentary to nobody (a preamble) answer text. Called by chat_parser.c for a HARMONY format. */
#ifndef SPLASH_SERVER_CHAT_HARMONY_PARSER_H
#define SPLASH_SERVER_CHAT_HARMONY_PARSER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "server/chat/chat_parser.h"

struct harmony_parser;

/* tools: the request's tools or NULL (a message to a function is a call only where the
 * request has tools, else its body is answer text). */
struct harmony_parser *harmony_parser_create(const json_t *tools);
void harmony_parser_destroy(struct harmony_parser *p);
void harmony_parser_feed(struct harmony_parser *p, const char *text, size_t len,
                         splash_chat_delta_fn fn, void *user);
void harmony_parser_finish(struct harmony_parser *p, splash_chat_delta_fn fn, void *user);

#endif
