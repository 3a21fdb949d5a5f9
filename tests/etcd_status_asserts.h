// ASSERT_OK / EXPECT_OK for an etcd call's Status, naming its error code
// and message on failure: shared by the tests that call etcd directly.
#pragma once

#include <gtest/gtest.h>

#include "etcd_client.h"

#define ASSERT_OK(expr)                                                                               \
    do {                                                                                              \
        ::keyauth::etcd::Status status_ = (expr);                                                     \
        ASSERT_TRUE(status_.ok()) << ::keyauth::etcd::errc_name(status_.code) << ": " << status_.message; \
    } while (0)

#define EXPECT_OK(expr)                                                                               \
    do {                                                                                              \
        ::keyauth::etcd::Status status_ = (expr);                                                     \
        EXPECT_TRUE(status_.ok()) << ::keyauth::etcd::errc_name(status_.code) << ": " << status_.message; \
    } while (0)
