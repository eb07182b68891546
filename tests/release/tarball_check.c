/* Built against the unpacked C library tarball alone (tests/release/c_tarball.sh): the library loads, its
 * version is the one the tarball is named after, and a configuration is parsed (a good one accepted, a bad
 * one refused with its status and detail). No network: the run itself is examples/c/agent.c's job. */
#include <stdio.h>
#include <string.h>

#include "tooloop.h"

int main(int argc, char **argv) {
    tooloop_agent *agent = NULL;
    tooloop_status status;
    if (argc != 2) {
        fprintf(stderr, "usage: %s EXPECTED_VERSION\n", argv[0]);
        return 2;
    }
    if (strcmp(tooloop_version(), argv[1]) != 0) {
        fprintf(stderr, "FAIL: tooloop_version() is %s, the tarball says %s\n", tooloop_version(), argv[1]);
        return 1;
    }
    status = tooloop_agent_new("{\"provider\": \"anthropic\", \"model\": \"m\", \"api_key\": \"k\"}", &agent);
    if (status != TOOLOOP_OK || agent == NULL) {
        fprintf(stderr, "FAIL: a valid config: %s: %s\n", tooloop_status_str(status), tooloop_last_error());
        return 1;
    }
    tooloop_agent_free(agent);
    agent = NULL;
    status = tooloop_agent_new("{\"model\": ", &agent);
    if (status != TOOLOOP_INVALID_JSON || agent != NULL) {
        fprintf(stderr, "FAIL: truncated JSON gave %s\n", tooloop_status_str(status));
        return 1;
    }
    printf("libtooloop %s: config parsed, bad JSON refused (%s: %s)\n", tooloop_version(),
           tooloop_status_str(status), tooloop_last_error());
    return 0;
}
