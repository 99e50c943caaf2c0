/* splash claude: Claude Code through the Messages API. Everything is passed in its environment
 * at launch; nothing is written. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/agent_launch.h"
#include "cli/agents.h"

int splash_cmd_claude(int argc, char **argv)
{
    static const struct splash_agent a = {"claude", "claude", "Claude Code",
                                          "npm install -g @anthropic-ai/claude-code"};
    struct splash_agent_server s;
    int rc = splash_agent_prepare(&a, argc, argv, &s);
    if (rc)
        return rc;
    char context[32];
    snprintf(context, sizeof context, "%lld", (long long)s.lock.context);
    /* every model slot Claude Code picks from (main, Opus, Sonnet, Haiku, subagents) names the
     * served model; the window tells it when to compact, which it cannot know for a model it
     * does not recognise */
    static const char *const model_vars[] = {
        "ANTHROPIC_MODEL",           "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL",
    };
    if (splash_agent_setenv("ANTHROPIC_BASE_URL", s.base_url) ||
        splash_agent_setenv("CLAUDE_CODE_MAX_CONTEXT_TOKENS", context))
        return 1;
    /* Claude Code reserves its output limit (32K and more) out of the window before it sends
     * anything, so under 128K of context every prompt would be "too long" before it left:
     * unless the user chose a limit, it gets a quarter of the context, as OpenCode does */
    const char *own = getenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS");
    if ((!own || !*own) && s.lock.context < 131072) {
        char output[32];
        snprintf(output, sizeof output, "%lld", (long long)s.lock.context / 4);
        if (splash_agent_setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", output))
            return 1;
    }
    for (size_t i = 0; i < sizeof model_vars / sizeof model_vars[0]; i++)
        if (splash_agent_setenv(model_vars[i], s.lock.model))
            return 1;
    /* An Anthropic key in the environment is for Anthropic's servers: it must not reach this
     * one. Claude Code sends ANTHROPIC_AUTH_TOKEN as a bearer token; without a key the server
     * ignores it, but Claude Code wants one to skip its login. */
    unsetenv("ANTHROPIC_API_KEY");
    if (splash_agent_setenv("ANTHROPIC_AUTH_TOKEN", s.key ? s.key : "splash-no-key"))
        return 1;
    return splash_agent_exec(&a, &s, NULL);
}
