/* Opening a tokenizer from what --model-dir names: a GGUF file or a directory. */
#include <sys/stat.h>

#include "core/meta.h"
#include "server/text/tokenizer/internal.h"

enum splash_status splash_tokenizer_load_gguf(const char *path, struct splash_tokenizer **out,
                                              struct splash_err *err)
{
    struct splash_meta *m;
    enum splash_status st = splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, err);
    if (st)
        return st;
    struct splash_vocab_spec spec;
    const struct splash_meta_api *api = splash_meta_api_get();
    if (!(st = splash_vocab_spec_from_meta(&spec, api, m, err))) {
        st = splash_tokenizer_create(&spec, out, err);
        splash_vocab_spec_free(&spec);
    }
    splash_meta_close(m);
    return st;
}

enum splash_status splash_tokenizer_load(const char *path, struct splash_tokenizer **out,
                                         struct splash_err *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return splash_err_set(err, SPLASH_ERR_IO, "%s: not found", path);
    if (S_ISDIR(sb.st_mode))
        return splash_tokenizer_load_hf(path, out, err);
    return splash_tokenizer_load_gguf(path, out, err);
}
