// validate_webhook_url: what `webhook create` accepts as an endpoint.
#include "webhook_url.h"

#include <gtest/gtest.h>

#include <string>

using keyauth::validate_webhook_url;

namespace {

struct Bad {
    std::string url;
    const char *error;  // the whole message
};

}  // namespace

TEST(WebhookUrl, AcceptsHttpsUrls) {
    for (const char *url : {"https://example.com", "https://example.com/", "https://hooks.example.com/in/abc?x=1&y=2",
                            "https://example.com:8443/hook", "HTTPS://Example.COM/Hook", "https://93.184.216.34/x",
                            "https://[2606:4700::1111]:443/x", "https://127.0.0.1:1/",
                            "https://example.com/p%20q"}) {
        std::string error = "stale";
        EXPECT_TRUE(validate_webhook_url(url, error)) << url << ": " << error;
        EXPECT_EQ(error, "");
    }
    std::string longest = "https://example.com/";
    longest += std::string(2048 - longest.size(), 'a');
    std::string error;
    EXPECT_TRUE(validate_webhook_url(longest, error)) << error;
}

TEST(WebhookUrl, RefusesEachProblemByName) {
    std::string over_long = "https://example.com/";
    over_long += std::string(2049 - over_long.size(), 'a');
    const Bad cases[] = {
        {"", "url is empty"},
        {"example.com", "url is not a valid absolute URL: Bad scheme"},
        {"not a url", "url must be printable ASCII without spaces (percent-encode the rest)"},
        {"//example.com/x", "url is not a valid absolute URL: Bad scheme"},
        {"http://example.com/hook",
         "url must use https:// (http:// is refused: the signed events would travel in clear)"},
        {"ftp://example.com/", "url must use https://"},
        {"gopher://example.com/", "url must use https://"},
        {"file:///etc/passwd", "url must use https://"},
        {over_long, "url is longer than 2048 bytes"},
        {"https://", "url has no host"},
        {"https:///hook", "url has no host"},
        {"https:/example.com/", "url has no host"},
        {"https://:443/", "url is not a valid absolute URL: No host part in the URL"},
        {"https://exa mple.com/", "url must be printable ASCII without spaces (percent-encode the rest)"},
        {"https://example.com/a b", "url must be printable ASCII without spaces (percent-encode the rest)"},
        {" https://example.com/", "url must be printable ASCII without spaces (percent-encode the rest)"},
        {"https://example.com/\n", "url must be printable ASCII without spaces (percent-encode the rest)"},
        {std::string("https://example.com/\0x", 22),
         "url must be printable ASCII without spaces (percent-encode the rest)"},
        {"https://example.com/\xc3\xa9", "url must be printable ASCII without spaces (percent-encode the rest)"},
        {"https://user:secret@example.com/", "url must not contain a user name or password"},
        {"https://user@example.com/", "url must not contain a user name or password"},
        {"https://@example.com/", "url must not contain a user name or password"},
        {"https://example.com\\@evil.example/", "url must not contain a user name or password"},
        {"https://example.com/#frag", "url must not have a fragment ('#')"},
        {"https://example.com/#", "url must not have a fragment ('#')"},
        {"https://[fe80::1%25eth0]/", "url must not name an IPv6 zone"},
        {"https://example.com:0/", "url's port must be from 1 to 65535"},
        {"https://example.com:65536/", "url is not a valid absolute URL: Port number was not a decimal number "
                                       "between 0 and 65535"},
    };
    for (const Bad &b : cases) {
        std::string error;
        EXPECT_FALSE(validate_webhook_url(b.url, error)) << b.url;
        EXPECT_EQ(error, b.error) << b.url;
    }
}

// The URL's path or query may hold the receiver's token: no message repeats it.
TEST(WebhookUrl, ErrorsNeverRepeatTheUrl) {
    for (const char *url : {"http://example.com/T0KEN-abcdef", "https://u:T0KEN-abcdef@example.com/",
                            "https://example.com/T0KEN-abcdef#x", "https://example.com:0/T0KEN-abcdef"}) {
        std::string error;
        EXPECT_FALSE(validate_webhook_url(url, error));
        EXPECT_EQ(error.find("T0KEN"), std::string::npos) << error;
    }
}
