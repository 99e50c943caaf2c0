/* The typed request's defaults (gen_params.h). */
#include "server/engine/gen_params.h"

#include <stdlib.h>
#include <string.h>

void splash_gen_params_init(struct splash_gen_params *p)
{
    memset(p, 0, sizeof *p);
    /* OpenAI's and Anthropic's default temperature is 1 */
    p->sampling.temperature = 1.0f;
    p->sampling.top_p = 1.0f;
    p->sampling.repetition_penalty = 1.0f;
    p->think.budget = -1;
    p->think.call_open = -1;
    p->grammar_calls = SPLASH_GRAMMAR_CALLS_QWEN_XML;
}

void splash_gen_params_free(struct splash_gen_params *p)
{
    free(p->logit_bias);
    free(p->grammar);
    splash_gen_params_init(p);
}
