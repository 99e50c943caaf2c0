/* Connections per client address, so one address cannot take every connection
 * (server.md "Network and authentication"; issue "Hardening" item 3). The local
 * clients' own addresses, 127.0.0.1 and ::1, are not limited: an agent on this
 * machine may open many, and what runs there could exhaust the server anyway;
 * the idle and header timeouts bound what they hold. */
#ifndef SPLASH_SERVER_IP_LIMIT_H
#define SPLASH_SERVER_IP_LIMIT_H

#include <pthread.h>
#include <sys/socket.h>

#define IP_LIMIT_SLOTS 4096

struct splash_ip_limit {
    pthread_mutex_t lock;
    unsigned per_ip;
    struct {
        unsigned char addr[16];
        unsigned count;
        int ever; /* held an address once: a probe goes on past it */
    } slots[IP_LIMIT_SLOTS]; /* open addressing; count 0 is free */
};

void splash_ip_limit_init(struct splash_ip_limit *l, unsigned per_ip);
/* Counts a new connection from addr; 0 when its address already holds per_ip. */
int splash_ip_limit_take(struct splash_ip_limit *l, const struct sockaddr *addr);
/* Forgets a connection splash_ip_limit_take counted. */
void splash_ip_limit_give(struct splash_ip_limit *l, const struct sockaddr *addr);

#endif
