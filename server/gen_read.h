/* The typed request read from each API's body, once, at the front: OpenAI's Chat
 * Completions and Completions, Responses, and Anthropic's Messages. Each starts from
 * splash_gen_params_init's defaults and checks every field it reads in that API's range;
 * a bad value is SPLASH_ERR_INVALID with err naming the field. Fields of the body the
 * engine does not need (stream, stream_options, n) are checked here too. */
#ifndef SPLASH_SERVER_GEN_READ_H
#define SPLASH_SERVER_GEN_READ_H

#include <jansson.h>

#include "server/engine/gen_params.h"
#include "splash/status.h"

enum splash_status splash_gen_read_openai(const json_t *body, struct splash_gen_params *p,
                                          struct splash_err *err);
enum splash_status splash_gen_read_responses(const json_t *body, struct splash_gen_params *p,
                                             struct splash_err *err);
enum splash_status splash_gen_read_messages(const json_t *body, struct splash_gen_params *p,
                                            struct splash_err *err);

#endif
