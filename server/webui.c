/* GET /: the chat page embedded in the binary (--no-webui turns it off). */
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

extern const unsigned char splash_webui_html[];
extern const unsigned long splash_webui_html_len;

void splash_api_webui(void *appv, const struct splash_http_request *req,
                      struct splash_http_reply *reply)
{
    struct splash_app *app = appv;
    if (app->opts->no_webui) {
        splash_reply_error(reply, 404, "invalid_request_error", "not_found",
                           "the chat page is disabled (--no-webui)");
        return;
    }
    reply->text = malloc(splash_webui_html_len);
    if (!reply->text) {
        splash_reply_error(reply, 500, "server_error", "internal_error", "out of memory");
        return;
    }
    memcpy(reply->text, splash_webui_html, splash_webui_html_len);
    reply->text_len = splash_webui_html_len;
    reply->content_type = "text/html; charset=utf-8";
}
