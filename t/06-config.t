# Bad directives fail "nginx -t" with a clear message and file:line.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my $t = KeyauthTest->new;
my $module = KeyauthTest::module_path();
my $db = $t->db;

sub nginx_t {
    my ($http) = @_;
    my $conf = $t->dir . '/test.conf';
    open my $fh, '>', $conf or die $!;
    print $fh "load_module $module;\nevents {}\nhttp {\n$http\n}\n";
    close $fh;
    my ($out, $rc) = KeyauthTest::with_nginx_env($t->dir, sub {
        my $o = qx{nginx -t -p ${\ $t->dir } -c $conf -e ${\ $t->dir }/logs/t.log 2>&1};
        return ($o, $? >> 8);
    });
    return ($rc, $out, $conf);
}

my @bad = (
    ['keyauth_db needed',
     "server { listen 127.0.0.1:1; location / { keyauth on; } }",
     qr/"keyauth on" needs "keyauth_db" in the http block in \S+test\.conf:\d+/],
    ['scope without action',
     "keyauth_db $db;\nserver { location / { keyauth on; keyauth_scope ip; } }",
     qr/invalid scope "ip" in "keyauth_scope".* in \S+test\.conf:5/],
    ['wildcard scope cannot be required',
     "keyauth_db $db;\nserver { location / { keyauth on; keyauth_scope ip:*; } }",
     qr/invalid scope "ip:\*" in "keyauth_scope"/],
    ['upper-case scope',
     "keyauth_db $db;\nserver { location / { keyauth_scope IP:read; } }",
     qr/invalid scope "IP:read"/],
    ['keyauth takes on|off',
     "keyauth_db $db;\nserver { location / { keyauth maybe; } }",
     qr/invalid value "maybe" in "keyauth" directive, it must be "on" or "off" in \S+test\.conf:5/],
    ['keyauth_db twice',
     "keyauth_db $db;\nkeyauth_db $db;",
     qr/"keyauth_db" directive is duplicate in \S+test\.conf:5/],
    ['keyauth_db only in http',
     "keyauth_db $db;\nserver { keyauth_db $db; }",
     qr/"keyauth_db" directive is not allowed here in \S+test\.conf:5/],
    ['keyauth_scope twice in one block',
     "keyauth_db $db;\nserver { location / { keyauth_scope a:b; keyauth_scope c:d; } }",
     qr/"keyauth_scope" directive is duplicate/],
    ['keyauth_plans needs the store',
     "server { listen 127.0.0.1:1; location /api/plans { keyauth_plans; } }",
     qr/"keyauth_plans" needs "keyauth_db" in the http block/],
    ['keyauth_plans needs a prefix location, not a regex',
     "keyauth_db $db;\nserver { location ~ ^/api/plans { keyauth_plans; } }",
     qr/"keyauth_plans" needs a prefix or exact-match location, such as "location \/api\/plans".* in \S+test\.conf:5/],
    ['keyauth_plans needs a prefix location, not a named one',
     "keyauth_db $db;\nserver { location \@plans { keyauth_plans; } }",
     qr/"keyauth_plans" needs a prefix or exact-match location/],
    ['keyauth_status needs the store',
     "server { listen 127.0.0.1:1; location /s { keyauth_status; } }",
     qr/"keyauth_status" needs "keyauth_db" in the http block/],
    ['keyauth_zone needs NAME:SIZE',
     "keyauth_db $db;\nkeyauth_zone rates;",
     qr/invalid zone "rates" in "keyauth_zone", expected NAME:SIZE in \S+test\.conf:5/],
    ['keyauth_zone too small',
     "keyauth_db $db;\nkeyauth_zone rates:4k;",
     qr/zone "rates:4k" is too small/],
    ['keyauth_zone may not take the statistics zone\'s name',
     "keyauth_db $db;\nkeyauth_zone keyauth_stats:32k;",
     qr/shared memory zone "keyauth_stats" is already declared for a different use/],
    ['empty keyauth_db',
     "keyauth_db \"\";",
     qr/empty path in "keyauth_db"/],
    ['keyauth_shared_limits takes a redis:// address',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits http://127.0.0.1:6379;",
     qr/invalid "keyauth_shared_limits" address: expected redis:\/\/\[\[user\]:password\@\]host\[:port\] in \S+test\.conf:6/],
    ['keyauth_shared_limits refuses a database number rather than ignore it',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://127.0.0.1:6379/2;",
     qr/no path or database number after host:port/],
    ['keyauth_shared_limits: user:password before @',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://secretword\@127.0.0.1;",
     qr/the part before '\@' must be \[user\]:password/],
    ['keyauth_shared_limits: an interval in bounds',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://127.0.0.1 interval=10ms;",
     qr/invalid "keyauth_shared_limits" parameter "interval=10ms": expected 50ms to 5000ms/],
    ['keyauth_shared_limits: an unknown parameter',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://127.0.0.1 tls=on;",
     qr/invalid "keyauth_shared_limits" parameter "tls=on": expected interval=, timeout= or key=/],
    ['keyauth_shared_limits: a parameter twice',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://127.0.0.1 timeout=1s timeout=2s;",
     qr/duplicate "keyauth_shared_limits" parameter "timeout=2s"/],
    ['keyauth_shared_limits needs keyauth_zone',
     "keyauth_db $db;\nkeyauth_shared_limits redis://127.0.0.1:6379;",
     qr/"keyauth_shared_limits" needs "keyauth_db" and "keyauth_zone" in the http block/],
    ['keyauth_shared_limits twice',
     "keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://127.0.0.1;\nkeyauth_shared_limits redis://127.0.0.1;",
     qr/"keyauth_shared_limits" directive is duplicate/],
);

