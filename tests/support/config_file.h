/* A config.json written into a temporary directory and opened as model metadata, for
 * check_config on targets that are not on disk. */
#ifndef SPLASH_TEST_CONFIG_FILE_H
#define SPLASH_TEST_CONFIG_FILE_H

struct splash_meta;

struct test_config {
    char dir[64];
    char path[512];
    struct splash_meta *meta;
};

/* Writes json as config.json in a new directory made from tmpl ("/tmp/name-XXXXXX") and
 * opens it; fails the test when it cannot. Returns c->meta. */
struct splash_meta *test_config_open(struct test_config *c, const char *tmpl, const char *json);
/* Closes the metadata and removes the file and its directory. */
void test_config_close(struct test_config *c);

#endif
