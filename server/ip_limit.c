#include "server/ip_limit.h"

#include <netinet/in.h>
#include <string.h>

void splash_ip_limit_init(struct splash_ip_limit *l, unsigned per_ip)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    l->per_ip = per_ip;
}

/* The address as 16 bytes (IPv4 mapped into IPv6); 0 for the unlimited ones. */
static int limited_key(const struct sockaddr *addr, unsigned char key[16])
{
    static const unsigned char loop6[16] = {[15] = 1};
    memset(key, 0, 16);
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        if (a->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
            return 0;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &a->sin_addr, 4);
        return 1;
    }
    if (addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        memcpy(key, &a->sin6_addr, 16);
        return memcmp(key, loop6, 16) != 0;
    }
    return 0;
}

static unsigned slot_of(const unsigned char key[16])
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % IP_LIMIT_SLOTS;
}

/* The slot holding key, or the free slot where it would go; -1 when full. */
static int find_slot(struct splash_ip_limit *l, const unsigned char key[16])
{
    int free_slot = -1;
    unsigned s = slot_of(key);
    for (unsigned probe = 0; probe < IP_LIMIT_SLOTS; probe++, s = (s + 1) % IP_LIMIT_SLOTS) {
        if (l->slots[s].count && !memcmp(l->slots[s].addr, key, 16))
            return (int)s;
        if (!l->slots[s].count && free_slot < 0)
            free_slot = (int)s;
        /* a never-used slot ends the probe: entries are never moved */
        if (!l->slots[s].ever)
            break;
    }
    return free_slot;
}

int splash_ip_limit_take(struct splash_ip_limit *l, const struct sockaddr *addr)
{
    unsigned char key[16];
    if (!limited_key(addr, key))
        return 1;
    pthread_mutex_lock(&l->lock);
    int s = find_slot(l, key);
    int ok = s >= 0 && l->slots[s].count < l->per_ip;
    if (ok) {
        memcpy(l->slots[s].addr, key, 16);
        l->slots[s].ever = 1;
        l->slots[s].count++;
    }
    pthread_mutex_unlock(&l->lock);
    return ok;
}

void splash_ip_limit_give(struct splash_ip_limit *l, const struct sockaddr *addr)
{
    unsigned char key[16];
    if (!limited_key(addr, key))
        return;
    pthread_mutex_lock(&l->lock);
    int s = find_slot(l, key);
    if (s >= 0 && l->slots[s].count && !memcmp(l->slots[s].addr, key, 16))
        l->slots[s].count--;
    pthread_mutex_unlock(&l->lock);
}
