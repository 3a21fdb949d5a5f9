// What one nginx worker process holds for the edge: the LMDB reader, the
// hash context and the rendered plan catalog. Internal to the core; the glue
// sees only the opaque ka_edge_t of keyauth_core.h.
#pragma once

#include <memory>

#include "catalog.h"
#include "edge_store.h"
#include "keyauth_core.h"
#include "sha256.h"

struct ka_edge_s {
    std::unique_ptr<keyauth::EdgeStore> store;
    keyauth::Sha256 sha;
    keyauth::CatalogCache catalog;
};
