#include "ngx_http_keyauth_shm.h"


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
