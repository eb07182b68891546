/* An MCP server from the official MCP Python SDK (tests/mcp/fastmcp_server.py), configured with the
 * "mcp_servers" config key: its tools reach a host model as mcp__test__<tool>, a call goes through, the
 * status reader names the server and the one that could not start, and freeing the agent stops the server.
 * Needs a Python with the `mcp` package: $TOOLOOP_TEST_PYTHON (scripts/test.sh provides one); without it the
 * program fails under CI=true and says it skipped otherwise. */
#define _POSIX_C_SOURCE 200809L
#include "tooloop.h"

#include <stdint.h>

#include "check.h"

typedef struct {
    int calls;
} model_state;

static int32_t model(void *userdata, const char *request_json, tooloop_model_response *response) {
    model_state *st = (model_state *)userdata;
    st->calls++;
    if (st->calls == 1) {
        CHECK_CONTAINS(request_json, "\"name\":\"mcp__test__echo\"");
        return tooloop_model_response_set_json(
                   response, "{\"content\": [{\"type\": \"tool_use\", \"id\": \"toolu_m\", \"name\": \"mcp__test__echo\","
                             " \"input\": {\"text\": \"from C\"}}]}") == TOOLOOP_OK
                   ? 0
                   : 1;
    }
    CHECK_CONTAINS(request_json, "echo: from C");
    return tooloop_model_response_set_json(response, "{\"content\": \"the server answered\"}") == TOOLOOP_OK ? 0 : 1;
}

int main(void) {
    const char *py = getenv("TOOLOOP_TEST_PYTHON");
    const char *root = require_env("TOOLOOP_REPO_ROOT");
    const char *ci = getenv("CI");
    char probe[1024], config[4096];
    tooloop_agent *agent = NULL;
    model_state st = {0};
    char *status = NULL, *result = NULL;
    if (py == NULL) py = "python3";
    snprintf(probe, sizeof probe, "%s -c 'import mcp.server.mcpserver' >/dev/null 2>&1", py);
    if (system(probe) != 0) {
        fprintf(stderr, "mcp_server: %s cannot import the MCP SDK (pip install 'mcp>=2.3,<3'; scripts/test.sh does)\n", py);
        if (ci != NULL && strcmp(ci, "true") == 0) return 1;
        printf("mcp_server: SKIPPED (no MCP SDK)\n");
        return 0;
    }
    snprintf(config, sizeof config,
             "{\"mcp_servers\": {\"test\": {\"command\": \"%s\", \"args\": [\"%s/tests/mcp/fastmcp_server.py\","
             " \"tooloop-mcp-c-test\"]}, \"broken\": {\"command\": \"/nonexistent/tooloop-mcp\"}}}",
             py, root);
    CHECK_STATUS(tooloop_agent_new_with_model(config, model, &st, NULL, &agent), TOOLOOP_OK);
    if (agent == NULL) return check_exit("mcp_server");
    CHECK_STATUS(tooloop_agent_mcp_status_json(agent, &status), TOOLOOP_OK);
    CHECK_CONTAINS(status, "\"name\":\"test\",\"state\":\"connected\"");
    CHECK_CONTAINS(status, "\"failures\":[{\"server\":\"broken\"");
    tooloop_string_free(status);
    CHECK_STATUS(tooloop_agent_run(agent, "call the server", NULL, NULL, &result), TOOLOOP_OK);
    CHECK_CONTAINS(result, "\"text\":\"the server answered\"");
    CHECK_CONTAINS(result, "\"output\":\"echo: from C\",\"is_error\":false");
    tooloop_string_free(result);
    tooloop_agent_free(agent);
    /* The server is gone: nothing with its marker is left (pgrep's own exit status 1 = no match). */
    CHECK(system("sleep 0.5; ! pgrep -f 'tooloop-mcp-[c]-test' >/dev/null") == 0); /* [c]: not this shell */
    return check_exit("mcp_server");
}
