/*
 * What the module's shared zones (keyauth_zone and the statistics zone)
 * have in common.
 */
#ifndef NGX_HTTP_KEYAUTH_SHM_H
#define NGX_HTTP_KEYAUTH_SHM_H

#include "ngx_http_keyauth_module.h"

/* For a shared zone's init: true (and shm_zone->data set) when the zone
 * already holds our data, from the previous cycle (data) or from an
 * existing mapping; its data pointer is kept in the slab pool's data. */
ngx_uint_t ngx_http_keyauth_zone_reused(ngx_shm_zone_t *shm_zone, void *data);

/* The core's lock over keyauth_zone's slab mutex: taken only to give a key
 * a slot (rates and usage alike). */
void ngx_http_keyauth_zone_lock(ngx_shm_zone_t *shm_zone, ka_lock_t *lock);

#endif /* NGX_HTTP_KEYAUTH_SHM_H */
