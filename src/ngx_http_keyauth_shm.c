#include "ngx_http_keyauth_shm.h"


static void ngx_http_keyauth_slab_lock(void *data);
static void ngx_http_keyauth_slab_unlock(void *data);


ngx_uint_t
ngx_http_keyauth_zone_reused(ngx_shm_zone_t *shm_zone, void *data)
{
    if (data) {
        shm_zone->data = data;
        return 1;
    }

    if (shm_zone->shm.exists) {
        shm_zone->data = ((ngx_slab_pool_t *) shm_zone->shm.addr)->data;
        return 1;
    }

    return 0;
}


void
ngx_http_keyauth_zone_lock(ngx_shm_zone_t *shm_zone, ka_lock_t *lock)
{
    lock->lock = ngx_http_keyauth_slab_lock;
    lock->unlock = ngx_http_keyauth_slab_unlock;
    lock->data = shm_zone->shm.addr;
}


static void
ngx_http_keyauth_slab_lock(void *data)
{
    ngx_shmtx_lock(&((ngx_slab_pool_t *) data)->mutex);
}


static void
ngx_http_keyauth_slab_unlock(void *data)
{
    ngx_shmtx_unlock(&((ngx_slab_pool_t *) data)->mutex);
}
