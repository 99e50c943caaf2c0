/* A plugin of a future ABI: exports only splash_plugin_entry_v2. */
__attribute__((visibility("default"))) const void *splash_plugin_entry_v2(const void *host);
__attribute__((visibility("default"))) const void *splash_plugin_entry_v2(const void *host)
{
    return host;
}
