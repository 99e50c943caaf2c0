/* A chat template's refusal (raise_exception) reaches the API client whole: the 400's
 * message carries every byte of the template's reason, not the first 255 that fit a
 * struct splash_err. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/modelgen/builtin_vocab.h"
#include "core/gguf_write.h"
#include "server/api_prompt.h"
#include "server/app.h"
#include "server/chat/chat_format.h"
#include "server/chat_setup.h"
#include "server/options.h"
#include "server/text/tokenizer/tokenizer.h"

static void test_template_refusal_reaches_the_client_whole(void **state)
{
    (void)state;
    /* a reason of 900 bytes, its end marked */
    char reason[901];
    memset(reason, 'r', 900);
    memcpy(reason + 890, "END-OF-WHY", 10);
    reason[900] = 0;
    char tpl[1200];
    snprintf(tpl, sizeof tpl,
             "{%%- for m in messages %%}{%%- if m.role == 'user' and m.content == 'refuse' %%}"
             "{{ raise_exception('%s') }}{%%- endif %%}"
             "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%%- endfor %%}"
             "{%%- if add_generation_prompt %%}<|im_start|>assistant\n{%%- endif %%}",
             reason);
    char path[64];
    snprintf(path, sizeof path, "/tmp/splash-test-refusal-%d.gguf", (int)getpid());
    struct splash_err err;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    struct splash_builtin_vocab_opts vo = {.chat_template = tpl};
    assert_int_equal(splash_builtin_vocab_write_opts(w, splash_builtin_vocab_min_size(), &vo, &err),
                     SPLASH_OK);
    assert_int_equal(splash_gguf_writer_set_str(w, "general.architecture", "qwen35", &err),
                     SPLASH_OK);
    assert_int_equal(splash_gguf_writer_write_file(w, path, &err), SPLASH_OK);
    splash_gguf_writer_destroy(w);

    static struct splash_app app;
    static struct splash_serve_opts opts;
    char *args[] = {"serve", "--demo", NULL};
    char msg[8192];
    assert_int_equal(splash_serve_opts_parse(&opts, 2, args, msg, sizeof msg), 0);
    app.opts = &opts;
    app.model_name = "test/model";
    pthread_mutex_init(&app.lock, NULL);
    assert_int_equal(splash_tokenizer_load_gguf(path, &app.tok, &err), SPLASH_OK);
    assert_int_equal(splash_chat_setup(&app, path, &splash_chat_format_qwen, &err), SPLASH_OK);
    unlink(path);

    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "refuse");
    struct splash_api_prompt p;
    int status = splash_api_prompt_make(&app, messages, NULL, -1, NULL, &p, msg, sizeof msg);
    assert_int_equal(status, 400);
    assert_non_null(strstr(msg, "the chat template refused the request: "));
    assert_non_null(strstr(msg, reason)); /* all 900 bytes, END-OF-WHY included */
    json_decref(messages);

    /* a request the template takes still renders */
    messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hello");
    assert_int_equal(splash_api_prompt_make(&app, messages, NULL, -1, NULL, &p, msg, sizeof msg), 0);
    splash_api_prompt_free(&p);
    json_decref(messages);
    splash_chat_teardown(&app);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template_refusal_reaches_the_client_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
