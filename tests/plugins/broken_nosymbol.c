/* A shared object without the entry symbol. */
__attribute__((visibility("default"))) int splash_something_else(void);
__attribute__((visibility("default"))) int splash_something_else(void)
{
    return 0;
}