for my $case (@bad) {
    my ($name, $http, $re) = @$case;
    my ($rc, $out) = nginx_t($http);
    isnt $rc, 0, "$name: nginx -t fails";
    like $out, $re, "$name: message with file:line";
}

my ($rc, $out) = nginx_t("keyauth_db $db;\nkeyauth on;\nkeyauth_scope ip:read tools.v2:run-job;\n"
                         . "server { listen 127.0.0.1:1; location /open { keyauth off; } }");
is $rc, 0, 'a valid configuration passes nginx -t' or diag $out;

($rc, $out) = nginx_t("keyauth_db $db;\nserver { listen 127.0.0.1:1;\n"
                      . "location = /api/plans { keyauth_plans; }\n"
                      . "location ^~ /api/plans/ { keyauth_plans; } }");
is $rc, 0, 'keyauth_plans in exact-match and ^~ prefix locations passes nginx -t' or diag $out;

($rc, $out) = nginx_t("keyauth_db $db;\nkeyauth_zone k:1m;\n"
                      . "keyauth_shared_limits redis://edge:pa\@ss\@127.0.0.1:6380 interval=100ms timeout=2s key=fleet:a;");
is $rc, 0, 'keyauth_shared_limits with user, password (an @ in it), port and every parameter passes nginx -t' or diag $out;
($rc, $out) = nginx_t("keyauth_db $db;\nkeyauth_zone k:1m;\nkeyauth_shared_limits redis://:secretword\@no-such-host.invalid;");
isnt $rc, 0, 'keyauth_shared_limits: a host that does not resolve fails nginx -t';
like $out, qr/invalid "keyauth_shared_limits" address "no-such-host.invalid": host not found/, '... naming the host';
unlike $out, qr/secretword/, '... and never the password';

($rc, $out) = nginx_t("server { listen 127.0.0.1:1; location /v1/ip/ { ip_lookup; } }");
is $rc, 0, 'ip_lookup alone needs no store' or diag $out;

# The README's "In front of your own upstream" block, as written, with this
# build's module and store and an upstream for it.
open my $readme, '<', KeyauthTest::root() . '/README.md' or die $!;
my ($snippet) = do { local $/; <$readme> } =~ /## In front of your own upstream\s+```nginx\n(.*?)```/s;
ok $snippet, "README's nginx block found";
my ($inner) = ($snippet // '') =~ /^http \{\n(.*)\}\s*$/ms;
ok $inner, 'it is one http block';
$inner //= '';
$inner =~ s{/var/lib/keyauth/db}{$db};
$inner =~ s/server \{/server { listen 127.0.0.1:1;/;
($rc, $out) = nginx_t("upstream tools { server 127.0.0.1:2; }\n$inner");
is $rc, 0, "README's configuration passes nginx -t" or diag $out;

done_testing;
