// keyauthd's API over a real store: the first byte picks the method, then a
// path up to a newline, then the body. Never a crash, never a 5xx.
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "console_api.h"
#include "store.h"

namespace {

struct World {
    std::string dir;
    std::unique_ptr<keyauth::Store> store;
    std::unique_ptr<keyauth::ConsoleApi> api;
    std::string token;
};

World &world() {
    static World *w = [] {
        auto *w = new World;
        char tmpl[] = "/tmp/keyauth-fuzz-XXXXXX";
        w->dir = mkdtemp(tmpl);
        w->store = std::make_unique<keyauth::Store>(w->dir + "/db", size_t{1} << 30);
        w->api = std::make_unique<keyauth::ConsoleApi>(*w->store);
        w->token = w->store->create_account("fuzz", 100).console_token;
        std::atexit([] { std::system(("rm -rf " + world().dir).c_str()); });
        return w;
    }();
    return *w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size == 0) return 0;
    static const char *kMethods[] = {"GET", "POST", "PUT", "DELETE"};
    std::string rest(reinterpret_cast<const char *>(data) + 1, size - 1);
    size_t nl = rest.find('\n');
    keyauth::HttpRequest req;
    req.method = kMethods[data[0] % 4];
    req.path = nl == std::string::npos ? rest : rest.substr(0, nl);
    req.body = nl == std::string::npos ? "" : rest.substr(nl + 1);
    req.content_type = "application/json";
    req.has_authorization = data[0] & 4;
    req.authorization = "Bearer " + world().token;
    if (data[0] & 8) {
        req.has_limit = true;
        req.query_limit = req.body.substr(0, 8);
        req.has_cursor = true;
        req.query_cursor = req.body.substr(0, 40);
    }
    keyauth::HttpResponse res = world().api->handle(req);
    if (res.status >= 500 && res.status != 507) __builtin_trap();
    return 0;
}
